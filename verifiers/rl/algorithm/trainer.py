"""The trainer: ``num_iterations`` optimizer steps per batch of samples, weights out for the server.

Read top to bottom: ``train_step`` → ``gradients`` (micro-batches, global normalizers) → ``loss``
(logprobs, importance correction, the named loss, entropy bonus, KL, aggregation). Every
normalizer counts the *whole* batch, so accumulating micro-batches (or FSDP2 ranks) gives exactly
the full-batch gradient. With ``[trainer.lora]`` the model is wrapped by peft: only the adapters
train, the KL reference is the same model with its adapter off, and only adapters are pushed.

Over 400 lines, not split: one class, the training step (loss, optimizer, FSDP and LoRA,
checkpoints) over one model's state.
"""

from __future__ import annotations

import contextlib
import copy
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from verifiers.rl.algorithm.batching import (
    MicroBatch,
    Sample,
    packed,
    packing_mode,
    padded,
    token_logprobs,
)
from verifiers.rl.algorithm.losses import LOSSES, importance_correction, k3, token_weights
from verifiers.rl.algorithm.schedules import SCHEDULES, lr_factor
from verifiers.rl.algorithm.shared_prompts import (
    PromptBatch,
    PromptBlock,
    backward_prompts,
    cache_leaves,
    prompt_blocks,
    prompt_cache,
    suffix_logprobs,
)
from verifiers.rl.algorithm.shared_prompts import supports as shared_prompts_fit
from verifiers.rl.configs.rl import TrainerConfig

STATS = ("loss", "ratio", "clipped", "mismatch_kl", "is_masked", "entropy", "ref_kl", "is_weight")
"""What each micro-batch sums (over its loss tokens), reduced once per step."""


