"""Token logprobs and entropies through the LM head, one chunk of positions at a time, both ways.

Why: the head's logits are [K, V]. For K = 4,096 trained positions and a 49k vocabulary that is
805 MB in fp32, and plain autograd keeps them (with their fp32 copy and the softmax) alive until
backward. Here the projection runs inside one autograd Function that keeps only the hidden
states, the targets and each position's logsumexp and entropy; backward recomputes one chunk's
logits at a time and turns them straight into the gradients of the hidden states and of the head
weight. The head's memory is one chunk's logits (:func:`head_budget_bytes`), whatever K is. When
all positions fit in one chunk, that chunk's log-probabilities are kept for backward instead of
recomputed (the same memory, one matmul fewer).

It runs *inside* the model's forward (the head module is swapped for :class:`_ChunkedHead` for
the call), so FSDP2's hooks, peft wrappers and ``logits_to_keep`` work as for a plain forward.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

LOGIT_COPIES = 3
"""fp32 [chunk, V] tensors alive at once at the head's peak (backward: the logits turned into
log-probabilities, the probabilities turned into the gradient, and its matmul-dtype copy
counted as a whole one)."""


def head_budget_bytes(positions: int, chunk: int, vocab: int, hidden: int) -> int:
    """What the head allocates at its peak, beyond the model's weights: one chunk's logits
    (``LOGIT_COPIES`` fp32 [chunk, V]), the fp32 head-weight gradient it accumulates, and the
    hidden states with their gradient. The fit check and ``benchmarks/lm_head_memory.py`` use it."""
    rows = min(chunk, max(positions, 1))
    return 4 * (LOGIT_COPIES * rows * vocab + vocab * hidden + 2 * positions * hidden)


class _ChunkedLogprobs(torch.autograd.Function):
    """(hidden [N, H], weight [V, H], bias, targets [N]) → (log π(target), entropy), both [N]
    fp32, of softmax((hidden·Wᵀ + b) / temperature), computed ``chunk`` rows at a time."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, targets, temperature, chunk, dtype):
        n = hidden.shape[0]
        logprobs = torch.empty(n, dtype=torch.float32, device=hidden.device)
        lse = torch.empty_like(logprobs)
        entropy = torch.empty_like(logprobs)
        ctx.kept = None  # one chunk only: its log p is kept for backward instead of recomputed
        for start in range(0, n, chunk):
            end = min(start + chunk, n)
            logits = _logits(hidden[start:end], weight, bias, temperature, dtype)
            lse[start:end] = torch.logsumexp(logits, dim=-1)
            picked = logits.gather(1, targets[start:end, None]).squeeze(1)
            logprobs[start:end] = picked - lse[start:end]
            logits.sub_(lse[start:end, None])  # log p, in place
            entropy[start:end] = -(logits.exp() * logits).sum(-1)
            if n <= chunk:
                ctx.kept = logits
            del logits
        ctx.save_for_backward(hidden, weight, bias, targets, lse, entropy)
        ctx.temperature, ctx.chunk, ctx.dtype = temperature, chunk, dtype
        ctx.set_materialize_grads(False)  # an unused entropy gets None, not a zero tensor
        return logprobs, entropy

    @staticmethod
    def backward(ctx, grad_logprobs, grad_entropy):
        hidden, weight, bias, targets, lse, entropy = ctx.saved_tensors
        temperature, chunk, dtype = ctx.temperature, ctx.chunk, ctx.dtype
        want_hidden, want_weight, want_bias = ctx.needs_input_grad[:3]
        grad_hidden = torch.empty_like(hidden) if want_hidden else None
        grad_weight = torch.zeros_like(weight, dtype=torch.float32) if want_weight else None
        grad_bias = torch.zeros_like(bias, dtype=torch.float32) if want_bias else None
        w = weight.to(dtype)
        for start in range(0, hidden.shape[0], chunk):
            end = min(start + chunk, hidden.shape[0])
            h = hidden[start:end].to(dtype)
            # d log p_y / dz = onehot(y) - p;  d H / dz = -p ⊙ (log p + H);  z = logits / T
            if ctx.kept is not None:
                grad, ctx.kept = ctx.kept, None  # log p from forward
            else:
                grad = _logits(h, w, bias, temperature, dtype)
                grad.sub_(lse[start:end, None])  # log p
            scale = torch.zeros(end - start, 1, dtype=torch.float32, device=hidden.device)
            if grad_logprobs is not None:
                scale -= grad_logprobs[start:end, None]
            if grad_entropy is not None:
                g_h = grad_entropy[start:end, None]
                probs = grad.exp()
                grad.add_(entropy[start:end, None]).mul_(probs).mul_(-g_h)
                grad.add_(probs.mul_(scale))
                del probs
            else:
                grad.exp_().mul_(scale)
            if grad_logprobs is not None:
                grad.scatter_add_(1, targets[start:end, None], grad_logprobs[start:end, None])
            grad.div_(temperature)
            g = grad.to(dtype)
            del grad
            if grad_hidden is not None:
                grad_hidden[start:end] = (g @ w).to(hidden.dtype)
            if grad_weight is not None:
                grad_weight += (g.T @ h).float()
            if grad_bias is not None:
                grad_bias += g.float().sum(0)
            del g
        grad_weight = grad_weight.to(weight.dtype) if grad_weight is not None else None
        grad_bias = grad_bias.to(bias.dtype) if grad_bias is not None else None
        return grad_hidden, grad_weight, grad_bias, None, None, None, None


