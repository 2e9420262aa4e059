"""vf-sft's run: supervised fine-tuning on conversations, on the same trainer core as vf-rl
(the command line is ``verifiers.cli.sft``'s, the settings ``verifiers.rl.configs.sft``'s).

Each conversation is tokenized with the model's chat template and trained on its assistant tokens
only (``verifiers.rl.algorithm.chat_tokens``), with the trainer's packing, optimizer, schedules,
checkpoints and FSDP2; with ``[eval] env_id``, held-out reward on that environment is measured
while training (``Evaluator``).
"""

from __future__ import annotations

import contextlib
import json
import random
import time
from pathlib import Path
from typing import Any

from verifiers.heartbeat import Heartbeat
from verifiers.rl.configs.sft import SFTConfig, SFTDataConfig
from verifiers.rl.run.command import (
    load_policy,
    prepare_weights_dir,
    prune_checkpoints,
    resume_or_follow,
)

DATA_FILE_KINDS = {".parquet": "parquet", ".jsonl": "json", ".json": "json"}


def dataset_file(spec: SFTDataConfig) -> Path:
    """The file or dataset directory ``[data] path`` names (a vf-data directory's parquet)."""
    path = Path(spec.path)
    if path.is_dir() and (path / "data.parquet").is_file():  # a vf-data directory
        path = path / "data.parquet"
    if path.is_file() and path.suffix not in DATA_FILE_KINDS:
        raise ValueError(f"{path}: a .parquet, .jsonl or .json file, or a dataset directory")
    if not path.exists():
        raise FileNotFoundError(f"no dataset at {path} (make one with vf-data)")
    return path


def input_problem(config: SFTConfig) -> str | None:
    """A missing dataset or model, said before torch loads."""
    from verifiers.local_model.models import ModelNotAvailableError, find_model

    try:
        dataset_file(config.data)
        find_model(config.model)
    except (FileNotFoundError, ValueError, ModelNotAvailableError) as exc:
        return str(exc)
    return None


def load_conversations(spec: SFTDataConfig) -> list[list[dict[str, Any]]]:
    """Every row's conversation: ``messages``, or ``prompt`` + ``completion``."""
    import datasets

    path = dataset_file(spec)
    if path.is_file():
        data = datasets.load_dataset(
            DATA_FILE_KINDS[path.suffix], data_files=str(path), split="train"
        )
    else:
        data = datasets.load_dataset(str(path), split=spec.split)
    columns = set(data.column_names)
    if "messages" in columns:
        return [list(row["messages"]) for row in data]
    if {"prompt", "completion"} <= columns:
        return [
            _as_messages(r["prompt"], "user") + _as_messages(r["completion"], "assistant")
            for r in data
        ]
    raise ValueError(f"{path} has no 'messages' column and no 'prompt' + 'completion' columns")


def _as_messages(value: Any, role: str) -> list[dict[str, Any]]:
    return [{"role": role, "content": value}] if isinstance(value, str) else list(value)


def build_samples(
    tokenizer: Any, conversations: list[list[dict[str, Any]]], max_tokens: int
) -> tuple[list[Any], int]:
    """Training samples (assistant-masked), and how many conversations were too long."""
    from verifiers.rl.algorithm.batching import Sample
    from verifiers.rl.algorithm.chat_tokens import assistant_masked

    samples, skipped = [], 0
    for messages in conversations:
        ids, mask = assistant_masked(tokenizer, messages)
        if len(ids) > max_tokens or not any(mask):
            skipped += 1
            continue
        samples.append(Sample(ids, mask, [0.0] * len(ids), 0.0, 0.0, 0))
    return samples, skipped


