"""The training loop, top to bottom: generate → filter stale → train → ship weights → repeat.

With ``max_off_policy_steps = k >= 1`` the rollouts of the next k steps are generated while
the current step trains (the trainer runs in a thread, the orchestrator in the event loop); every
sample carries the policy version it came from, and samples more than k versions behind the
trainer are dropped and counted. With 0, generation waits for the new weights: a plain
synchronous loop, bit for bit.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verifiers.rl.algorithm.trainer import Trainer
from verifiers.rl.run.command import prune_checkpoints
from verifiers.rl.run.records import records_to_plot
from verifiers.rl.training.orchestrator import Batch, Orchestrator
from verifiers.weights.transport import WeightTransport


@dataclass
class HeldOutEval:
    """Held-out evaluation while training: ``every`` N steps (and before the first), on the
    same rows with the same seeds each time, so the numbers are comparable."""

    every: int = 0
    rows: list[dict[str, Any]] = field(default_factory=list)
    rollouts_per_example: int = 1
    temperature: float = 1.0
    seed: int = 0


@dataclass
class LoopSettings:
    """The loop's part of the run's config (``RLConfig``; its defaults live there)."""

    steps: int
    max_off_policy_steps: int
    checkpoint_every: int
    output_dir: Path
    keep_checkpoints: int  # the newest N stay on disk (0: all); each is GBs for a 135M model
    eval: HeldOutEval = field(default_factory=HeldOutEval)  # default: no held-out eval
    # token ids → one display string per token, for the groups samples.jsonl records
    decode: Callable[[list[int]], list[str]] | None = None


def train(
    orchestrator: Orchestrator,
    trainer: Trainer,
    weights: WeightTransport,
    settings: LoopSettings,
    start_step: int = 0,
    on_step: Callable[[dict[str, Any]], None] | None = None,
    on_eval: Callable[[dict[str, Any]], None] | None = None,
    on_eval_start: Callable[[int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """Run the loop; ``on_eval_start(step, rollouts)`` says a held-out eval began (it can take
    minutes: a user sees what the run is doing from its first second)."""
    return asyncio.run(
        _train(
            orchestrator, trainer, weights, settings, start_step, on_step, on_eval, on_eval_start
        )
    )


async def _train(
    orchestrator, trainer, weights, settings, start_step, on_step, on_eval, on_eval_start=None
) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = []
    lag = settings.max_off_policy_steps
    metrics_file = settings.output_dir / "metrics.jsonl"
    settings.output_dir.mkdir(parents=True, exist_ok=True)
    orchestrator.served_version = trainer.version  # a resumed run's weights were pushed already
    await orchestrator.start_workers()
    evaluating: asyncio.Task | None = None

    async def evaluate(step: int, version: int) -> None:
        spec = settings.eval
        if on_eval_start:
            on_eval_start(step, len(spec.rows) * spec.rollouts_per_example)
        result = await orchestrator.evaluate(
            spec.rows, spec.rollouts_per_example, spec.temperature, spec.seed
        )
        record = {"step": step, "policy_version": version, **result}
        with (settings.output_dir / "eval.jsonl").open("a") as f:
            f.write(json.dumps(record) + "\n")
        if on_eval:
            on_eval(record)

    if settings.eval.every and start_step == 0:  # the starting point, to compare against
        evaluating = asyncio.ensure_future(evaluate(0, trainer.version))
    # batches being generated, by step: up to ``lag`` ahead of the one training
    pending: dict[int, asyncio.Task[Batch]] = {
        start_step: asyncio.ensure_future(orchestrator.generate(start_step))
    }
    try:
        for step in range(start_step, settings.steps):
            wall = time.perf_counter()
            weights.check()
            batch = await pending.pop(step)
            fresh = [s for s in batch.samples if trainer.version - s.policy_version <= lag]
            stale = len(batch.samples) - len(fresh)
            # overlap: batches for the next ``lag`` steps generate while this one trains; the
            # last of them, started now from version ``step``, trains at version step + lag
            for ahead in range(step + 1, min(step + lag, settings.steps - 1) + 1):
                if ahead not in pending:
                    pending[ahead] = asyncio.ensure_future(orchestrator.generate(ahead))
            train_start = time.perf_counter()
            result = (
                await asyncio.to_thread(trainer.train_step, fresh)
                if fresh
                else {"loss": 0.0, "skipped": True}
            )
            train_s = time.perf_counter() - train_start
            if evaluating is not None:  # it measures the weights being served: finish it first
                await evaluating
                evaluating = None
            served = await asyncio.to_thread(weights.push, trainer)
            orchestrator.served_version = served
            done = step + 1
            if settings.eval.every and (done % settings.eval.every == 0 or done == settings.steps):
                evaluating = asyncio.ensure_future(evaluate(done, served))
            if lag == 0 and step + 1 < settings.steps:
                pending[step + 1] = asyncio.ensure_future(orchestrator.generate(step + 1))
            step_s = time.perf_counter() - wall
            tokens = sum(len(sample) for sample in fresh)
            record = {
                "step": step,
                "reward": batch.mean_reward,
                "samples": len(fresh),
                "stale_dropped": stale,
                "rollout_errors": batch.errors,
                "policy_version": trainer.version,
                "served_version": served,
                "max_lag": max((trainer.version - 1 - v for v in batch.versions), default=0),
                "generation_s": batch.generation_s,
                "train_s": train_s,
                "step_s": step_s,
                "tokens": tokens,  # trained tokens (prompt + completion) this step
                "tokens_per_s": tokens / step_s if step_s > 0 else 0.0,
                **batch.stats,
                **{k: v for k, v in result.items() if isinstance(v, int | float)},
            }
            history.append(record)
            with metrics_file.open("a") as f:
                f.write(json.dumps(record) + "\n")
            if batch.recorded and fresh:
                write_groups(settings.output_dir / "samples.jsonl", step, batch, settings.decode)
            if on_step:
                on_step(record)
            if settings.checkpoint_every and (step + 1) % settings.checkpoint_every == 0:
                trainer.save_checkpoint(
                    settings.output_dir / "checkpoints" / f"step_{step + 1:06d}",
                    step + 1,
                    {"reward": batch.mean_reward},
                )
                prune_checkpoints(settings.output_dir / "checkpoints", settings.keep_checkpoints)
        if evaluating is not None:
            await evaluating
            evaluating = None
    finally:
        for task in [*pending.values(), evaluating]:
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        await orchestrator.close()
        await orchestrator.env.end_run()
        aclose = getattr(orchestrator.client, "aclose", None)
        if aclose is not None:
            await aclose()
    return history


def write_groups(
    path: Path, step: int, batch: Batch, decode: Callable[[list[int]], list[str]] | None
) -> None:
    """The step's recorded groups, one line each: every sample's tokens, loss mask, advantage,
    reward, and the inference and trainer logprobs of its tokens (what the trainer learned
    from, as vf-report shows it)."""
    with path.open("a") as f:
        for group in batch.recorded:
            samples = [
                {
                    "reward": s.reward,
                    "advantage": s.advantage,
                    "policy_version": s.policy_version,
                    "token_ids": s.input_ids,
                    "tokens": decode(s.input_ids) if decode else None,
                    "loss_mask": s.loss_mask,
                    "inference_logprobs": s.old_logprobs,
                    "trainer_logprobs": s.trainer_logprobs,
                }
                for s in group["samples"]
            ]
            record = {
                "step": step,
                "example_id": group["example_id"],
                "group_rewards": group["group_rewards"],
                "samples": samples,
            }
            f.write(json.dumps(record) + "\n")


PANELS = (
    ("mean reward", ("reward",)),
    ("completion tokens", ("completion_tokens",)),
    ("entropy (nat/token)", ("entropy",)),
    ("KL (k3, per token)", ("mismatch_kl", "ref_kl")),
)


def plot(output_dir: Path) -> Path | None:
    """``metrics.png``: reward (and held-out reward, if evaluated), completion length, entropy and
    the KL diagnostics over every step of the run so far, read back from metrics.jsonl /
    eval.jsonl (a resumed run plots it all)."""
    from verifiers.results.style import SERIES, save_figure

    drawable = records_to_plot(output_dir)
    if drawable is None:
        return None
    plt, history, evals = drawable
    fig, axes = plt.subplots(2, 2, figsize=(10, 6), sharex=True)
    for ax, (label, keys) in zip(axes.flat, PANELS, strict=True):
        for key in keys:
            points = [(h["step"], h[key]) for h in history if key in h]
            if points:
                ax.plot(*zip(*points, strict=True), marker=".", label=key.replace("_", " "))
        if label == "mean reward":
            if evals:
                ax.plot(
                    [e["step"] for e in evals],
                    [e["eval_reward"] for e in evals],
                    marker="s",
                    color=SERIES[1],
                    label="held-out eval",
                )
            ax.legend(loc="best", fontsize=8)
        elif len(keys) > 1:
            ax.legend(loc="best", fontsize=8)
        ax.set_ylabel(label)
    for ax in axes[1]:
        ax.set_xlabel("step (policy version)")
    return save_figure(plt, fig, output_dir / "metrics.png")
