"""What vf-eval shows: a live progress bar while rollouts run, a summary table at the end, and
where a saved run (and its report) is."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from verifiers.heartbeat import Heartbeat
from verifiers.logging_setup import plain, safe
from verifiers.results.schema import RunMetadata


class LiveProgress:
    """A rich progress bar fed by the engine's ``on_progress`` callback.

    Where the output is not a terminal (a log file, a pipe, CI) rich draws nothing until the
    end: there the bar is a plain line at the start, at the end and every few seconds between
    (``verifiers.heartbeat``)."""

    def __init__(
        self,
        console: Console,
        total: int,
        already_done: int = 0,
        started: float | None = None,
    ) -> None:
        """``started`` (``time.perf_counter()`` when the command began): the time to the first
        rollout is printed once it finishes (what a short run's user waits through)."""
        self.console = console
        self.started = started
        self.rewards_sum = 0.0
        self.count = 0
        self.errors = 0
        self.progress = Progress(
            TextColumn("[bold]rollouts"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TextColumn("reward {task.fields[reward]}"),
            TextColumn("errors {task.fields[errors]}"),
            TimeElapsedColumn(),
            TextColumn("eta {task.fields[eta]}"),
            console=console,
            transient=False,
        )
        self.task = self.progress.add_task(
            "eval", total=total, completed=already_done, rate="", reward="-", errors=0, eta="-"
        )
        self.heartbeat = None if console.is_terminal else Heartbeat(console, self.plain_line)

    def __enter__(self) -> LiveProgress:
        if self.heartbeat is None:
            self.progress.start()
        else:
            self.console.print(self.plain_line(), highlight=False)
            self.heartbeat.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.heartbeat is None:
            self.progress.stop()
        else:
            self.heartbeat.__exit__()
            self.console.print(self.plain_line(), highlight=False)

    def plain_line(self) -> str:
        """The bar's columns as one line of text."""
        task = self.progress.tasks[0]
        f = task.fields
        elapsed = int(task.elapsed or 0)
        parts = [f"rollouts {int(task.completed)}/{int(task.total or 0)}"]
        if f.get("rate"):
            parts.append(str(f["rate"]))
        parts += [
            f"reward {f['reward']}",
            f"errors {f['errors']}",
            f"elapsed {elapsed // 3600}:{elapsed % 3600 // 60:02d}:{elapsed % 60:02d}",
            f"eta {f['eta']}",
        ]
        return " · ".join(parts)

    def update(self, done: int, total: int, records: list[dict[str, Any]]) -> None:
        if records and self.started is not None and self.count == 0:
            self.console.log(
                f"first rollout finished {time.perf_counter() - self.started:.2f} s after start"
            )
        for record in records:
            self.rewards_sum += float(record.get("reward") or 0.0)
            self.count += 1
            self.errors += 1 if record.get("error") else 0
        task = self.progress.tasks[0]
        elapsed = task.elapsed or 0.0
        per_s = self.count / elapsed if elapsed > 0 else 0.0
        self.progress.update(
            self.task,
            completed=done,
            rate=f"{per_s:.1f}/s" if per_s else "",
            reward=f"{self.rewards_sum / max(self.count, 1):.3f}",
            errors=self.errors,
            eta=remaining_time(total - done, per_s),
        )


def remaining_time(left: int, per_s: float) -> str:
    """The time the rollouts ``left`` take at the run's own rate so far (finished in this
    process over its whole time, so neither a group finishing at once nor a resume's rows
    already done make it look faster: rich's estimate said 30 s with 2,336 left at 0.5/s)."""
    if left <= 0:
        return "0:00:00"
    if per_s <= 0:
        return "-"
    seconds = int(left / per_s)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def summary_table(meta: RunMetadata, wall_s: float) -> Table:
    """The run's summary; names an endpoint or a worker supplied (the model id, error types) are
    shown as text, never as markup or terminal sequences (a model id ``[/bold]`` crashed vf-eval)."""
    s = meta.summary
    table = Table(
        title=f"{safe(meta.env_id)} · {safe(meta.model)}", show_header=True, header_style="bold"
    )
    table.add_column("metric")
    table.add_column("value", justify="right")
    if s.avg_reward is not None:
        table.add_row("reward (mean ± std)", f"{s.avg_reward:.4f} ± {s.std_reward:.4f}")
    for name, value in s.avg_metrics.items():
        table.add_row(f"  {safe(name)}", f"{value:.4f}")
    for k, value in s.pass_at_k.items():
        table.add_row(f"pass@{k}", f"{value:.4f}")
    table.add_row(
        "rollouts", f"{s.num_rollouts} ({s.num_examples} examples × {meta.rollouts_per_example})"
    )
    table.add_row(
        "errors",
        str(s.num_errors)
        if not s.errors_by_type
        else f"{s.num_errors} ("
        + ", ".join(f"{safe(k)}: {v}" for k, v in s.errors_by_type.items())
        + ")",
    )
    if s.reward_errors_by_function:
        table.add_row(
            "reward function errors",
            ", ".join(f"{safe(k)}: {v}" for k, v in s.reward_errors_by_function.items()),
        )
    if meta.release:
        members = getattr(meta, "member_releases", None) or {}
        table.add_row(
            "runs as verifiers",
            meta.release
            if not members
            else ", ".join(f"{name} {release}" for name, release in members.items()),
        )
    table.add_row(
        "tokens (prompt / completion)", f"{s.usage.prompt_tokens:,} / {s.usage.completion_tokens:,}"
    )
    table.add_row(
        "wall time",
        f"{wall_s:.1f} s ({s.num_rollouts / wall_s:.2f} rollouts/s)" if wall_s > 0 else "-",
    )
    if s.avg_generation_ms is not None:
        table.add_row(
            "per rollout (generation / scoring)",
            f"{s.avg_generation_ms:.0f} ms / {s.avg_scoring_ms:.1f} ms",
        )
    return table


def show_examples(console: Console, states: list[Any], limit: int = 3) -> None:
    """The first rollouts' completions (``-v``), as text: what the model wrote reaches the
    terminal without its control sequences (an OSC 52 in a completion set the clipboard)."""
    for state in states[:limit]:
        completion = state.get("completion")
        text = (
            completion
            if isinstance(completion, str)
            else "\n".join(
                f"[{m.get('role')}] {m.get('content') or ''}"
                + (f" (tool calls: {m['tool_calls']})" if m.get("tool_calls") else "")
                for m in completion or []
            )
        )
        console.rule(
            f"example {state.get('example_id')} · rollout {state.get('rollout_index')} · reward {state.get('reward') or 0:.3f}"
        )
        console.print(plain(text[:2000]), markup=False, highlight=False)


def print_saved(stdout: Console, results_path: str) -> None:
    """Where a saved run is, and its report.html (written now, from what was saved)."""
    from verifiers.results.report import write_report

    stdout.print(f"results: {results_path}", soft_wrap=True)
    stdout.print(f"report: {write_report([results_path])}", soft_wrap=True)
