"""The trainer: one optimizer step per batch of samples, weights out for the inference server.

Read top to bottom: ``train_step`` → ``gradients`` (micro-batches, global normalizers) → ``loss``
(logprobs, importance mask, the named loss, KL, aggregation). Every normalizer counts the *whole*
batch, so accumulating micro-batches (or FSDP2 ranks) gives exactly the full-batch gradient.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import random
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from verifiers.rl.batching import (
    MicroBatch,
    Sample,
    packed,
    packing_mode,
    padded,
    token_logprobs,
)
from verifiers.rl.config import TrainerConfig
from verifiers.rl.losses import LOSSES, importance_mask, k3, token_weights
from verifiers.rl.schedules import SCHEDULES, lr_factor

STATS = ("loss", "ratio", "clipped", "mismatch_kl", "is_masked", "entropy", "ref_kl")
"""What each micro-batch sums (over its loss tokens), reduced once per step."""


class Trainer:
    """One optimizer step per batch of samples, with the loss named by ``config.loss``.

    ``total_steps`` sets the LR schedule's length; ``temperature`` is the sampling temperature
    (logprobs are of logits / temperature); ``max_completion_tokens`` is Dr. GRPO's L_max.
    ``dist`` (from ``verifiers.rl.distributed.init_from_env``) makes this one rank of an FSDP2
    job: rank 0 calls the methods; the other ranks run ``follow()``, which mirrors each call.
    """

    def __init__(
        self,
        model: Any,
        config: TrainerConfig | None = None,
        *,
        total_steps: int = 100,
        temperature: float = 1.0,
        max_completion_tokens: int = 1024,
        pad_id: int = 0,
        dist: Any = None,
    ) -> None:
        config = config or TrainerConfig()
        if config.schedule not in SCHEDULES:
            raise ValueError(
                f"unknown LR schedule {config.schedule!r}; choose from {', '.join(SCHEDULES)}"
            )
        # refuse, rather than train on packed samples that see each other
        self.packing = packing_mode(model, config.packing)
        if config.gradient_checkpointing:
            # before sharding: FSDP2 wraps the layers that carry the checkpointing
            enable = getattr(model, "activation_checkpointing_enable", None)
            if enable is not None:  # transformers >= 5.x
                enable(activation_checkpointing_kwargs={"use_reentrant": False})
            else:
                model.gradient_checkpointing_enable(
                    gradient_checkpointing_kwargs={"use_reentrant": False}
                )
        # the frozen starting policy, for the KL penalty (a full copy on every rank)
        self.reference = (
            copy.deepcopy(model).eval().requires_grad_(False) if config.kl_beta > 0 else None
        )
        self.dist = dist
        if dist is not None:
            from verifiers.rl.distributed import shard_model

            model = shard_model(model, dist)
        self.model = model.train()
        self.config = config
        self.total_steps = total_steps
        self.temperature = temperature
        self.max_completion_tokens = max_completion_tokens
        self.pad_id = pad_id
        self.optimizer = torch.optim.AdamW(
            model.parameters(), lr=config.lr, betas=config.betas, weight_decay=config.weight_decay
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer,
            lambda step: lr_factor(
                config.schedule, step, config.warmup_steps, total_steps, config.min_lr_ratio
            ),
        )
        imp = config.importance
        sampled = config.loss.sampled  # dataset tokens (SFT) have no sampling ratio to bound
        self.token_band = (imp.token_low, imp.token_high) if imp.token_mask and sampled else None
        self.sequence_band = (
            (imp.sequence_low, imp.sequence_high) if imp.sequence_mask and sampled else None
        )
        self.version = 0  # policy version: optimizer steps taken

    def micro_batches(self, samples: list[Sample]) -> list[MicroBatch]:
        budget = self.config.max_tokens_per_micro_batch
        if self.packing in ("varlen", "masked"):
            return packed(samples, budget, self.pad_id)
        by_length = sorted(samples, key=len)  # little padding; the gradient is a sum anyway
        return padded(by_length, self.config.micro_batch_size, self.pad_id, budget)

    def _autocast(self, device: torch.device) -> Any:
        if self.config.autocast != "bf16":
            return contextlib.nullcontext()
        return torch.autocast(device.type, dtype=torch.bfloat16)

    def loss(
        self, batch: MicroBatch, num_sequences: int, num_tokens: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The micro-batch's share of the batch loss, and its sums of ``STATS``."""
        device = next(self.model.parameters()).device
        batch = batch.to(device)
        chunk = self.config.logprob_chunk
        with self._autocast(device):
            logprobs, entropy = token_logprobs(self.model, batch, self.temperature, chunk)
        mask = batch.loss_mask
        keep = importance_mask(
            logprobs,
            batch.old_logprobs,
            mask,
            batch.segment_ids,
            self.token_band,
            self.sequence_band,
        )
        spec = self.config.loss
        terms = LOSSES[spec.name](
            logprobs, batch.old_logprobs, batch.advantages, keep, spec, batch.segment_ids
        )
        per_token = terms.loss
        ref_kl = torch.zeros_like(logprobs)
        if self.reference is not None:
            with torch.no_grad(), self._autocast(device):
                ref_logprobs, _ = token_logprobs(self.reference, batch, self.temperature, chunk)
            ref_kl = k3(logprobs, ref_logprobs)
            per_token = per_token + self.config.kl_beta * ref_kl
        weights = token_weights(
            spec.aggregation,
            batch.sequence_lengths,
            num_sequences,
            num_tokens,
            self.max_completion_tokens,
        )
        # where, not multiply: a masked token's term may be inf (exp of a huge log-ratio)
        loss = torch.where(keep > 0, per_token * weights, 0.0).sum()
        with torch.no_grad():  # kept on the device: one host sync per step, not per micro-batch
            on = mask > 0
            stats = torch.stack(
                [
                    loss.detach().float(),
                    torch.exp(logprobs - batch.old_logprobs)[on].sum(),
                    (terms.clipped & (keep > 0)).sum().float(),
                    k3(batch.old_logprobs, logprobs)[on].sum(),  # KL(π_inference ‖ π_trainer)
                    (mask - keep).sum().float(),
                    entropy[on].sum(),
                    ref_kl[on].sum().float(),
                ]
            )
        return loss, stats

    def gradients(self, samples: list[Sample]) -> dict[str, float]:
        """Accumulate the batch gradient (no optimizer step); the loss and diagnostics."""
        scale = 1.0
        if self.dist is not None:
            from verifiers.rl.distributed import shard_samples

            samples = shard_samples(samples, self.dist)
        batches = self.micro_batches(samples) if samples else []
        total_tokens = sum(b.num_loss_tokens for b in batches)
        total_sequences = sum(b.num_sequences for b in batches)
        if self.dist is not None:
            # every rank must run the same number of forward/backward passes (FSDP2 collectives):
            # pad with batches whose loss mask is empty
            most = _all_reduce_max(len(batches), self.dist)
            batches += [_empty_batch(self.pad_id)] * (most - len(batches))
            total_tokens = int(self.dist.all_reduce_sum(total_tokens))
            total_sequences = int(self.dist.all_reduce_sum(total_sequences))
            # FSDP2 averages over ranks; the loss is already global
            scale = float(self.dist.world_size)
        if total_tokens == 0:
            raise ValueError("the batch has no loss tokens")
        self.optimizer.zero_grad(set_to_none=True)
        totals = torch.zeros(len(STATS), dtype=torch.float32)
        for index, batch in enumerate(batches):
            if self.dist is not None:  # reduce-scatter once, after the last micro-batch
                self.model.set_requires_gradient_sync(index == len(batches) - 1)
            loss, stats = self.loss(batch, total_sequences, total_tokens)
            (loss * scale).backward()
            totals = totals.to(stats.device) + stats
        sums = dict(zip(STATS, totals.tolist(), strict=True))
        if self.dist is not None:
            sums = {k: self.dist.all_reduce_sum(v) for k, v in sums.items()}
        metrics = {
            "loss": sums["loss"],
            "loss_tokens": total_tokens,
            "loss_sequences": total_sequences,
            "micro_batches": len(batches),
            "mean_ratio": sums["ratio"] / total_tokens,
            "clip_fraction": sums["clipped"] / total_tokens,
            "mismatch_kl": sums["mismatch_kl"] / total_tokens,
            "is_masked_fraction": sums["is_masked"] / total_tokens,
            "entropy": sums["entropy"] / total_tokens,
        }
        if self.reference is not None:
            metrics["ref_kl"] = sums["ref_kl"] / total_tokens
        return metrics

    def train_step(self, samples: list[Sample] | None) -> dict[str, float]:
        if self.dist is not None:
            samples = self.dist.broadcast(
                {"op": "train", "samples": samples} if self.dist.is_main else None
            )["samples"]
        metrics = self.gradients(samples or [])
        grad_norm = torch.nn.utils.clip_grad_norm_(
            self.model.parameters(), self.config.max_grad_norm
        )
        self.optimizer.step()
        self.scheduler.step()
        self.version += 1
        metrics.update(
            grad_norm=float(grad_norm),
            lr=self.scheduler.get_last_lr()[0],
            policy_version=self.version,
        )
        return metrics

    # --- weights and checkpoints -----------------------------------------------------------------
    def export_state(self) -> dict[str, torch.Tensor] | None:
        """The full weights as the inference server loads them (tied head left out); None on
        ranks other than 0. Under FSDP2 a collective: rank 0 tells the followers to join."""
        if self.dist is not None:
            from verifiers.rl.distributed import full_state_dict

            if self.dist.is_main:
                self.dist.broadcast({"op": "export"})
            state = full_state_dict(self.model)
            if not self.dist.is_main:
                return None
        else:
            state = self.model.state_dict()
        state = {k: v.detach() for k, v in state.items()}
        if getattr(self.model.config, "tie_word_embeddings", False):
            state.pop("lm_head.weight", None)  # shared with the embeddings
        return state

    def save_weights(self, directory: Path) -> Path:
        """Write the policy's weights as safetensors, atomically (a reader never sees half a file)."""
        from safetensors.torch import save_file

        state = self.export_state()
        if state is None:
            return directory / "model.safetensors"
        directory.mkdir(parents=True, exist_ok=True)
        state = {k: v.contiguous().cpu() for k, v in state.items()}
        fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
        os.close(fd)
        save_file(state, tmp)
        target = directory / "model.safetensors"
        os.replace(tmp, target)
        return target

    def follow(self) -> None:
        """Non-zero ranks: mirror rank 0's train/export/checkpoint calls until it says stop."""
        while True:
            message = self.dist.broadcast(None)
            if message["op"] == "train":
                self.gradients(message["samples"])
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.max_grad_norm)
                self.optimizer.step()
                self.scheduler.step()
                self.version += 1
            elif message["op"] == "export":
                from verifiers.rl.distributed import full_state_dict

                full_state_dict(self.model)
            elif message["op"] == "checkpoint":
                write_checkpoint(self, Path(message["staging"]))
            else:
                return

    def stop_followers(self) -> None:
        if self.dist is not None and self.dist.is_main:
            self.dist.broadcast({"op": "stop"})

    def save_checkpoint(self, directory: Path, step: int, extra: dict[str, Any]) -> Path:
        """Model, optimizer, scheduler, RNG and step, written to a staging directory that is
        renamed into place when complete (a crash mid-save leaves the previous checkpoint).

        Model and optimizer go through ``torch.distributed.checkpoint``: each FSDP2 rank writes
        its own shards in parallel, and a checkpoint loads into any number of ranks (or one
        process) because DCP reshards on load.
        """
        directory.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=directory.parent, prefix=f".{directory.name}-"))
        if self.dist is not None:
            self.dist.broadcast({"op": "checkpoint", "staging": str(staging)})
        write_checkpoint(self, staging)
        torch.save(
            {"scheduler": self.scheduler.state_dict(), "version": self.version, "step": step},
            staging / "trainer.pt",
        )
        (staging / "state.json").write_text(
            json.dumps({"step": step, "version": self.version, **extra})
        )
        if directory.exists():
            shutil.rmtree(directory)
        os.replace(staging, directory)
        return directory

    def load_checkpoint(self, directory: Path) -> dict[str, Any]:
        """Every rank calls this (a collective under FSDP2), before rank 0 starts training."""
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

        if not (directory / "trainer.pt").exists():
            raise FileNotFoundError(f"{directory} is not a complete checkpoint (no trainer.pt)")
        model_state, optim_state = get_state_dict(self.model, self.optimizer)
        state = {"model": model_state, "optim": optim_state}
        with _single_process_is_intended():
            dcp.load(state, checkpoint_id=str(directory / "dcp"))
        set_state_dict(
            self.model,
            self.optimizer,
            model_state_dict=state["model"],
            optim_state_dict=state["optim"],
        )
        meta = torch.load(directory / "trainer.pt", weights_only=False)
        self.scheduler.load_state_dict(meta["scheduler"])
        self.version = meta["version"]
        rng = directory / f"rng_rank{self.rank}.pt"
        if rng.exists():  # a checkpoint from fewer ranks: new ranks keep their seeds
            saved = torch.load(rng, weights_only=False)
            torch.set_rng_state(saved["torch"])
            random.setstate(saved["python"])
        return json.loads((directory / "state.json").read_text())

    @property
    def rank(self) -> int:
        return self.dist.rank if self.dist is not None else 0


def write_checkpoint(trainer: Trainer, staging: Path) -> None:
    """Every rank's share of a checkpoint: its model/optimizer shards and its RNG state."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    # RNG first: rank 0 renames the staging directory once its dcp.save returns, and dcp.save
    # returns only after every rank has written its shards
    torch.save(
        {"torch": torch.get_rng_state(), "python": random.getstate()},
        staging / f"rng_rank{trainer.rank}.pt",
    )
    model_state, optim_state = get_state_dict(trainer.model, trainer.optimizer)
    with _single_process_is_intended():
        dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=str(staging / "dcp"))


@contextlib.contextmanager
def _single_process_is_intended() -> Iterator[None]:
    """DCP warns when no process group exists; one process is a supported layout here."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        yield


def _all_reduce_max(value: int, ctx: Any) -> int:
    import torch.distributed as dist

    tensor = torch.tensor([value], dtype=torch.int64, device=ctx.device)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return int(tensor.item())


def _empty_batch(pad_id: int) -> MicroBatch:
    """A one-sample batch that trains nothing (keeps ranks in step)."""
    return padded([Sample([pad_id, pad_id], [0, 0], [0.0, 0.0], 0.0, 0.0, 0)], 1, pad_id)[0]
