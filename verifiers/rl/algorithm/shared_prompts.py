"""Samples that start with the same prompt, trained with that prompt computed once.

Why: GRPO samples every prompt ``rollouts_per_example`` times, and the prompt is usually most of
a sample's tokens (the uppercase job: ~49 prompt tokens, ~27 completion tokens). Padded
micro-batches run the prompt's forward and backward once per sample. Here each distinct prompt of
a block runs once (a batch of prompts, with its KV cache); the samples' remaining tokens run as
micro-batches on top of that cache, and the gradient reaching the cache's keys and values is
accumulated over the micro-batches and sent back through the prompts' forward once at the end of
the block. By the chain rule that is the same gradient as running every sample whole (equal up
to float rounding; tests/rl/test_rl_shared_prompts.py compares both).

What is shared is ``input_ids[:p]`` with ``p`` one less than the sample's first loss token: the
logits at ``p`` predict that token, so every position the loss reads lies after the prefix and
the micro-batches keep their whole-sequence layout (``MicroBatch`` as :func:`padded` makes it),
with only the forward changed. Used for padded micro-batches on one process without gradient
checkpointing (transformers turns the cache off under checkpointing); anything else trains
whole samples as before.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import torch

from verifiers.rl.algorithm.batching import MicroBatch, Sample, padded
from verifiers.rl.algorithm.head import chunked_head


@dataclass
class PromptBatch:
    """A block's distinct prompts, right-padded: ``[G, P]``."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    position_ids: torch.Tensor

    def to(self, device: torch.device) -> PromptBatch:
        return PromptBatch(*(t.to(device) for t in vars(self).values()))


@dataclass
class PromptBlock:
    """Distinct prompts and the micro-batches of the samples that continue them."""

    prompts: PromptBatch
    batches: list[MicroBatch]


def supports(model: Any) -> bool:
    """Whether ``model``'s layers all attend to the whole sequence, and its forward takes
    ``logits_to_keep``: what continuing from a cut KV cache was checked against. A model with
    sliding-window layers (their caches keep a window, not the prompt) trains whole samples."""
    config = getattr(model, "config", None)
    layer_types = getattr(config, "layer_types", None)
    if layer_types is not None and any(kind != "full_attention" for kind in layer_types):
        return False
    if layer_types is None and getattr(config, "sliding_window", None):
        if getattr(config, "use_sliding_window", True):
            return False
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "logits_to_keep" in inspect.signature(type(base).forward).parameters


def prompt_length(sample: Sample) -> int:
    """How many leading tokens of ``sample`` the loss never reads: all before the position
    whose logits predict its first loss token (0: none)."""
    first = next((i for i, m in enumerate(sample.loss_mask) if m), 0)
    return max(first - 1, 0)


def prompt_blocks(
    samples: list[Sample], micro_batch_size: int, pad_id: int, max_tokens: int
) -> list[PromptBlock] | None:
    """The samples as blocks of distinct prompts (at most ``max_tokens`` prompt tokens,
    counting padding, in a block) with their micro-batches (at most ``micro_batch_size``
    samples and ``max_tokens`` tokens counting the block's prompt width, sorted by what follows
    the prompt: little padding). None when no two samples share a prompt (nothing to gain)."""
    keys: dict[tuple[int, ...], list[Sample]] = {}
    for sample in samples:
        length = prompt_length(sample)
        if length == 0:
            return None
        keys.setdefault(tuple(sample.input_ids[:length]), []).append(sample)
    if len(keys) == len(samples):
        return None
    groups: list[list[tuple[tuple[int, ...], list[Sample]]]] = [[]]
    for key, members in keys.items():
        block = groups[-1]
        width = max([len(key), *(len(k) for k, _ in block)])
        if block and width * (len(block) + 1) > max_tokens:
            groups.append([])
        groups[-1].append((key, members))
    return [_block(block, micro_batch_size, pad_id, max_tokens) for block in groups]


def _block(
    block: list[tuple[tuple[int, ...], list[Sample]]],
    micro_batch_size: int,
    pad_id: int,
    max_tokens: int,
) -> PromptBlock:
    width = max(len(key) for key, _ in block)
    ids = torch.full((len(block), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(block), width), dtype=torch.long)
    for row, (key, _) in enumerate(block):
        ids[row, : len(key)] = torch.tensor(key)
        mask[row, : len(key)] = 1
    positions = torch.arange(width).expand(len(block), width).clone()
    rows = {id(s): row for row, (_, members) in enumerate(block) for s in members}
    lengths = {id(s): len(key) for key, members in block for s in members}
    ordered = sorted(
        (s for _, members in block for s in members), key=lambda s: len(s) - lengths[id(s)]
    )
    batches = []
    for chunk in _chunks(ordered, lengths, micro_batch_size, width, max_tokens):
        (batch,) = padded(chunk, len(chunk), pad_id)
        batch.prompt_rows = torch.tensor([rows[id(s)] for s in chunk])
        batch.prompt_lengths = torch.tensor([lengths[id(s)] for s in chunk])
        batches.append(batch)
    return PromptBlock(PromptBatch(ids, mask, positions), batches)


