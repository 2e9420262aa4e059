"""``vf.setup_logging``: one handler for the ``verifiers`` loggers, and a sample printer.

Importing the SDK configures nothing (a library must not); CLIs and users call this.
"""

from __future__ import annotations

import logging
import sys
from typing import Any


def setup_logging(
    level: str = "INFO", log_format: str | None = None, date_format: str | None = None
) -> None:
    """Send ``verifiers.*`` log records at ``level`` to stderr (replacing earlier handlers)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        logging.Formatter(
            fmt=log_format or "%(asctime)s - %(name)s - %(levelname)s - %(message)s",
            datefmt=date_format or "%Y-%m-%d %H:%M:%S",
        )
    )
    logger = logging.getLogger("verifiers")
    logger.handlers.clear()
    logger.setLevel(level.upper())
    logger.addHandler(handler)
    logger.propagate = False


def print_prompt_completions_sample(
    prompts: list[Any],
    completions: list[Any],
    rewards: list[float],
    step: int = 0,
    num_samples: int = 1,
) -> None:
    """Print the first ``num_samples`` prompt/completion/reward triples as a table."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"step {step}", show_lines=True)
    for column in ("prompt", "completion", "reward"):
        table.add_column(column)
    for prompt, completion, reward in list(zip(prompts, completions, rewards, strict=False))[
        :num_samples
    ]:
        table.add_row(str(prompt), str(completion), f"{float(reward):.3f}")
    Console().print(table)
