"""Policy-gradient losses as pure functions over token tensors.

Each loss returns its *per-token* terms ``[batch, tokens]`` (and which tokens its clipping
silenced); how they add up is the loss's ``aggregation`` (see ``verifiers.rl.configs.rl``), applied
by :func:`aggregate` with normalizers counted over the whole global batch, so micro-batches and
data-parallel ranks add up to exactly the full-batch loss:

- ``sequence_mean`` (GRPO, GSPO): Σ_i (1/|o_i|) Σ_t ℓ_it / N_seq
- ``token_mean`` (DAPO, CISPO): Σ_i Σ_t ℓ_it / N_tok
- ``constant`` (Dr. GRPO): Σ_i Σ_t ℓ_it / (B · L_max), B and L_max fixed by the config

Inputs: the trainer's ``logprobs`` (with gradient), the ``old_logprobs`` the ratio is taken
against (the inference server's, or the trainer's own at the step's start under truncated IS),
``advantages`` (per token: packed rows mix sequences), a 0/1 ``mask`` of the tokens that take
part, and ``segment_ids`` telling the sequences of a packed row apart. The trainer/inference
mismatch correction (masks and truncated weights) is :func:`importance_correction`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch

from verifiers.rl.configs.rl import CISPOLoss, DAPOLoss, DrGRPOLoss, GRPOLoss, GSPOLoss, SFTLoss


class TokenLoss(NamedTuple):
    loss: torch.Tensor  # [B, T] per-token terms, not yet masked or normalized
    clipped: torch.Tensor  # [B, T] bool: tokens whose gradient the clipping removed


def _clipped_surrogate(ratio, adv, cfg) -> TokenLoss:
    """PPO's -min(r·A, clip(r, 1-ε_low, 1+ε_high)·A). Clipping removes a token's gradient only
    on the side its advantage pushes: r > 1+ε_high with A > 0, r < 1-ε_low with A < 0; with
    ``delta`` (two-sided clip) also r > δ with A < 0, where the unclipped r·A is capped at δ·A."""
    unclipped = ratio if cfg.delta is None else torch.clamp(ratio, max=cfg.delta)
    clipped = torch.clamp(ratio, 1 - cfg.clip_low, 1 + cfg.clip_high) * adv
    silenced = ((ratio > 1 + cfg.clip_high) & (adv > 0)) | ((ratio < 1 - cfg.clip_low) & (adv < 0))
    if cfg.delta is not None:
        silenced = silenced | ((ratio > cfg.delta) & (adv < 0))
    return TokenLoss(-torch.minimum(unclipped * adv, clipped), silenced)


def grpo_loss(logprobs, old_logprobs, advantages, mask, cfg: GRPOLoss, segment_ids=None):
    """GRPO's per-token term: the clipped surrogate with r_t = π(o_t)/π_old(o_t)."""
    ratio = torch.exp(logprobs - old_logprobs)
    return _clipped_surrogate(ratio, advantages, cfg)


def dapo_loss(logprobs, old_logprobs, advantages, mask, cfg: DAPOLoss, segment_ids=None):
    """DAPO's per-token term: the clipped surrogate with its asymmetric (clip-higher) bounds."""
    ratio = torch.exp(logprobs - old_logprobs)
    return _clipped_surrogate(ratio, advantages, cfg)


def dr_grpo_loss(logprobs, old_logprobs, advantages, mask, cfg: DrGRPOLoss, segment_ids=None):
    """Dr. GRPO's per-token term: the clipped surrogate (its changes are the constant
    normalizer and unscaled advantages)."""
    ratio = torch.exp(logprobs - old_logprobs)
    return _clipped_surrogate(ratio, advantages, cfg)


def cispo_loss(logprobs, old_logprobs, advantages, mask, cfg: CISPOLoss, segment_ids=None):
    """CISPO's per-token term -sg(min(r, ε_max))·A·log π: no token loses its gradient; the
    weight is bounded above only (a token far above the band weighs ε_max)."""
    with torch.no_grad():
        ratio = torch.exp(logprobs - old_logprobs)
        weight = torch.clamp(ratio, max=cfg.max_weight)
    return TokenLoss(-weight * advantages * logprobs, torch.zeros_like(mask, dtype=torch.bool))