def _chunks(
    samples: list[Sample], lengths: dict[int, int], size: int, prompt: int, max_tokens: int
) -> list[list[Sample]]:
    chunks: list[list[Sample]] = []
    for sample in samples:
        if chunks:
            last = chunks[-1]
            rest = max(len(s) - lengths[id(s)] for s in [*last, sample])
            if len(last) < size and (prompt + rest) * (len(last) + 1) <= max_tokens:
                last.append(sample)
                continue
        chunks.append([sample])
    return chunks


def _cache_argument(model: Any) -> str:
    """transformers 5 renamed the forward's ``past_key_values`` to ``cache``."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return (
        "cache"
        if "cache" in inspect.signature(type(base).forward).parameters
        else "past_key_values"
    )


def prompt_cache(model: Any, prompts: PromptBatch) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Every layer's (keys, values) of the prompts, with their graph (one forward of the
    prompts; the head's one kept position is left unused)."""
    out = model(
        input_ids=prompts.input_ids,
        attention_mask=prompts.attention_mask,
        position_ids=prompts.position_ids,
        use_cache=True,
        logits_to_keep=1,
    )
    cache = getattr(out, "cache", None) or out.past_key_values
    return [(layer.keys, layer.values) for layer in cache.layers]


def suffix_logprobs(
    model: Any,
    batch: MicroBatch,
    prompts: PromptBatch,
    kv: list[tuple[torch.Tensor, torch.Tensor]],
    temperature: float = 1.0,
    chunk: int = 1024,
    entropy_grad: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """What :func:`verifiers.rl.algorithm.batching.token_logprobs` returns for ``batch``
    (``[B, L]``, the same values at every position the loss reads), with each row's prompt
    taken from ``kv`` (the rows of ``prompts`` given by ``batch.prompt_rows``) instead of
    being computed again."""
    from transformers import DynamicCache

    assert batch.prompt_rows is not None and batch.prompt_lengths is not None
    rows, starts = batch.prompt_rows, batch.prompt_lengths
    assert batch.attention_mask is not None  # padded, never packed
    lengths = batch.attention_mask.sum(1)
    width = batch.input_ids.shape[1]
    span = int((lengths - starts).max())
    columns = starts[:, None] + torch.arange(span, device=starts.device)[None]
    valid = columns < lengths[:, None]
    inside = columns.clamp(max=width - 1)
    ids = batch.input_ids.gather(1, inside)
    loss_mask = batch.loss_mask.gather(1, inside) * valid
    targets = loss_mask[:, 1:].sum(0) > 0
    keep = torch.nonzero(targets).squeeze(-1)  # logits at t predict token t + 1
    if keep.numel() == 0:  # nothing to train, but the graph must still reach every parameter
        keep = torch.zeros(1, dtype=torch.long, device=targets.device)
    cache = DynamicCache(
        ddp_cache_data=[(keys[rows], values[rows]) for keys, values in kv], config=model.config
    )
    mask = torch.cat([prompts.attention_mask[rows], valid.long()], dim=1)
    with chunked_head(model, ids[:, keep + 1], temperature, chunk, entropy_grad):
        out = model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=columns,
            use_cache=True,
            logits_to_keep=keep,
            **{_cache_argument(model): cache},
        ).logits
    # back to the whole-sequence layout; positions past a row's end land in a column dropped after
    target = torch.where(valid, columns, width)
    results = []
    for index in (0, 1):
        values = torch.zeros(ids.shape, dtype=torch.float32, device=ids.device)
        values[:, keep + 1] = out[..., index]
        whole = torch.zeros((ids.shape[0], width + 1), dtype=torch.float32, device=ids.device)
        results.append(whole.scatter(1, target, values)[:, :width])
    return results[0], results[1]


def cache_leaves(
    kv: list[tuple[torch.Tensor, torch.Tensor]],
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The cache cut from the prompts' graph: the micro-batches' backward stops here and leaves
    its gradient on these tensors."""
    return [(k.detach().requires_grad_(), v.detach().requires_grad_()) for k, v in kv]


def backward_prompts(
    kv: list[tuple[torch.Tensor, torch.Tensor]], leaves: list[tuple[torch.Tensor, torch.Tensor]]
) -> None:
    """Send the gradient the micro-batches left on the cache's ``leaves`` through the prompts'
    forward (``kv``, with its graph), once."""
    outputs, grads = [], []
    for pair, leaf_pair in zip(kv, leaves, strict=True):
        for tensor, leaf in zip(pair, leaf_pair, strict=True):
            if leaf.grad is not None:
                outputs.append(tensor)
                grads.append(leaf.grad)
    if outputs:
        torch.autograd.backward(outputs, grads)
