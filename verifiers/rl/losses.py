"""Policy-gradient losses as pure functions over token tensors.

Each loss returns its *per-token* terms ``[batch, tokens]`` (and which tokens its clipping
silenced); how they add up is the loss's ``aggregation`` (see ``verifiers.rl.config``), applied
by :func:`aggregate` with normalizers counted over the whole global batch, so micro-batches and
data-parallel ranks add up to exactly the full-batch loss:

- ``sequence_mean`` (GRPO, GSPO): Σ_i (1/|o_i|) Σ_t ℓ_it / N_seq
- ``token_mean`` (DAPO, CISPO): Σ_i Σ_t ℓ_it / N_tok
- ``constant`` (Dr. GRPO): Σ_i Σ_t ℓ_it / (N_seq · L_max)

Inputs: the trainer's ``logprobs`` (with gradient), the ``old_logprobs`` the inference server
reported when sampling, ``advantages`` (per token: packed rows mix sequences), a 0/1 ``mask`` of
the tokens that take part, and ``segment_ids`` telling the sequences of a packed row apart.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch

from verifiers.rl.config import CISPOLoss, DAPOLoss, DrGRPOLoss, GRPOLoss, GSPOLoss, SFTLoss


class TokenLoss(NamedTuple):
    loss: torch.Tensor  # [B, T] per-token terms, not yet masked or normalized
    clipped: torch.Tensor  # [B, T] bool: tokens whose gradient the clipping removed


def _clipped_surrogate(ratio, adv, clip_low: float, clip_high: float) -> TokenLoss:
    """PPO's -min(r·A, clip(r, 1-ε_low, 1+ε_high)·A). Clipping removes a token's gradient only
    on the side its advantage pushes: r > 1+ε_high with A > 0, r < 1-ε_low with A < 0."""
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1 - clip_low, 1 + clip_high) * adv
    silenced = ((ratio > 1 + clip_high) & (adv > 0)) | ((ratio < 1 - clip_low) & (adv < 0))
    return TokenLoss(-torch.minimum(unclipped, clipped), silenced)


def grpo_loss(logprobs, old_logprobs, advantages, mask, cfg: GRPOLoss, segment_ids=None):
    """GRPO's per-token term: the clipped surrogate with r_t = π(o_t)/π_old(o_t)."""
    ratio = torch.exp(logprobs - old_logprobs)
    return _clipped_surrogate(ratio, advantages, cfg.clip_low, cfg.clip_high)


def dapo_loss(logprobs, old_logprobs, advantages, mask, cfg: DAPOLoss, segment_ids=None):
    """DAPO's per-token term: the clipped surrogate with its asymmetric (clip-higher) bounds."""
    ratio = torch.exp(logprobs - old_logprobs)
    return _clipped_surrogate(ratio, advantages, cfg.clip_low, cfg.clip_high)


def dr_grpo_loss(logprobs, old_logprobs, advantages, mask, cfg: DrGRPOLoss, segment_ids=None):
    """Dr. GRPO's per-token term: the clipped surrogate (its changes are the constant
    normalizer and unscaled advantages)."""
    ratio = torch.exp(logprobs - old_logprobs)
    return _clipped_surrogate(ratio, advantages, cfg.clip_low, cfg.clip_high)


def cispo_loss(logprobs, old_logprobs, advantages, mask, cfg: CISPOLoss, segment_ids=None):
    """CISPO's per-token term -sg(min(r, max_weight))·A·log π: no token loses its gradient;
    the weight is bounded above only."""
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
    return _clipped_surrogate(token_ratio, advantages, cfg.clip_low, cfg.clip_high)


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
    max_completion_tokens: int,
) -> torch.Tensor | float:
    """What each token's term is multiplied by so the batch sums to the aggregated loss.

    ``sequence_lengths`` ``[B, T]`` is, at each token, its sequence's number of loss tokens;
    the counts are over the global batch (every micro-batch and rank)."""
    if aggregation == "sequence_mean":
        return 1.0 / (sequence_lengths.clamp(min=1) * num_sequences)
    if aggregation == "token_mean":
        return 1.0 / num_tokens
    if aggregation == "constant":
        return 1.0 / (num_sequences * max_completion_tokens)
    raise ValueError(f"unknown aggregation {aggregation!r}")


def importance_mask(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    mask: torch.Tensor,
    segment_ids: torch.Tensor,
    token_band: tuple[float, float] | None,
    sequence_band: tuple[float, float] | None,
) -> torch.Tensor:
    """The loss mask without tokens whose trainer/inference ratio leaves ``token_band``, and
    without whole sequences whose geometric-mean ratio leaves ``sequence_band`` (no gradient)."""
    with torch.no_grad():
        keep = mask.clone()
        log_ratio = (logprobs - old_logprobs) * mask
        if token_band is not None:
            ratio = torch.exp(log_ratio)
            keep = keep * ((ratio >= token_band[0]) & (ratio <= token_band[1])).to(mask.dtype)
        if sequence_band is not None:
            seq = _sequence_index(segment_ids)
            n_seq = int(seq.max()) + 1
            lengths = torch.zeros(n_seq, dtype=log_ratio.dtype, device=mask.device).index_add_(
                0, seq, mask.flatten().to(log_ratio.dtype)
            )
            sums = torch.zeros_like(lengths).index_add_(0, seq, log_ratio.flatten())
            geo = torch.exp(sums / lengths.clamp(min=1))
            inside = (geo >= sequence_band[0]) & (geo <= sequence_band[1])
            keep = keep * inside[seq].view_as(mask).to(mask.dtype)
    return keep


def k3(logprobs: torch.Tensor, other_logprobs: torch.Tensor) -> torch.Tensor:
    """Schulman's k3, per token: r - 1 - log r with r = π_other/π. On tokens sampled from π it
    estimates KL(π ‖ π_other) without bias, and it is never negative."""
    log_r = other_logprobs - logprobs
    return torch.exp(log_r) - 1 - log_r
