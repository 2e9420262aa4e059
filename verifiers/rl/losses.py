"""Policy-gradient losses as pure functions over token tensors.

Every loss takes the same inputs, all of shape ``[batch, tokens]`` except ``advantages``
(``[batch]``): the trainer's ``logprobs`` (with gradient), the ``old_logprobs`` the inference server
reported when sampling, and a 0/1 ``mask`` of tokens the model produced. Each returns the *sum*
of per-token losses divided by ``num_loss_tokens``, the number of loss tokens in the whole global
batch, so micro-batches and data-parallel ranks add up to exactly the full-batch loss.

At ratio 1 (``logprobs == old_logprobs``) every loss's gradient w.r.t. a token's logprob is the
REINFORCE gradient ``-advantage / num_loss_tokens`` (GSPO: divided by the sequence length too,
as its sequence-level ratio averages over tokens).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

LossFn = Callable[..., torch.Tensor]


@dataclass(frozen=True)
class LossConfig:
    name: str = "grpo"
    clip_low: float = 0.2  # ratio lower bound is 1 - clip_low
    clip_high: float = 0.2  # ratio upper bound is 1 + clip_high (DAPO raises this: "clip-higher")
    is_low: float = (
        0.0  # trainer/inference mismatch: tokens whose ratio leaves [is_low, is_high] are masked
    )
    is_high: float = float("inf")


def _ratio(logprobs: torch.Tensor, old_logprobs: torch.Tensor) -> torch.Tensor:
    return torch.exp(logprobs - old_logprobs)


def _per_token(advantages: torch.Tensor) -> torch.Tensor:
    """Advantages as [B, T]: one per sequence ([B]) broadcast, or already per token (packed rows)."""
    return advantages if advantages.dim() == 2 else advantages.unsqueeze(1)


def importance_mask(
    logprobs: torch.Tensor, old_logprobs: torch.Tensor, mask: torch.Tensor, cfg: LossConfig
) -> torch.Tensor:
    """Drop tokens whose trainer/inference probability ratio is outside the band (no gradient)."""
    with torch.no_grad():
        ratio = _ratio(logprobs, old_logprobs)
        keep = (ratio >= cfg.is_low) & (ratio <= cfg.is_high)
    return mask * keep.to(mask.dtype)


def grpo_loss(
    logprobs, old_logprobs, advantages, mask, num_loss_tokens, cfg: LossConfig = LossConfig()
) -> torch.Tensor:
    """PPO-style clipped surrogate per token: -min(r·A, clip(r, 1-ε_low, 1+ε_high)·A)."""
    mask = importance_mask(logprobs, old_logprobs, mask, cfg)
    ratio = _ratio(logprobs, old_logprobs)
    adv = _per_token(advantages)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1 - cfg.clip_low, 1 + cfg.clip_high) * adv
    per_token = -torch.minimum(unclipped, clipped)
    return (per_token * mask).sum() / num_loss_tokens


def dapo_loss(
    logprobs,
    old_logprobs,
    advantages,
    mask,
    num_loss_tokens,
    cfg: LossConfig = LossConfig(clip_low=0.2, clip_high=0.28),
) -> torch.Tensor:
    """DAPO: the clipped surrogate with asymmetric clipping ("clip-higher"), token-level averaging."""
    return grpo_loss(logprobs, old_logprobs, advantages, mask, num_loss_tokens, cfg)


def dr_grpo_loss(
    logprobs, old_logprobs, advantages, mask, num_loss_tokens, cfg: LossConfig = LossConfig()
) -> torch.Tensor:
    """Dr. GRPO: the same surrogate; its fixes live in the normalizer (a constant token count, not
    per-sequence lengths) and in advantages without std scaling (``group_mean(scale=False)``)."""
    return grpo_loss(logprobs, old_logprobs, advantages, mask, num_loss_tokens, cfg)


def cispo_loss(
    logprobs,
    old_logprobs,
    advantages,
    mask,
    num_loss_tokens,
    cfg: LossConfig = LossConfig(clip_low=1.0, clip_high=4.0),
) -> torch.Tensor:
    """CISPO: REINFORCE weighted by the clipped, stop-gradient IS ratio: -sg(clip(r))·A·log π.

    Unlike PPO clipping, no token loses its gradient; only the weight is bounded.
    """
    mask = importance_mask(logprobs, old_logprobs, mask, cfg)
    with torch.no_grad():
        weight = torch.clamp(
            _ratio(logprobs, old_logprobs), max(0.0, 1 - cfg.clip_low), 1 + cfg.clip_high
        )
    per_token = -weight * _per_token(advantages) * logprobs
    return (per_token * mask).sum() / num_loss_tokens


def gspo_loss(
    logprobs,
    old_logprobs,
    advantages,
    mask,
    num_loss_tokens,
    cfg: LossConfig = LossConfig(clip_low=3e-4, clip_high=4e-4),
    segment_ids: torch.Tensor | None = None,
) -> torch.Tensor:
    """GSPO: a sequence-level ratio s = exp(mean_t(log π - log π_old)), clipped like PPO.

    Each token carries s through ``sg(s)·exp(log π_t - sg(log π_t))`` so that gradients flow per
    token while the clipping decision is made per sequence. ``segment_ids`` separates the
    sequences of a packed row (default: one sequence per row).
    """
    mask = importance_mask(logprobs, old_logprobs, mask, cfg)
    if segment_ids is None:
        segment_ids = torch.zeros_like(mask, dtype=torch.long)
    rows = torch.arange(mask.shape[0], device=mask.device).unsqueeze(1)
    seq = (rows * (int(segment_ids.max()) + 1) + segment_ids).flatten()  # a unique id per sequence
    n_seq = int(seq.max()) + 1
    flat_mask = mask.flatten()
    lengths = (
        torch.zeros(n_seq, dtype=mask.dtype, device=mask.device)
        .index_add_(0, seq, flat_mask)
        .clamp(min=1)
    )
    log_ratio = ((logprobs - old_logprobs) * mask).flatten()
    seq_ratio = torch.exp(
        torch.zeros(n_seq, dtype=log_ratio.dtype, device=mask.device).index_add_(0, seq, log_ratio)
        / lengths
    )
    token_seq_ratio = seq_ratio[seq].view_as(mask)
    token_lengths = lengths[seq].view_as(mask)
    token_ratio = token_seq_ratio.detach() * torch.exp(logprobs - logprobs.detach())
    adv = _per_token(advantages)
    unclipped = token_ratio * adv
    clipped = torch.clamp(token_ratio, 1 - cfg.clip_low, 1 + cfg.clip_high) * adv
    per_token = -torch.minimum(unclipped, clipped) / token_lengths
    return (per_token * mask).sum() / num_loss_tokens


LOSSES: dict[str, LossFn] = {
    "grpo": grpo_loss,
    "dapo": dapo_loss,
    "dr_grpo": dr_grpo_loss,
    "cispo": cispo_loss,
    "gspo": gspo_loss,
}
