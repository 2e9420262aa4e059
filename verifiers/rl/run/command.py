"""What vf-rl and vf-sft share as runs: the run directory, resume, exit codes.

Both refuse to mix two runs in one output dir, redo the steps after the checkpoint they resume
from, load the policy the same way, mirror rank 0 on the other torchrun ranks, and end with the
same exports (``weights/`` as a model directory, ``metrics.png``). Each command's ``run`` is what
differs; its command line (``@ file.toml``, overrides, ``--resume``) is ``verifiers.cli``'s.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from verifiers.processes.leftovers import STAGING, remove_abandoned
from verifiers.rl.run.lock import RunDirHold, run_dir_lock


def run_command(
    prog: str,
    config: Any,
    resume: bool,
    run: Any,
    input_problem: Any = None,
    argv: list[str] | None = None,
) -> int:
    """A trainer command's run, from its parsed config to exit code: the output dir held (or
    refused in one line, exit 2), Ctrl-C or SIGTERM says how to go on, with the command line
    (``argv``, given again with ``--resume``) to copy (130), and a torchrun worker exits
    without gloo's teardown. ``input_problem(config)``: what is wrong with the run's inputs (a
    missing dataset), said before torch loads, as a taken run directory is."""
    from rich.console import Console
    from rich.markup import escape

    console = Console()
    out = Path(config.output_dir)
    with ExitStack() as held:
        problem = input_problem(config) if input_problem is not None else None
        hold = RunDirHold(False)
        if problem is None and int(os.environ.get("RANK", "0")) == 0:  # torchrun: rank 0 holds
            hold = held.enter_context(run_dir_lock(out))
        problem = problem or hold.problem or run_dir_problem(out, resume)
        if problem:  # said at once, before torch loads (and before any rank of torchrun writes)
            console.print(f"{prog}: {escape(problem)}", soft_wrap=True)
            return 2
        if hold.note:
            console.print(f"{prog}: [yellow]note[/yellow]: {escape(hold.note)}", soft_wrap=True)
        if hold.held:  # no other run writes here: what is staged in checkpoints/ was a killed one's
            remove_abandoned(out / "checkpoints", STAGING, any_maker=True)
        # SIGTERM (a scheduler, `kill`) stops the run as Ctrl-C does, with the same message
        signal.signal(signal.SIGTERM, _stop_on_signal)
        console.print(
            "[dim]Ctrl-C or SIGTERM stops the run and prints the line that resumes it (from its "
            "latest checkpoint, or from step 0 before the first)[/dim]",
            highlight=False,
        )
        from verifiers.rl.run.checkpoint import UnsafeCheckpointError

        try:
            code = run(config, resume, console)
        except UnsafeCheckpointError as exc:
            console.print(f"{prog}: {escape(str(exc))}", soft_wrap=True)
            code = 2
        except KeyboardInterrupt:
            hint = escape(interrupted_hint(out))
            console.print(f"[yellow]interrupted[/yellow]; {hint}:", soft_wrap=True)
            # one line, never wrapped or styled: the command to copy
            line = resume_line(prog, argv)
            console.print(f"  {line}", soft_wrap=True, markup=False, highlight=False)
            code = 130
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # a torchrun worker: skip gloo's teardown
        from verifiers.rl.run.distributed import shutdown

        shutdown(exit_code=code)
    return code


def interrupted_hint(out: Path) -> str:
    """What an interrupted run can do next: resume only where a checkpoint exists."""
    checkpoint = latest_checkpoint(out)
    if checkpoint is not None:
        return f"continue with --resume (from {checkpoint.name})"
    return (
        "no checkpoint was written yet (checkpoint_every = 0, or none reached): --resume "
        "starts this run again from step 0"
    )


def resume_line(prog: str, argv: list[str] | None) -> str:
    """The run's own command line with ``--resume``: what goes on with it, as it was."""
    import shlex

    given = [a for a in (argv or []) if a != "--resume"]
    return shlex.join([prog, *given, "--resume"])