def batches_for(samples: list[Any], batch_size: int, seed: int, step: int) -> list[Any]:
    """The samples of ``step``: a fresh shuffle per epoch (seed, epoch), so a resumed run sees
    the same batches as an uninterrupted one."""
    per_epoch = max(1, len(samples) // batch_size)
    epoch, index = divmod(step, per_epoch)
    order = list(range(len(samples)))
    random.Random(seed * 1_000_003 + epoch).shuffle(order)
    return [samples[i] for i in order[index * batch_size : (index + 1) * batch_size]]


def run(config: SFTConfig, resume: bool, console: Any) -> int:
    import torch
    from rich.markup import escape
    from rich.progress import Progress
    from transformers import AutoTokenizer

    from verifiers.local_model.models import ModelNotAvailableError, resolve_model_dir
    from verifiers.rl.algorithm.chat_tokens import TemplateError
    from verifiers.rl.algorithm.trainer import Trainer
    from verifiers.rl.run.distributed import init_from_env
    from verifiers.rl.run.export import export_model
    from verifiers.rl.run.tracking import start_trackers

    ctx = init_from_env()  # under torchrun: FSDP2 over all ranks; rank 0 runs the loop
    out = Path(config.output_dir)  # command_main checked it is free (or resumable)
    try:
        model_dir, _ = resolve_model_dir(config.model)
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        samples, skipped = build_samples(
            tokenizer, load_conversations(config.data), config.data.max_tokens
        )
    except (ModelNotAvailableError, FileNotFoundError, ValueError, TemplateError) as exc:
        console.print(f"vf-sft: {escape(str(exc))}", soft_wrap=True)
        return 2
    if not samples:
        console.print(f"vf-sft: no trainable conversation in {config.data.path}")
        return 2
    steps = config.steps or config.epochs * max(1, len(samples) // config.batch_size)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(config.model_dump_json(indent=2))
    console.print(
        f"vf-sft: {len(samples)} conversations ({skipped} skipped: too long or nothing to "
        f"train), {steps} steps of {config.batch_size}; config: {out / 'config.json'}"
    )
    torch.manual_seed(config.seed)
    device = config.trainer.device
    if device == "auto":
        device = f"cuda:{torch.cuda.current_device()}" if torch.cuda.is_available() else "cpu"
    trainer = Trainer(
        load_policy(model_dir, device),
        config.trainer,
        total_steps=steps,
        pad_id=tokenizer.pad_token_id or 0,
        dist=ctx,
    )
    start = resume_or_follow(trainer, out, resume, ctx, console)
    prepare_weights_dir(model_dir, out / "weights")
    trackers = start_trackers("vf-sft", config, trainer, console)
    if trackers is None:
        return 2
    evaluator = Evaluator(config, model_dir, out) if config.eval.env_id else None
    try:
        if evaluator is not None and start == 0:
            trackers.log(evaluator.measure(trainer, 0, console), 0, prefix="eval")
        plain = not console.is_terminal  # a log file: rich's bar draws nothing there

        def line() -> str:
            task = progress.tasks[0]
            loss = "" if task.description == "training" else f" · {task.description}"
            return f"training step {int(task.completed)}/{steps}{loss}"

        with (
            Progress(console=console, transient=True, disable=plain) as progress,
            Heartbeat(console, line) if plain else contextlib.nullcontext(),
        ):
            task = progress.add_task("training", total=steps, completed=start)
            if plain:
                console.print(line(), highlight=False)
            for step in range(start, steps):
                began = time.perf_counter()
                batch = batches_for(samples, config.batch_size, config.seed, step)
                result = trainer.train_step(batch)
                record = {
                    "step": step,
                    "loss": result["loss"],
                    "tokens": sum(len(s) for s in batch),
                    "trained_tokens": result["loss_tokens"],
                    "grad_norm": result["grad_norm"],
                    "lr": result["lr"],
                    "step_s": time.perf_counter() - began,
                }
                with (out / "metrics.jsonl").open("a") as f:
                    f.write(json.dumps(record) + "\n")
                trackers.log(record, step)
                progress.update(task, advance=1, description=f"loss {result['loss']:.4f}")
                done = step + 1
                if config.checkpoint_every and done % config.checkpoint_every == 0:
                    trainer.save_checkpoint(out / "checkpoints" / f"step_{done:06d}", done, {})
                    prune_checkpoints(out / "checkpoints", config.keep_checkpoints)
                if evaluator is not None and (
                    done == steps or (config.eval.every and done % config.eval.every == 0)
                ):
                    trackers.log(evaluator.measure(trainer, done, console), done, prefix="eval")
        state = trainer.merged_state()  # a collective under FSDP2: before the stop
        if state is not None:
            export_model(state, out / "weights")
    finally:
        trainer.stop_followers()
        trackers.close()
        if evaluator is not None:
            evaluator.close()
    picture = plot_sft(out)
    console.print(
        f"weights: {out / 'weights'} (vf-eval ENV -m {out / 'weights'}); metrics: "
        f"{out / 'metrics.jsonl'}" + (f"; plot: {picture}" if picture else "")
    )
    return 0


class Evaluator:
    """Held-out reward of the model being trained: vf-serve on it, new weights pushed before each
    measurement (as vf-rl does), the environment's eval rows with fixed seeds."""

    def __init__(self, config: SFTConfig, model_dir: Path, out: Path) -> None:
        import verifiers as vf
        from verifiers.clients import OpenAICompatibleClient
        from verifiers.rl.training.inference import start_inference
        from verifiers.weights.access import new_secret
        from verifiers.weights.transport import FilesystemTransport

        self.config, self.out = config, out
        if config.eval.env_id is None:
            raise ValueError("an Evaluator needs [eval] env_id")
        self.env = vf.load_environment(config.eval.env_id, **config.eval.env_args)
        self.rows = self.env.dataset_rows("eval", n=config.eval.examples)
        self.server = start_inference(
            config.inference,
            model_dir,
            out / "logs" / "inference.log",
            weights_dir=out / "weights",
            weights_secret=new_secret(),
        )
        self.weights = FilesystemTransport(
            self.server.base_url,
            out / "weights",
            self.alive,
            secret=self.server.weights_secret,
            api_key=self.server.api_key,
        )
        self.client = OpenAICompatibleClient(self.server.base_url, self.server.api_key)

    def alive(self) -> str | None:
        code = self.server.process.poll()
        return None if code is None else f"the inference server exited (code {code})"

    def measure(self, trainer: Any, step: int, console: Any) -> dict[str, Any]:
        import statistics

        from verifiers.envs.environment import run_sync

        if step:
            self.weights.push(trainer)
        spec = self.config.eval
        begun = time.perf_counter()
        result = run_sync(  # not asyncio.run: it would format every state with repr on exit
            self.env.generate(
                self.rows,
                self.client,
                "policy",
                sampling_args={
                    "max_tokens": spec.max_tokens,
                    "temperature": spec.temperature,
                    "seed": self.config.seed,
                },
                rollouts_per_example=1,
                max_concurrent=32,
            )
        )
        rewards = [float(r or 0.0) for r in result.reward]
        record = {
            "step": step,
            "eval_reward": statistics.fmean(rewards),
            "eval_reward_std": statistics.pstdev(rewards),
            "eval_rollouts": len(rewards),
            "eval_errors": sum(1 for s in result.state if s.get("error")),
            "eval_s": time.perf_counter() - begun,
        }
        with (self.out / "eval.jsonl").open("a") as f:
            f.write(json.dumps(record) + "\n")
        console.print(
            f"held-out reward after {step} steps: {record['eval_reward']:.3f} ± "
            f"{record['eval_reward_std']:.3f} ({len(rewards)} rollouts)"
        )
        return record

    def close(self) -> None:
        self.weights.close()
        self.server.stop()


def plot_sft(output_dir: Path) -> Path | None:
    """``metrics.png``: training loss and held-out reward over the run."""
    from verifiers.results.style import SERIES, save_figure
    from verifiers.rl.run.records import records_to_plot

    drawable = records_to_plot(output_dir)
    if drawable is None:
        return None
    plt, history, evals = drawable
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.5))
    left.plot([h["step"] for h in history], [h["loss"] for h in history], marker=".")
    left.set_ylabel("loss (nat/token)")
    right.plot(
        [e["step"] for e in evals], [e["eval_reward"] for e in evals], marker="s", color=SERIES[1]
    )
    right.set_ylabel("held-out reward")
    for ax in (left, right):
        ax.set_xlabel("step")
    return save_figure(plt, fig, output_dir / "metrics.png")
