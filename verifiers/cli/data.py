"""vf-data: turn vf-eval runs into a fine-tuning dataset (Parquet + dataset card).

    vf-data outputs/evals/uppercase--SmolLM2-135M-Instruct/RUN -o data/uppercase-best --best-of-n
    vf-data RUN [RUN ...] -o DIR [--min-reward 0.8] [--top-k 2] [--max-completion-tokens 256]
            [--keep-errors] [--dedup]

The result loads with ``datasets.load_dataset("DIR")`` and trains with ``vf-sft``.
"""

from __future__ import annotations

import argparse
import sys

from pydantic import ValidationError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vf-data", description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="vf-eval run directories (results.jsonl)")
    parser.add_argument("-o", "--output", required=True, help="the dataset directory to write")
    parser.add_argument("--min-reward", type=float, default=None)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--best-of-n", action="store_true", help="the best rollout per example")
    group.add_argument("--top-k", type=int, default=None, help="the k best rollouts per example")
    parser.add_argument("--max-completion-tokens", type=int, default=None)
    parser.add_argument("--keep-errors", action="store_true", help="keep errored rollouts")
    parser.add_argument("--dedup", action="store_true", help="drop repeated completions")
    args = parser.parse_args(argv)
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
        card = rollouts_to_dataset(args.runs, args.output, spec)
    except (FileNotFoundError, ValidationError) as exc:
        print(f"vf-data: {exc}", file=sys.stderr)
        return 2
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
