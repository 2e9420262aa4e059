"""``vf-eval --rescore RUN_DIR``: a run's recorded rollouts scored again with the environment as
installed now (no model called), what changed printed, and the result saved as a new run."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.markup import escape

from verifiers.cli.endpoints import CLIError
from verifiers.cli.eval.settings import EvalSettings


def rescore_run(args: EvalSettings, run_dir: str, env: Any, console: Console) -> int:
    """``--rescore RUN_DIR``: the recorded rollouts scored again, no model called."""
    from verifiers.cli.display import LiveProgress, print_saved, summary_table
    from verifiers.envs.environment import run_sync
    from verifiers.envs.rescore import RescoreError, SavedRun, changes_table, compare, rescore
    from verifiers.results.layout import new_run_dir

    try:
        run = SavedRun.read(run_dir, getattr(env, "rollout_files", None))
    except (RescoreError, ValueError) as exc:
        raise CLIError(str(exc)) from exc
    results_path = None
    if not args.no_save:
        results_path = str(new_run_dir(args.output_dir, env.env_id, run.metadata.model))
    total = len(run.example_ids) * run.metadata.rollouts_per_example
    console.print(
        f"[bold]{env.env_id}[/bold]: re-scoring {total} rollouts of {escape(run_dir)}",
        highlight=False,
    )
    start = time.perf_counter()
    with LiveProgress(console, total) as progress:
        out = run_sync(rescore(env, run, results_path, on_progress=progress.update))
    stdout = Console()
    stdout.print(summary_table(out.run_metadata, time.perf_counter() - start))
    stdout.print(changes_table(compare(run, out)))
    if results_path is not None:
        print_saved(stdout, results_path)
    return 0

