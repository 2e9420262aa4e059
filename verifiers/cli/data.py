"""vf-data: turn vf-eval runs into a fine-tuning dataset (Parquet + dataset card).

    vf-data outputs/evals/uppercase--SmolLM2-135M-Instruct/RUN -o data/uppercase-best --best-of-n
    vf-data RUN [RUN ...] -o DIR [--min-reward 0.8] [--top-k 2] [--max-completion-tokens 256]
            [--keep-errors] [--dedup]

The result loads with ``datasets.load_dataset("DIR")`` and trains with ``vf-sft``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

from pydantic import Field, ValidationError

from verifiers.cli.settings import CommandSettings, Flag, parse_settings
from verifiers.cli.usage import command
from verifiers.errors import UsageError


class DataSettings(CommandSettings):
    """Every vf-data flag: its default and help, declared once."""

    runs: Annotated[list[str], Flag(positional=True)] = Field(
        description="vf-eval run directories (results.jsonl)"
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
        card = rollouts_to_dataset(list[str | Path](args.runs), args.output, spec)
    except (FileNotFoundError, ValidationError) as exc:
        raise UsageError(str(exc)) from exc
    except NothingSelectedError as exc:
        print(f"vf-data: {exc}", file=sys.stderr)
        return 1
    print(
        f"wrote {card.rows} rows (of {card.rollouts_read} rollouts; filter: "
        f"{card.filter.describe()}) to {args.output}"
    )
    return 0 if card.rows else 1


if __name__ == "__main__":
    sys.exit(main())
