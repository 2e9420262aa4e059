"""From rollouts to token batches: samples with loss masks, then padded or packed micro-batches.

Model tokens are used exactly as the inference server produced them (ids and logprobs from the
trajectory); prompt and environment tokens are in the sequence but masked out of the loss. A
multi-turn rollout is one sample while each turn's prompt extends the previous sequence; where a
chat template re-renders history differently, the next turn starts a new sample.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import torch

from verifiers.errors import VFError
from verifiers.rl.algorithm.head import chunked_head

logger = logging.getLogger("verifiers.rl")


@dataclass
class Sample:
    input_ids: list[int]
    loss_mask: list[int]  # 1 where the model produced the token
    old_logprobs: list[float]  # the server's logprob of each model token (0 elsewhere)
    advantage: float
    reward: float
    policy_version: int  # the oldest policy that produced any of its tokens
    record: bool = False  # keep the trainer's logprobs of it (a group vf-report shows)
    trainer_logprobs: list[float] | None = None  # set by the trainer when ``record``

    def __len__(self) -> int:
        return len(self.input_ids)


class MissingTokensError(VFError, ValueError):
    """The inference server did not return token ids/logprobs, which training needs."""


def samples_from_state(
    state: dict[str, Any], advantage: float, policy_version: int
) -> list[Sample]:
    samples: list[Sample] = []
    ids: list[int] = []
    mask: list[int] = []
    logprobs: list[float] = []

    def flush() -> None:
        if ids and any(mask):
            samples.append(
                Sample(
                    list(ids),
                    list(mask),
                    list(logprobs),
                    advantage,
                    float(state.get("reward") or 0.0),
                    policy_version,
                )
            )

    for step in state.get("trajectory") or []:
        tokens = step.get("tokens")
        if not tokens:
            raise MissingTokensError(
                "a trajectory step has no token ids: serve the policy with vf-serve or vLLM and request "
                "logprobs with return_token_ids"
            )
        prompt = list(tokens["prompt_ids"])
        if ids and prompt[: len(ids)] == ids:
            extra = prompt[len(ids) :]
        else:
            flush()
            ids, mask, logprobs = [], [], []
            extra = prompt
        ids += extra
        mask += [0] * len(extra)
        logprobs += [0.0] * len(extra)
        completion = list(tokens["completion_ids"])
        ids += completion
        mask += [1] * len(completion)
        logprobs += list(tokens["completion_logprobs"])[: len(completion)]
    flush()
    return samples


@dataclass
class MicroBatch:
    input_ids: torch.Tensor  # [B, L]
    position_ids: torch.Tensor  # [B, L]: restart at 0 for each sequence of a packed row
    attention_mask: torch.Tensor | None  # [B, L] padding mask; None for a packed row
    loss_mask: torch.Tensor  # [B, L] float
    old_logprobs: torch.Tensor  # [B, L]
    advantages: torch.Tensor  # [B, L] (per token: packed rows mix samples)
    segment_ids: torch.Tensor  # [B, L] sample index within the row
    sequence_lengths: torch.Tensor  # [B, L] loss tokens of each token's sample
    members: list[list[Sample]] = field(default_factory=list)  # per row, its samples in order
    # with shared prompts (verifiers.rl.algorithm.shared_prompts): each row's prompt, and how
    # many of its leading tokens that prompt is
    prompt_rows: torch.Tensor | None = None  # [B]
    prompt_lengths: torch.Tensor | None = None  # [B]

    def to(self, device: torch.device) -> MicroBatch:
        moved: dict[str, Any] = {
            name: None if getattr(self, name) is None else getattr(self, name).to(device)
            for name in self.__dataclass_fields__
            if name != "members"
        }
        return MicroBatch(**moved, members=self.members)

    def record_logprobs(self, logprobs: torch.Tensor) -> None:
        """Give each ``record`` sample its trainer logprobs (one host copy per micro-batch)."""
        if not any(s.record for row in self.members for s in row):
            return
        values = logprobs.detach().float().cpu()
        for row, samples in enumerate(self.members):
            start = 0
            for sample in samples:
                if sample.record:
                    sample.trainer_logprobs = values[row, start : start + len(sample)].tolist()
                start += len(sample)

    @property
    def packed(self) -> bool:
        return self.attention_mask is None

    @property
    def num_loss_tokens(self) -> int:
        return int(self.loss_mask.sum().item())

    @property
    def num_sequences(self) -> int:
        """Samples with loss tokens in this micro-batch."""
        count = 0
        for row in range(self.loss_mask.shape[0]):
            segments = self.segment_ids[row][self.loss_mask[row] > 0]
            count += int(torch.unique(segments).numel())
        return count


def padded(
    samples: list[Sample], micro_batch_size: int, pad_id: int = 0, max_tokens: int | None = None
) -> list[MicroBatch]:
    """Right-padded micro-batches of at most ``micro_batch_size`` samples and, with
    ``max_tokens``, at most that many tokens counting padding (batch × longest). Samples are
    batched in the order given: sort them by length first to waste little on padding."""
    out = []
    for chunk in _chunks(samples, micro_batch_size, max_tokens):
        width = max(len(s) for s in chunk)
        batch = {
            k: torch.zeros((len(chunk), width), dtype=t)
            for k, t in (
                ("input_ids", torch.long),
                ("position_ids", torch.long),
                ("attention_mask", torch.long),
                ("loss_mask", torch.float32),
                ("old_logprobs", torch.float32),
                ("advantages", torch.float32),
                ("segment_ids", torch.long),
                ("sequence_lengths", torch.float32),
            )
        }
        batch["input_ids"].fill_(pad_id)
        for i, s in enumerate(chunk):
            n = len(s)
            batch["input_ids"][i, :n] = torch.tensor(s.input_ids)
            batch["position_ids"][i, :n] = torch.arange(n)
            batch["attention_mask"][i, :n] = 1
            batch["loss_mask"][i, :n] = torch.tensor(s.loss_mask, dtype=torch.float32)
            batch["old_logprobs"][i, :n] = torch.tensor(s.old_logprobs, dtype=torch.float32)
            batch["advantages"][i, :n] = s.advantage
            batch["sequence_lengths"][i, :n] = float(sum(s.loss_mask))
        out.append(MicroBatch(**batch, members=[[s] for s in chunk]))
    return out


def _chunks(samples: list[Sample], size: int, max_tokens: int | None) -> list[list[Sample]]:
    chunks: list[list[Sample]] = []
    for sample in samples:
        if chunks:
            last = chunks[-1]
            width = max(len(sample), *(len(s) for s in last))
            fits = max_tokens is None or width * (len(last) + 1) <= max_tokens
            if len(last) < size and fits:
                last.append(sample)
                continue
        chunks.append([sample])
    return chunks


def packed(samples: list[Sample], max_tokens: int, pad_id: int = 0) -> list[MicroBatch]:
    """Samples concatenated into rows of at most ``max_tokens`` (first fit, in order), one row per
    micro-batch. Position ids restart at each sample; :func:`model_inputs` turns them into the
    attention that keeps samples apart for the model's attention implementation.

    A sample longer than ``max_tokens`` gets a row of its own (and a warning) rather than
    failing the step: one long rollout must not end a training run."""
    rows: list[list[Sample]] = []
    for sample in samples:
        if len(sample) > max_tokens:
            logger.warning(
                "a sample of %d tokens exceeds max_tokens_per_micro_batch=%d; trained alone",
                len(sample),
                max_tokens,
            )
            rows.append([sample])
            continue
        for row in rows:
            if sum(len(s) for s in row) + len(sample) <= max_tokens:
                row.append(sample)
                break
        else:
            rows.append([sample])
    out = []
    for row in rows:
        ids, pos, loss, old, adv, seg, lengths = [], [], [], [], [], [], []
        for index, s in enumerate(row):
            ids += s.input_ids
            pos += list(range(len(s)))
            loss += s.loss_mask
            old += s.old_logprobs
            adv += [s.advantage] * len(s)
            seg += [index] * len(s)
            lengths += [float(sum(s.loss_mask))] * len(s)
        out.append(
            MicroBatch(
                input_ids=torch.tensor([ids]),
                position_ids=torch.tensor([pos]),
                attention_mask=None,
                loss_mask=torch.tensor([loss], dtype=torch.float32),
                old_logprobs=torch.tensor([old], dtype=torch.float32),
                advantages=torch.tensor([adv], dtype=torch.float32),
                segment_ids=torch.tensor([seg]),
                sequence_lengths=torch.tensor([lengths], dtype=torch.float32),
                members=[list(row)],
            )
        )
    return out


VARLEN_ATTENTION = ("flash_attention_2", "flash_attention_3")
"""Implementations that read sequence boundaries from position ids (varlen kernels)."""
MASKED_ATTENTION = ("sdpa", "eager")
"""Implementations that take a 4-D additive mask (eager ignores a boolean one)."""


class PackingError(VFError, ValueError):
    """The model's attention cannot keep packed samples apart; training on it would be wrong."""