def _logits(hidden, weight, bias, temperature: float, dtype: torch.dtype) -> torch.Tensor:
    """One chunk's fp32 logits / temperature, the matmul in ``dtype`` (autocast's, or fp32)."""
    out = hidden.to(dtype) @ weight.to(dtype).T
    if bias is not None:
        out = out + bias.to(dtype)
    return out.float().div_(temperature)


class _ChunkedHead(torch.nn.Module):
    """Stands in for the LM head during one forward: takes the hidden states the model would
    project and returns [B, K, 2] (log π of each target, entropy) instead of [B, K, V] logits.
    The entropy carries a gradient only when ``entropy_grad`` (an entropy bonus)."""

    def __init__(self, head, targets, temperature, chunk, dtype, entropy_grad: bool) -> None:
        super().__init__()
        self.head = head
        self.targets, self.temperature, self.chunk, self.dtype = targets, temperature, chunk, dtype
        self.entropy_grad = entropy_grad

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        batch, positions, width = hidden.shape
        logprobs, entropy = _ChunkedLogprobs.apply(
            hidden.reshape(batch * positions, width),
            self.head.weight,
            self.head.bias,
            self.targets.reshape(-1),
            self.temperature,
            self.chunk,
            self.dtype,
        )
        if not self.entropy_grad:
            entropy = entropy.detach()
        return torch.stack([logprobs, entropy], dim=-1).view(batch, positions, 2)


def head_dtype(model: Any, device: torch.device) -> torch.dtype:
    """The dtype the head's matmul runs in: autocast's when it is on, else the weight's."""
    if torch.is_autocast_enabled(device.type):
        return torch.get_autocast_dtype(device.type)
    return model.get_output_embeddings().weight.dtype


@contextlib.contextmanager
def chunked_head(
    model: Any, targets: torch.Tensor, temperature: float, chunk: int, entropy_grad: bool = False
) -> Iterator[None]:
    """Within the block, the model's forward returns (log π(targets), entropy) as its logits."""
    head = model.get_output_embeddings()
    if not isinstance(head, torch.nn.Linear) or type(head) is not torch.nn.Linear:
        raise TypeError(
            f"the LM head is a {type(head).__name__}, not a plain linear layer: the chunked head "
            "needs its weight (a LoRA adapter on lm_head is not supported; leave it out of "
            "trainer.lora.target_modules)"
        )
    owner = _head_owner(model, head)
    device = head.weight.device
    dtype = head_dtype(model, device)
    stand_in = _ChunkedHead(head, targets, temperature, chunk, dtype, entropy_grad)
    name = _child_name(owner, head)
    setattr(owner, name, stand_in)
    try:
        yield
    finally:
        setattr(owner, name, head)


def _head_owner(model: Any, head: torch.nn.Module) -> torch.nn.Module:
    for module in model.modules():
        if any(child is head for child in module.children()):
            return module
    raise TypeError("the LM head is not a submodule of the model")


def _child_name(owner: torch.nn.Module, head: torch.nn.Module) -> str:
    return next(name for name, child in owner.named_children() if child is head)
