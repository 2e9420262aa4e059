"""The trainer: one optimizer step per batch of samples, weights out for the inference server.

Single device with transformers (CPU here, one GPU elsewhere). The loss of every micro-batch is
divided by the loss-token count of the *whole* batch, so accumulating micro-batches (or ranks)
gives exactly the full-batch gradient.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from verifiers.rl.batching import MicroBatch, Sample, packed, padded, token_logprobs
from verifiers.rl.losses import LOSSES, LossConfig, gspo_loss
from verifiers.rl.schedules import SCHEDULES, lr_factor


@dataclass
class TrainerSettings:
    lr: float = 1e-5
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    warmup_steps: int = 0
    schedule: str = "constant"  # constant | linear | cosine (after warmup_steps)
    min_lr_ratio: float = 0.0  # where linear/cosine decay ends, as a fraction of lr
    total_steps: int = 100
    loss: str = "grpo"
    clip_low: float = 0.2
    clip_high: float = 0.2
    is_low: float = 0.0
    is_high: float = float("inf")
    max_grad_norm: float = 1.0
    packing: bool = True
    max_tokens_per_micro_batch: int = 2048
    micro_batch_size: int = 8
    autocast: str = "none"  # "bf16": float32 weights, bf16 compute (pure bf16 weights barely learn)
    temperature: float = 1.0  # the sampling temperature: logprobs are of logits / temperature
    gradient_checkpointing: bool = False  # recompute activations in backward: less memory


def lr_lambda(settings: TrainerSettings) -> Any:
    def factor(step: int) -> float:
        return lr_factor(
            settings.schedule,
            step,
            settings.warmup_steps,
            settings.total_steps,
            settings.min_lr_ratio,
        )

    return factor


class Trainer:
    """``dist`` (from ``verifiers.rl.distributed.init_from_env``) makes this one rank of an FSDP2
    job: rank 0 calls the methods; the other ranks run ``follow()``, which mirrors each call."""

    def __init__(
        self, model: Any, settings: TrainerSettings, pad_id: int = 0, dist: Any = None
    ) -> None:
        if settings.loss not in LOSSES:
            raise ValueError(f"unknown loss {settings.loss!r}; choose from {', '.join(LOSSES)}")
        if settings.schedule not in SCHEDULES:
            raise ValueError(
                f"unknown LR schedule {settings.schedule!r}; choose from {', '.join(SCHEDULES)}"
            )
        if settings.autocast not in ("none", "bf16"):
            raise ValueError(f"unknown autocast {settings.autocast!r}; choose none or bf16")
        if settings.gradient_checkpointing:
            # before sharding: FSDP2 wraps the layers that carry the checkpointing
            enable = getattr(model, "activation_checkpointing_enable", None)
            if enable is not None:  # transformers >= 5.x
                enable(activation_checkpointing_kwargs={"use_reentrant": False})
            else:
                model.gradient_checkpointing_enable(
                    gradient_checkpointing_kwargs={"use_reentrant": False}
                )
        self.dist = dist
        if dist is not None:
            from verifiers.rl.distributed import shard_model

            model = shard_model(model, dist)
        self.model = model.train()
        self.settings = settings
        self.pad_id = pad_id
        self.optimizer = torch.optim.AdamW(
            model.parameters(),
            lr=settings.lr,
            betas=settings.betas,
            weight_decay=settings.weight_decay,
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lr_lambda(settings))
        self.loss_cfg = LossConfig(
            settings.loss, settings.clip_low, settings.clip_high, settings.is_low, settings.is_high
        )
        self.version = 0  # policy version: optimizer steps taken

    def micro_batches(self, samples: list[Sample]) -> list[MicroBatch]:
        if self.settings.packing:
            return packed(samples, self.settings.max_tokens_per_micro_batch, self.pad_id)
        return padded(samples, self.settings.micro_batch_size, self.pad_id)

    def loss(self, batch: MicroBatch, num_loss_tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The micro-batch loss, and [loss, ratio sum, clipped tokens, mismatch KL sum]."""
        batch = batch.to(next(self.model.parameters()).device)
        context = (
            torch.autocast(
                "cpu" if batch.input_ids.device.type == "cpu" else "cuda", dtype=torch.bfloat16
            )
            if self.settings.autocast == "bf16"
            else _nullcontext()
        )
        with context:
            logprobs = token_logprobs(self.model, batch, self.settings.temperature)
        args = (
            logprobs,
            batch.old_logprobs,
            batch.advantages,
            batch.loss_mask,
            num_loss_tokens,
            self.loss_cfg,
        )
        loss = (
            gspo_loss(*args, segment_ids=batch.segment_ids)
            if self.settings.loss == "gspo"
            else LOSSES[self.settings.loss](*args)
        )
        with torch.no_grad():  # kept on the device: one host sync per step, not per micro-batch
            mask = batch.loss_mask.bool()
            ratio = torch.exp(logprobs - batch.old_logprobs)[mask]
            clipped = (ratio < 1 - self.loss_cfg.clip_low) | (ratio > 1 + self.loss_cfg.clip_high)
            stats = torch.stack(
                [
                    loss.detach().float(),
                    ratio.sum().float(),
                    clipped.sum().float(),
                    (batch.old_logprobs - logprobs)[mask].sum().float(),
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
        if self.dist is not None:
            # every rank must run the same number of forward/backward passes (FSDP2 collectives):
            # pad with batches whose loss mask is empty
            most = _all_reduce_max(len(batches), self.dist)
            batches += [_empty_batch(self.pad_id)] * (most - len(batches))
            total_tokens = int(self.dist.all_reduce_sum(total_tokens))
            scale = float(
                self.dist.world_size
            )  # FSDP2 averages over ranks; the loss is already global
        if total_tokens == 0:
            raise ValueError("the batch has no loss tokens")
        self.optimizer.zero_grad(set_to_none=True)
        totals = torch.zeros(4, dtype=torch.float32)
        for index, batch in enumerate(batches):
            if self.dist is not None:  # reduce-scatter once, after the last micro-batch
                self.model.set_requires_gradient_sync(index == len(batches) - 1)
            loss, stats = self.loss(batch, total_tokens)
            (loss * scale).backward()
            totals = totals.to(stats.device) + stats
        loss_sum, ratio_sum, clipped, kl = totals.tolist()
        if self.dist is not None:
            loss_sum = self.dist.all_reduce_sum(loss_sum)
        return {
            "loss": loss_sum,
            "loss_tokens": total_tokens,
            "micro_batches": len(batches),
            "mean_ratio": ratio_sum / total_tokens,
            "clip_fraction": clipped / total_tokens,
            "mismatch_kl": kl / total_tokens,
        }

    def train_step(self, samples: list[Sample] | None) -> dict[str, float]:
        if self.dist is not None:
            samples = self.dist.broadcast(
                {"op": "train", "samples": samples} if self.dist.is_main else None
            )["samples"]
        metrics = self.gradients(samples or [])
        grad_norm = torch.nn.utils.clip_grad_norm_(
            self.model.parameters(), self.settings.max_grad_norm
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
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.settings.max_grad_norm)
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


class _nullcontext:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None