def attention_implementation(model: Any) -> str:
    config = getattr(model, "config", None)
    return str(getattr(config, "_attn_implementation", None) or "eager")


def packing_mode(model: Any, requested: str) -> str:
    """What ``trainer.packing`` means for this model: ``varlen``, ``masked`` or ``off``; a mode
    the model's attention cannot do correctly is refused (PackingError), never trained wrong."""
    implementation = attention_implementation(model)
    if requested == "auto":
        return "varlen" if implementation in VARLEN_ATTENTION else "off"
    supported = {"varlen": VARLEN_ATTENTION, "masked": MASKED_ATTENTION}.get(requested)
    if supported is not None and implementation not in supported:
        raise PackingError(
            f"packing = {requested!r} needs attention that keeps packed samples apart "
            f"({', '.join(supported)}); the model uses {implementation!r}: set trainer.packing "
            '= "auto" or "off"'
        )
    return requested


def model_inputs(
    model: Any, batch: MicroBatch, dtype: torch.dtype
) -> dict[str, torch.Tensor | None]:
    """The forward arguments for ``batch``: a padding mask, or for a packed row either position
    ids alone (varlen attention) or a block-diagonal causal additive mask."""
    inputs: dict[str, torch.Tensor | None] = {
        "input_ids": batch.input_ids,
        "position_ids": batch.position_ids,
    }
    if not batch.packed:
        inputs["attention_mask"] = batch.attention_mask
        return inputs
    if attention_implementation(model) in VARLEN_ATTENTION:
        return inputs
    packing_mode(model, "masked")  # raises unless the additive mask below is honoured
    segments = batch.segment_ids[0]
    n = segments.shape[0]
    causal = torch.ones(n, n, dtype=torch.bool, device=segments.device).tril()
    allowed = (segments[:, None] == segments[None, :]) & causal
    additive = torch.zeros(n, n, dtype=dtype, device=segments.device)
    additive.masked_fill_(~allowed, torch.finfo(dtype).min)
    inputs["attention_mask"] = additive[None, None]
    return inputs