def _stop_on_signal(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def latest_checkpoint(output_dir: Path) -> Path | None:
    checkpoints = sorted((output_dir / "checkpoints").glob("step_*"))
    return checkpoints[-1] if checkpoints else None


def prune_checkpoints(directory: Path, keep: int) -> list[Path]:
    """Delete all but the newest ``keep`` checkpoints (``keep`` 0 keeps every one)."""
    checkpoints = sorted(directory.glob("step_*"))
    removed = checkpoints[:-keep] if keep > 0 else []
    for old in removed:
        shutil.rmtree(old, ignore_errors=True)
    return removed


def run_dir_problem(out: Path, resume: bool) -> str | None:
    """Two runs never share one output dir: their metrics, plots and checkpoints would mix;
    and a run reads back and writes into only what is its user's own there (no link, FIFO,
    second name or another user's entry: ``foreign_entry_problem``)."""
    from verifiers.processes.own_dir import foreign_entry_problem

    if out.is_dir() and (problem := foreign_entry_problem(out, "--output_dir")):
        return problem
    if resume:
        if latest_checkpoint(out) is None and not started_run(out):
            return f"--resume: there is no run in {out} to continue; run without --resume"
        return None  # a run stopped before its first checkpoint starts again from step 0
    if (out / "metrics.jsonl").exists() or latest_checkpoint(out) is not None:
        return (
            f"{out} already holds a run: continue it with --resume, or choose another --output_dir"
        )
    return None


def started_run(out: Path) -> bool:
    """Whether a run began in ``out`` (its effective config or its first records are there)."""
    return any((out / name).exists() for name in ("config.json", "metrics.jsonl", "eval.jsonl"))


def truncate_history(out: Path, step: int) -> None:
    """Drop the records of steps after the checkpoint a run resumes from (they are redone)."""
    for name, keep in (
        ("metrics.jsonl", lambda r: r["step"] < step),
        ("eval.jsonl", lambda r: r["step"] <= step),
        ("samples.jsonl", lambda r: r["step"] < step),
    ):
        path = out / name
        if not path.exists():
            continue
        kept = []
        with path.open(encoding="utf-8", errors="replace") as records:
            for line in records:  # line by line: a huge file of junk is not held whole
                try:
                    if keep(json.loads(line)):
                        kept.append(line.rstrip("\n"))
                except (ValueError, KeyError, TypeError):  # ValueError: a 5,000-digit number
                    continue
        path.write_text("".join(f"{line}\n" for line in kept))


def prepare_weights_dir(model_dir: Path, weights: Path) -> None:
    """``weights`` as a complete model directory (config, tokenizer, chat template) that the
    trained weights are written into: ``vf-eval -m``, ``vf-serve`` and ``model =`` load it."""
    weights.mkdir(parents=True, exist_ok=True)
    for item in model_dir.iterdir():
        if item.is_file() and not item.name.endswith(".safetensors"):
            shutil.copy2(item, weights / item.name)


def load_policy(model_dir: Path, device: str) -> Any:
    """The policy in float32 (trained under bf16 autocast when asked: pure bf16 barely learns)."""
    from transformers import AutoModelForCausalLM

    policy: Any = AutoModelForCausalLM.from_pretrained(model_dir, dtype="float32")
    return policy.to(device)


def resume_or_follow(trainer: Any, out: Path, resume: bool, ctx: Any, console: Any) -> int:
    """Load the latest checkpoint when resuming (every rank: DCP reshards), send ranks other
    than 0 into ``follow`` (they exit there), and on rank 0 drop the records of the steps to
    redo. The step to start from."""
    from verifiers.rl.run.distributed import shutdown

    start = 0
    checkpoint = latest_checkpoint(out) if resume else None
    if checkpoint is not None:
        start = trainer.load_checkpoint(checkpoint)["step"]
    if ctx is not None and not ctx.is_main:
        trainer.follow()
        shutdown(exit_code=0)
    if checkpoint is not None:
        truncate_history(out, start)  # steps after the checkpoint are trained again
        console.print(f"resuming from {checkpoint} (step {start})")
    elif resume:
        truncate_history(out, 0)
        console.print(
            f"no checkpoint in {out / 'checkpoints'} yet: starting the run again from step 0"
        )
    return start
