"""vf-report: the report of a vf-eval run (report.html) or of a vf-rl run (training_report.html).

A directory with ``config.json`` and ``metrics.jsonl`` is a training run
(``verifiers.rl.run.report``); anything else goes to the eval report (``verifiers.results.report``).
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    from verifiers.rl.run.report import is_training_run, write_training_report

    runs = [a for a in args if not a.startswith("-")]
    if runs and all(is_training_run(r) for r in runs):
        output = None
        if "-o" in args or "--output" in args:
            flag = "-o" if "-o" in args else "--output"
            output = args[args.index(flag) + 1]
            runs = [r for r in runs if r != output]
        if len(runs) != 1:
            print("vf-report: one vf-rl run directory at a time", file=sys.stderr)
            return 2
        print(write_training_report(runs[0], output))
        return 0
    unknown = [
        r for r in runs if not (Path(r) / "metadata.json").exists() and not is_training_run(r)
    ]
    if unknown and "-o" not in args and "--output" not in args:
        print(
            f"vf-report: {unknown[0]} is neither a vf-eval run (metadata.json) nor a vf-rl run "
            "(config.json and metrics.jsonl)",
            file=sys.stderr,
        )
        return 2
    from verifiers.results.report import main as eval_report

    return eval_report(args)


if __name__ == "__main__":
    sys.exit(main())
