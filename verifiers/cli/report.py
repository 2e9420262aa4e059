"""vf-report: the report of a vf-eval run (report.html) or of a vf-rl run (training_report.html).

A directory with ``config.json`` and ``metrics.jsonl`` is a training run
(``verifiers.rl.run.report``); anything else goes to the eval report (``verifiers.results.report``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

from pydantic import Field

from verifiers.cli.settings import CommandSettings, Flag, parse_settings
from verifiers.cli.usage import command
from verifiers.errors import UsageError


class ReportSettings(CommandSettings):
    """Every vf-report flag: its default and help, declared once."""

    runs: Annotated[list[str], Flag(positional=True)] = Field(
        description="vf-eval run directories (metadata.json), or one vf-rl run directory"
    )
    output: Annotated[str | None, Flag("-o")] = Field(
        None,
        description="where to write (none: RUN_DIR/report.html, or a vf-rl run's "
        "training_report.html)",
    )


@command("vf-report")
def main(argv: list[str] | None = None) -> int:
    args = parse_settings(ReportSettings, argv, "vf-report", __doc__)
    from verifiers.processes.own_dir import require_writable_file
    from verifiers.rl.run.report import REPORT_NAME, is_training_run, write_training_report

    runs = args.runs
    if all(is_training_run(r) for r in runs):
        if len(runs) != 1:
            raise UsageError("one vf-rl run directory at a time")
        require_writable_file(Path(args.output or Path(runs[0]) / REPORT_NAME), "-o FILE")
        print(write_training_report(runs[0], args.output))
        return 0
    unknown = [
        r for r in runs if not (Path(r) / "metadata.json").exists() and not is_training_run(r)
    ]
    if unknown and args.output is None:
        raise UsageError(
            f"{unknown[0]} is neither a vf-eval run (metadata.json) nor a vf-rl run "
            "(config.json and metrics.jsonl)"
        )
    from verifiers.results.report import write_report

    missing = [d for d in runs if not (Path(d) / "metadata.json").exists()]
    if missing:
        raise UsageError(f"not a vf-eval run directory: {missing[0]}")
    require_writable_file(Path(args.output or Path(runs[0]) / "report.html"), "-o FILE")
    print(write_report(list[str | Path](runs), args.output))
    return 0


if __name__ == "__main__":
    sys.exit(main())