class Trainer:
    """``num_iterations`` optimizer steps per batch of samples, with the loss ``config.loss``.

    ``total_steps`` sets the LR schedule's length; ``temperature`` is the sampling temperature
    (logprobs are of logits / temperature). Dr. GRPO's constant B·L_max comes from its loss
    config (``sequences_per_step``, ``max_completion_tokens``; vf-rl fills them in).
    ``dist`` (from ``verifiers.rl.run.distributed.init_from_env``) makes this one rank of an FSDP2
    job: rank 0 calls the methods; the other ranks run ``follow()``, which mirrors each call.
    """

    def __init__(
        self,
        model: Any,
        config: TrainerConfig | None = None,
        *,
        total_steps: int = 100,
        temperature: float = 1.0,
        pad_id: int = 0,
        dist: Any = None,
    ) -> None:
        config = config or TrainerConfig()
        if config.schedule not in SCHEDULES:
            raise ValueError(
                f"unknown LR schedule {config.schedule!r}; choose from {', '.join(SCHEDULES)}"
            )
        self.constant = _aggregation_constant(config.loss)
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
        if config.lora is not None:
            if dist is not None:
                raise ValueError(
                    "trainer.lora under torchrun is not supported yet: run one process"
                )
            model = with_lora(model, config.lora)
        # the frozen starting policy, for the KL penalty: with LoRA the base (adapter off),
        # otherwise a full copy on every rank
        self.reference = (
            copy.deepcopy(model).eval().requires_grad_(False)
            if config.kl_beta > 0 and config.lora is None
            else None
        )
        self.dist = dist
        if dist is not None:
            from verifiers.rl.run.distributed import shard_model

            model = shard_model(model, dist)
        self.model = model.train()
        self.config = config
        self.total_steps = total_steps
        self.temperature = temperature
        self.pad_id = pad_id
        self.optimizer = torch.optim.AdamW(
            [p for p in model.parameters() if p.requires_grad],
            lr=config.lr,
            betas=config.betas,
            weight_decay=config.weight_decay,
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer,
            lambda step: lr_factor(
                config.schedule, step, config.warmup_steps, total_steps, config.min_lr_ratio
            ),
        )
        imp = config.importance
        token, sequence = imp.resolved(config.loss)
        self.token_correction = (token, imp.token_low, imp.token_high)
        self.sequence_correction = (sequence, imp.sequence_low, imp.sequence_high)
        # truncated IS: the loss's ratio is against the trainer's own policy at the step's start
        self.truncated = "truncate" in (token, sequence)
        self._start_logprobs: list[torch.Tensor] = []  # per micro-batch, when iterations need it
        # each distinct prompt computed once per step (padded micro-batches on one process;
        # transformers drops the cache under gradient checkpointing)
        self.share_prompts = (
            config.shared_prompts
            and dist is None
            and self.packing == "off"
            and not config.gradient_checkpointing
            and shared_prompts_fit(model)
        )
        self.version = 0  # policy version: batches trained

    def micro_batches(self, samples: list[Sample]) -> list[MicroBatch]:
        budget = self.config.max_tokens_per_micro_batch
        if self.packing in ("varlen", "masked"):
            return packed(samples, budget, self.pad_id)
        by_length = sorted(samples, key=len)  # little padding; the gradient is a sum anyway
        return padded(by_length, self.config.micro_batch_size, self.pad_id, budget)

    def prompt_blocks(self, samples: list[Sample]) -> list[PromptBlock] | None:
        """The samples by shared prompt (``shared_prompts``), or None: train them whole."""
        if not self.share_prompts or not samples:
            return None
        budget = self.config.max_tokens_per_micro_batch
        return prompt_blocks(samples, self.config.micro_batch_size, self.pad_id, budget)

    def _autocast(self, device: torch.device) -> Any:
        if self.config.autocast != "bf16":
            return contextlib.nullcontext()
        return torch.autocast(device.type, dtype=torch.bfloat16)

    def loss(
        self,
        batch: MicroBatch,
        num_sequences: int,
        num_tokens: int,
        index: int = 0,
        it: int = 0,
        prompts: tuple[PromptBatch, list[tuple[torch.Tensor, torch.Tensor]]] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Micro-batch ``index``'s share of the batch loss in iteration ``it``, and its sums of
        ``STATS``; ``prompts``: its rows' prompts, already computed (their batch and cache)."""
        device = next(self.model.parameters()).device
        batch = batch.to(device)
        chunk, spec = self.config.logprob_chunk, self.config.loss
        bonus = self.config.entropy_coef
        with self._autocast(device):
            if prompts is None:
                logprobs, entropy = token_logprobs(
                    self.model, batch, self.temperature, chunk, bonus != 0
                )
            else:
                logprobs, entropy = suffix_logprobs(
                    self.model, batch, *prompts, self.temperature, chunk, bonus != 0
                )
        if it == 0:  # the policy the step starts from
            batch.record_logprobs(logprobs)
            start = logprobs.detach()
            if self.config.num_iterations > 1:
                self._start_logprobs.append(start)
        else:
            start = self._start_logprobs[index]
        mask = batch.loss_mask
        keep, is_weight = importance_correction(
            start,
            batch.old_logprobs,
            mask,
            batch.segment_ids,
            self.token_correction,
            self.sequence_correction,
        )
        behaviour = start if self.truncated else batch.old_logprobs
        terms = LOSSES[spec.name](
            logprobs, behaviour, batch.advantages, keep, spec, batch.segment_ids
        )
        per_token = terms.loss * is_weight
        if bonus:
            per_token = per_token - bonus * entropy
        ref_kl = torch.zeros_like(logprobs)
        if self.config.kl_beta > 0:
            with torch.no_grad(), self._reference() as reference, self._autocast(device):
                ref_logprobs, _ = token_logprobs(reference, batch, self.temperature, chunk)
            ref_kl = k3(logprobs, ref_logprobs)
            per_token = per_token + self.config.kl_beta * ref_kl
        weights = token_weights(
            spec.aggregation, batch.sequence_lengths, num_sequences, num_tokens, self.constant
        )
        # where, not multiply: a masked token's term may be inf (exp of a huge log-ratio)
        loss = torch.where(keep > 0, per_token * weights, 0.0).sum()
        with torch.no_grad():  # kept on the device: one host sync per step, not per micro-batch
            on = mask > 0
            weight = is_weight if torch.is_tensor(is_weight) else torch.ones_like(logprobs)
            stats = torch.stack(
                [
                    loss.detach().float(),
                    torch.exp(logprobs - behaviour)[on].sum(),
                    (terms.clipped & (keep > 0)).sum().float(),
                    k3(batch.old_logprobs, logprobs)[on].sum(),  # KL(π_inference ‖ π_trainer)
                    (mask - keep).sum().float(),
                    entropy.detach()[on].sum(),
                    ref_kl.detach()[on].sum().float(),
                    weight[on].sum().float(),
                ]
            )
        return loss, stats

    @contextlib.contextmanager
    def _reference(self) -> Iterator[Any]:
        """The KL reference: the frozen copy, or with LoRA this model with its adapter off."""
        if self.reference is not None:
            yield self.reference
        else:
            with self.model.disable_adapter():
                yield self.model

    def gradients(self, samples: list[Sample], it: int = 0) -> dict[str, float]:
        """Accumulate the batch gradient of iteration ``it`` (no optimizer step); the loss and
        diagnostics."""
        scale = 1.0
        if self.dist is not None:
            from verifiers.rl.run.distributed import shard_samples

            samples = shard_samples(samples, self.dist)
        blocks = self.prompt_blocks(samples)
        if blocks is not None:
            return self._shared_gradients(blocks, it)
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
        if it == 0:
            self._start_logprobs = []
        self.optimizer.zero_grad(set_to_none=True)
        totals = torch.zeros(len(STATS), dtype=torch.float32)
        for index, batch in enumerate(batches):
            if self.dist is not None:  # reduce-scatter once, after the last micro-batch
                self.model.set_requires_gradient_sync(index == len(batches) - 1)
            loss, stats = self.loss(batch, total_sequences, total_tokens, index, it)
            (loss * scale).backward()
            totals = totals.to(stats.device) + stats
        sums = dict(zip(STATS, totals.tolist(), strict=True))
        if self.dist is not None:
            sums = {k: self.dist.all_reduce_sum(v) for k, v in sums.items()}
        return self._metrics(sums, total_tokens, total_sequences, len(batches))

    def _shared_gradients(self, blocks: list[PromptBlock], it: int) -> dict[str, float]:
        """``gradients`` with each block's prompts computed once: their forward, the
        micro-batches on top of their cache, then their backward with what the micro-batches
        left on the cache (one process: ``share_prompts``)."""
        batches = [batch for block in blocks for batch in block.batches]
        total_tokens = sum(b.num_loss_tokens for b in batches)
        total_sequences = sum(b.num_sequences for b in batches)
        if total_tokens == 0:
            raise ValueError("the batch has no loss tokens")
        if it == 0:
            self._start_logprobs = []
        self.optimizer.zero_grad(set_to_none=True)
        device = next(self.model.parameters()).device
        totals = torch.zeros(len(STATS), dtype=torch.float32)
        index = 0
        for block in blocks:
            prompts = block.prompts.to(device)
            with self._autocast(device):
                kv = prompt_cache(self.model, prompts)
            leaves = cache_leaves(kv)
            for batch in block.batches:
                loss, stats = self.loss(
                    batch, total_sequences, total_tokens, index, it, (prompts, leaves)
                )
                loss.backward()
                totals = totals.to(stats.device) + stats
                index += 1
            backward_prompts(kv, leaves)
        sums = dict(zip(STATS, totals.tolist(), strict=True))
        return self._metrics(sums, total_tokens, total_sequences, len(batches))

    def _metrics(
        self, sums: dict[str, float], total_tokens: int, total_sequences: int, micro_batches: int
    ) -> dict[str, float]:
        metrics = {
            "loss": sums["loss"],
            "loss_tokens": total_tokens,
            "loss_sequences": total_sequences,
            "micro_batches": micro_batches,
            "mean_ratio": sums["ratio"] / total_tokens,
            "clip_fraction": sums["clipped"] / total_tokens,
            "mismatch_kl": sums["mismatch_kl"] / total_tokens,
            "is_masked_fraction": sums["is_masked"] / total_tokens,
            "is_weight": sums["is_weight"] / total_tokens,
            "entropy": sums["entropy"] / total_tokens,
        }
        if self.config.kl_beta > 0:
            metrics["ref_kl"] = sums["ref_kl"] / total_tokens
        return metrics

    def train_step(self, samples: list[Sample] | None) -> dict[str, float]:
        """``num_iterations`` optimizer steps on ``samples``; the metrics are the first
        iteration's (the policy the batch was sampled from), ``lr`` the rate this step used."""
        if self.dist is not None:
            samples = self.dist.broadcast(
                {"op": "train", "samples": samples} if self.dist.is_main else None
            )["samples"]
        return self._step(samples or [])

    def _step(self, samples: list[Sample]) -> dict[str, float]:
        """The one optimizer step (every rank): gradients, clipping, AdamW, per iteration; then
        the schedule and the policy version advance once."""
        lr = float(self.scheduler.get_last_lr()[0])
        for it in range(self.config.num_iterations):
            result = self.gradients(samples, it)
            grad_norm = torch.nn.utils.clip_grad_norm_(
                [p for p in self.model.parameters() if p.requires_grad], self.config.max_grad_norm
            )
            self.optimizer.step()
            if it == 0:
                metrics = {**result, "grad_norm": float(grad_norm)}
        self.scheduler.step()
        self.version += 1
        metrics.update(lr=lr, policy_version=self.version, iterations=self.config.num_iterations)
        return metrics

    # --- weights and checkpoints -----------------------------------------------------------------
    @property
    def adapters(self) -> bool:
        return self.config.lora is not None

    def export_state(self) -> dict[str, torch.Tensor] | None:
        """What the inference server loads: the full weights (tied head left out), or with
        LoRA the adapters alone (peft's names); None on ranks other than 0. Under FSDP2 a
        collective: rank 0 tells the followers to join."""
        if self.adapters:
            return self._adapter_state()
        if self.dist is not None:
            from verifiers.rl.run.distributed import full_state_dict

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

    def merged_state(self) -> dict[str, torch.Tensor] | None:
        """The whole trained model as plain weights (LoRA merged into the base)."""
        if not self.adapters:
            return self.export_state()
        from verifiers.weights.files import adapter_scaling, merged_weights

        base = {
            k.replace(".base_layer.", "."): v.detach()
            for k, v in self.model.get_base_model().state_dict().items()
            if ".lora_" not in k
        }
        lora = self.model.peft_config["default"]
        scaling = adapter_scaling(
            {"r": lora.r, "lora_alpha": lora.lora_alpha, "use_rslora": lora.use_rslora}
        )
        return {**base, **merged_weights(base, self._adapter_state(), scaling)}

    def _adapter_state(self) -> dict[str, torch.Tensor]:
        from peft import get_peft_model_state_dict

        return {k: v.detach() for k, v in get_peft_model_state_dict(self.model).items()}

    def save_weights(self, directory: Path) -> Path:
        """Write what the server loads, atomically (a reader never sees half a file), and return
        the path to load: ``directory`` (model.safetensors), or its ``adapter/`` with LoRA."""
        from safetensors.torch import save_file

        state = self.export_state()
        target = directory / "adapter" if self.adapters else directory
        if state is None:
            return target
        target.mkdir(parents=True, exist_ok=True)
        state = {k: v.contiguous().cpu() for k, v in state.items()}
        name = "adapter_model.safetensors" if self.adapters else "model.safetensors"
        fd, tmp = tempfile.mkstemp(dir=target, suffix=".tmp")
        os.close(fd)
        save_file(state, tmp)
        if self.adapters:  # peft's layout: the server reads rank and alpha from it
            self.model.peft_config["default"].save_pretrained(str(target))
        os.replace(tmp, target / name)
        return target

    def follow(self) -> None:
        """Non-zero ranks: mirror rank 0's train/export/checkpoint calls until it says stop."""
        while True:
            message = self.dist.broadcast(None)
            if message["op"] == "train":
                self._step(message["samples"])
            elif message["op"] == "export":
                from verifiers.rl.run.distributed import full_state_dict

                full_state_dict(self.model)
            elif message["op"] == "checkpoint":
                from verifiers.rl.run.checkpoint import write_checkpoint

                write_checkpoint(self, Path(message["staging"]))
            else:
                return

    def stop_followers(self) -> None:
        if self.dist is not None and self.dist.is_main:
            self.dist.broadcast({"op": "stop"})

    def save_checkpoint(self, directory: Path, step: int, extra: dict[str, Any]) -> Path:
        """See ``verifiers.rl.run.checkpoint.save_checkpoint``."""
        from verifiers.rl.run.checkpoint import save_checkpoint

        return save_checkpoint(self, directory, step, extra)

    def load_checkpoint(self, directory: Path) -> dict[str, Any]:
        """See ``verifiers.rl.run.checkpoint.load_checkpoint`` (every rank calls it)."""
        from verifiers.rl.run.checkpoint import load_checkpoint

        return load_checkpoint(self, directory)

    @property
    def rank(self) -> int:
        return self.dist.rank if self.dist is not None else 0


def with_lora(model: Any, lora: Any) -> Any:
    """``model`` wrapped by peft with LoRA adapters as configured; only they train."""
    from peft import LoraConfig, get_peft_model

    targets = lora.target_modules
    if targets != "all-linear" and "lm_head" in targets:
        raise ValueError(
            "trainer.lora.target_modules: lm_head is not supported (the chunked head uses its "
            "weight directly); adapt the decoder's linear layers"
        )
    config = LoraConfig(
        r=lora.rank,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=targets,
        bias="none",
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, config)


def _aggregation_constant(loss: Any) -> int | None:
    """Dr. GRPO's B·L_max, from its config (never from what a step happened to keep)."""
    if loss.aggregation != "constant":
        return None
    if not (loss.sequences_per_step and loss.max_completion_tokens):
        raise ValueError(
            f"trainer.loss = {loss.name!r} divides by the constant B·L_max: set its "
            "sequences_per_step (B) and max_completion_tokens (L_max); vf-rl sets them from the "
            "orchestrator's examples_per_step × rollouts_per_example and max_tokens"
        )
    return loss.sequences_per_step * loss.max_completion_tokens


def _all_reduce_max(value: int, ctx: Any) -> int:
    import torch.distributed as dist

    tensor = torch.tensor([value], dtype=torch.int64, device=ctx.device)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return int(tensor.item())


def _empty_batch(pad_id: int) -> MicroBatch:
    """A one-sample batch that trains nothing (keeps ranks in step)."""
    return padded([Sample([pad_id, pad_id], [0, 0], [0.0, 0.0], 0.0, 0.0, 0)], 1, pad_id)[0]