def token_logprobs(
    model: Any,
    batch: MicroBatch,
    temperature: float = 1.0,
    chunk: int = 1024,
    entropy_grad: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """log π(token_t | tokens_<t) and the policy's entropy at each position that predicts a loss
    token (0 elsewhere), both ``[B, L]``; the entropy has a gradient only with ``entropy_grad``.

    π is the distribution tokens were sampled from, softmax(logits / temperature): the one whose
    logprobs the inference server reports (vf-serve; vLLM with processed_logprobs), so the
    importance ratio is 1 when the weights are the same. Only positions that predict a loss token
    reach the head (``logits_to_keep``), and the head runs ``chunk`` positions at a time forward
    and backward (``verifiers.rl.algorithm.head``): no [L, V] logits exist, over prompt tokens or any.
    """
    targets = batch.loss_mask[:, 1:].sum(0) > 0
    keep = torch.nonzero(targets).squeeze(-1)  # logits at t predict token t + 1
    if keep.numel() == 0:  # nothing to train, but the graph must still reach every parameter
        keep = torch.zeros(1, dtype=torch.long, device=targets.device)
    dtype = next(model.parameters()).dtype
    tokens = batch.input_ids[:, keep + 1]
    with chunked_head(model, tokens, temperature, chunk, entropy_grad):
        out = model(**model_inputs(model, batch, dtype), logits_to_keep=keep).logits
    shape = batch.input_ids.shape
    logprobs = torch.zeros(shape, dtype=torch.float32, device=batch.input_ids.device)
    entropy = torch.zeros(shape, dtype=torch.float32, device=batch.input_ids.device)
    logprobs[:, keep + 1] = out[..., 0]
    entropy[:, keep + 1] = out[..., 1]
    return logprobs, entropy