def gspo_loss(logprobs, old_logprobs, advantages, mask, cfg: GSPOLoss, segment_ids=None):
    """GSPO's per-token term. Every token of sequence i carries s_i = exp(mean_t log r_it) as
    ``sg(s_i)·exp(log π_t - sg(log π_t))`` (value s_i, gradient s_i·∇log π_t), so the sequence
    mean of the terms is -min(s_i·A_i, clip(s_i)·A_i) with gradient exactly ∇ of that; the
    clipping decision is the sequence's."""
    if segment_ids is None:
        segment_ids = torch.zeros_like(mask, dtype=torch.long)
    seq = _sequence_index(segment_ids)
    n_seq = int(seq.max()) + 1
    flat_mask = mask.flatten().to(logprobs.dtype)
    lengths = torch.zeros(n_seq, dtype=logprobs.dtype, device=mask.device).index_add_(
        0, seq, flat_mask
    )
    log_ratio = ((logprobs - old_logprobs).detach() * mask).flatten()
    mean_log_ratio = torch.zeros_like(lengths).index_add_(0, seq, log_ratio) / lengths.clamp(min=1)
    seq_ratio = torch.exp(mean_log_ratio)[seq].view_as(logprobs)
    token_ratio = seq_ratio * torch.exp(logprobs - logprobs.detach())
    return _clipped_surrogate(token_ratio, advantages, cfg)


def sft_loss(logprobs, old_logprobs, advantages, mask, cfg: SFTLoss, segment_ids=None):
    """The supervised term -log π(token) (advantages and recorded logprobs are not used)."""
    return TokenLoss(-logprobs, torch.zeros_like(mask, dtype=torch.bool))


def _sequence_index(segment_ids: torch.Tensor) -> torch.Tensor:
    """A unique id per (row, segment), flattened."""
    rows = torch.arange(segment_ids.shape[0], device=segment_ids.device).unsqueeze(1)
    return (rows * (int(segment_ids.max()) + 1) + segment_ids).flatten()


LossFn = Callable[..., TokenLoss]
LOSSES: dict[str, LossFn] = {
    "grpo": grpo_loss,
    "dapo": dapo_loss,
    "dr_grpo": dr_grpo_loss,
    "gspo": gspo_loss,
    "cispo": cispo_loss,
    "sft": sft_loss,
}


def token_weights(
    aggregation: str,
    sequence_lengths: torch.Tensor,
    num_sequences: int,
    num_tokens: int,
    constant: int | None = None,
) -> torch.Tensor | float:
    """What each token's term is multiplied by so the batch sums to the aggregated loss.

    ``sequence_lengths`` ``[B, T]`` is, at each token, its sequence's number of loss tokens;
    the counts are over the global batch (every micro-batch and rank); ``constant`` is Dr.
    GRPO's B·L_max, the same every step whatever was filtered."""
    if aggregation == "sequence_mean":
        return 1.0 / (sequence_lengths.clamp(min=1) * num_sequences)
    if aggregation == "token_mean":
        return 1.0 / num_tokens
    if aggregation == "constant":
        if not constant:
            raise ValueError("the constant aggregation needs its constant (B·L_max)")
        return 1.0 / constant
    raise ValueError(f"unknown aggregation {aggregation!r}")


class Correction(NamedTuple):
    keep: torch.Tensor  # [B, T] the loss mask without the tokens/sequences masked out
    weight: torch.Tensor | float  # [B, T] truncated-IS weights (no gradient), or 1.0


def importance_correction(
    trainer_logprobs: torch.Tensor,
    inference_logprobs: torch.Tensor,
    mask: torch.Tensor,
    segment_ids: torch.Tensor,
    token: tuple[str, float, float],
    sequence: tuple[str, float, float],
) -> Correction:
    """The trainer/inference mismatch correction, from ρ = π_trainer/π_inference per token and
    its geometric mean per sequence: ``mask`` drops what leaves [low, high], ``truncate``
    weights each term by min(ρ, high); each ``(mode, low, high)``, mode ``off`` does nothing."""
    with torch.no_grad():
        keep = mask.clone()
        weight: torch.Tensor | float = 1.0
        log_ratio = (trainer_logprobs - inference_logprobs) * mask
        mode, low, high = token
        if mode != "off":
            ratio = torch.exp(log_ratio)
            if mode == "mask":
                keep = keep * ((ratio >= low) & (ratio <= high)).to(mask.dtype)
            else:
                weight = torch.clamp(ratio, max=high)
        mode, low, high = sequence
        if mode != "off":
            seq = _sequence_index(segment_ids)
            n_seq = int(seq.max()) + 1
            lengths = torch.zeros(n_seq, dtype=log_ratio.dtype, device=mask.device).index_add_(
                0, seq, mask.flatten().to(log_ratio.dtype)
            )
            sums = torch.zeros_like(lengths).index_add_(0, seq, log_ratio.flatten())
            geo = torch.exp(sums / lengths.clamp(min=1))[seq].view_as(mask)
            if mode == "mask":
                keep = keep * ((geo >= low) & (geo <= high)).to(mask.dtype)
            else:
                weight = weight * torch.clamp(geo, max=high)
    return Correction(keep, weight)


def k3(logprobs: torch.Tensor, other_logprobs: torch.Tensor) -> torch.Tensor:
    """Schulman's k3, per token: r - 1 - log r with r = π_other/π. On tokens sampled from π it
    estimates KL(π ‖ π_other) without bias, and it is never negative."""
    log_r = other_logprobs - logprobs
    return torch.exp(log_r) - 1 - log_r
