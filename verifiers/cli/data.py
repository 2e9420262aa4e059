"""vf-data: turn vf-eval runs into a fine-tuning dataset (Parquet + dataset card).

    vf-data outputs/evals/uppercase--SmolLM2-135M-Instruct/RUN -o data/uppercase-best --best-of-n
    vf-data outputs/evals/my-taskset-v1--MODEL/RUN/traces.jsonl -o data/my-taskset --min-reward 1
    vf-data RUN [RUN ...] -o DIR [--min-reward 0.8] [--top-k 2] [--max-completion-tokens 256]
            [--keep-errors] [--dedup]

A RUN is a vf-eval run directory (its ``results.jsonl``), or a v1 ``traces.jsonl`` (or a
directory holding only one): each trace becomes a row. The result loads with
``datasets.load_dataset("DIR")`` and trains with ``vf-sft``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, ValidationError

from verifiers.cli.settings import CommandSettings, Flag, parse_settings
from verifiers.cli.usage import command
from verifiers.errors import UsageError


class DataSettings(CommandSettings):
    """Every vf-data flag: its default and help, declared once."""

    runs: Annotated[list[str], Flag(positional=True)] = Field(
        description="vf-eval run directories (results.jsonl), or v1 traces (traces.jsonl)"
    )
    output: Annotated[str, Flag("-o")] = Field(description="the dataset directory to write")
    min_reward: float | None = Field(None, description="keep rollouts with at least this reward")
    best_of_n: Annotated[bool, Flag(exclusive="selection")] = Field(
        False, description="the best rollout per example"
    )
    top_k: Annotated[int | None, Flag(exclusive="selection")] = Field(
        None, description="the k best rollouts per example"
    )
    max_completion_tokens: int | None = Field(
        None, description="keep rollouts whose completion has at most this many tokens"
    )
    keep_errors: bool = Field(False, description="keep errored rollouts")
    dedup: bool = Field(False, description="drop repeated completions")


def read_run(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A run's rows: its ``results.jsonl`` (classic and v1 runs of vf-eval), else its v1
    ``traces.jsonl`` (a v1 run's traces, or upstream's), or the traces file itself."""
    from verifiers.data.rollouts import read_results_run

    if path.is_dir() and (path / "results.jsonl").exists():
        return read_results_run(path)
    if path.suffix == ".jsonl" or (path / "traces.jsonl").exists():
        from verifiers.v1.trace_rows import read_traces_run

        return read_traces_run(path)
    return read_results_run(path)


@command("vf-data")
def main(argv: list[str] | None = None) -> int:
    args = parse_settings(DataSettings, argv, "vf-data", __doc__.splitlines()[0])
    from verifiers.data.rollouts import RolloutFilter, rollouts_to_dataset
    from verifiers.errors import NothingSelectedError

    try:
        spec = RolloutFilter(
            min_reward=args.min_reward,
            best_of_n=args.best_of_n,
            top_k=args.top_k,
            max_completion_tokens=args.max_completion_tokens,
            keep_errors=args.keep_errors,
            dedup=args.dedup,
        )
        card = rollouts_to_dataset(list[str | Path](args.runs), args.output, spec, read_run)
    except NothingSelectedError as exc:
        print(f"vf-data: {exc}", file=sys.stderr)
        return 1
    except (FileNotFoundError, ValidationError, ValueError) as exc:  # a bad run or trace line
        raise UsageError(str(exc)) from exc
    print(
        f"wrote {card.rows} rows (of {card.rollouts_read} rollouts; filter: "
        f"{card.filter.describe()}) to {args.output}"
    )
    return 0 if card.rows else 1


if __name__ == "__main__":
    sys.exit(main())
