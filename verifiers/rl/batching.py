"""From rollouts to token batches: samples with loss masks, then padded or packed micro-batches.

Model tokens are used exactly as the inference server produced them (ids and logprobs from the
trajectory); prompt and environment tokens are in the sequence but masked out of the loss. A
multi-turn rollout is one sample while each turn's prompt extends the previous sequence; where a
chat template re-renders history differently, the next turn starts a new sample.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import torch

logger = logging.getLogger("verifiers.rl")


@dataclass
class Sample:
    input_ids: list[int]
    loss_mask: list[int]  # 1 where the model produced the token
    old_logprobs: list[float]  # the server's logprob of each model token (0 elsewhere)
    advantage: float
    reward: float
    policy_version: int  # the oldest policy that produced any of its tokens

    def __len__(self) -> int:
        return len(self.input_ids)


class MissingTokensError(ValueError):
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
    position_ids: torch.Tensor  # [B, L]
    attention_mask: (
        torch.Tensor
    )  # [B, L] (padding) or [B, 1, L, L] bool (packed, block-diagonal causal)
    loss_mask: torch.Tensor  # [B, L] float
    old_logprobs: torch.Tensor  # [B, L]
    advantages: torch.Tensor  # [B, L] (per token: packed rows mix samples)
    segment_ids: torch.Tensor  # [B, L] sample index within the row (GSPO's sequence ratio)

    def to(self, device: torch.device) -> MicroBatch:
        return MicroBatch(
            **{name: getattr(self, name).to(device) for name in self.__dataclass_fields__}
        )

    @property
    def num_loss_tokens(self) -> int:
        return int(self.loss_mask.sum().item())


def padded(samples: list[Sample], micro_batch_size: int, pad_id: int = 0) -> list[MicroBatch]:
    """Right-padded micro-batches of ``micro_batch_size`` samples."""
    out = []
    for start in range(0, len(samples), micro_batch_size):
        chunk = samples[start : start + micro_batch_size]
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
        out.append(MicroBatch(**batch))
    return out


def packed(samples: list[Sample], max_tokens: int, pad_id: int = 0) -> list[MicroBatch]:
    """Samples concatenated into rows of at most ``max_tokens`` (first fit, in order), one row per
    micro-batch, with a block-diagonal causal mask so samples never attend to each other.

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
        ids, pos, loss, old, adv, seg = [], [], [], [], [], []
        for index, s in enumerate(row):
            ids += s.input_ids
            pos += list(range(len(s)))
            loss += s.loss_mask
            old += s.old_logprobs
            adv += [s.advantage] * len(s)
            seg += [index] * len(s)
        segments = torch.tensor(seg)
        n = len(ids)
        block = (segments[:, None] == segments[None, :]) & torch.tril(
            torch.ones(n, n, dtype=torch.bool)
        )
        out.append(
            MicroBatch(
                input_ids=torch.tensor([ids]),
                position_ids=torch.tensor([pos]),
                attention_mask=block[None, None],
                loss_mask=torch.tensor([loss], dtype=torch.float32),
                old_logprobs=torch.tensor([old], dtype=torch.float32),
                advantages=torch.tensor([adv], dtype=torch.float32),
                segment_ids=segments[None],
            )
        )
    return out


def token_logprobs(model: Any, batch: MicroBatch, temperature: float = 1.0) -> torch.Tensor:
    """log π(token_t | tokens_<t) at every position (0 at the first), shape [B, L].

    π is the distribution tokens were sampled from, softmax(logits / temperature): the one whose
    logprobs the inference server reports (vf-serve; vLLM with processed_logprobs), so the
    importance ratio is 1 when the weights are the same.
    """
    logits = model(
        input_ids=batch.input_ids,
        position_ids=batch.position_ids,
        attention_mask=batch.attention_mask,
    ).logits
    logprobs = torch.log_softmax(logits[:, :-1].float() / temperature, dim=-1)
    picked = logprobs.gather(-1, batch.input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return torch.nn.functional.pad(picked, (1, 0))
