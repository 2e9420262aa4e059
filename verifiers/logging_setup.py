"""``vf.setup_logging``: one handler for the ``verifiers`` loggers, a sample printer, and the
terminal text filter for what others wrote (model output, an endpoint's model id, the hub's text).

Importing the SDK configures nothing (a library must not); CLIs and users call this.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# ESC-introduced sequences (CSI, OSC terminated by BEL or ST, and two-byte escapes), C1 controls,
# and every other C0 control except newline and tab. Untrusted text could otherwise set the
# clipboard (OSC 52), plant a hyperlink (OSC 8), retitle the window or rewrite earlier output.
_SEQUENCES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]|[\x80-\x9f]"
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def plain(text: object) -> str:
    """``text`` with terminal control sequences removed: for untrusted text printed as is."""
    return _CONTROLS.sub("", _SEQUENCES.sub("", str(text)))


def safe(text: object) -> str:
    """``text`` safe inside Rich markup: no control sequences, no live markup (``[/bold]``)."""
    from rich.markup import escape

    return escape(plain(text))


class TextFormatter(logging.Formatter):
    """Log lines without terminal sequences: a record may quote what an endpoint, a model or a
    caller sent (an endpoint's error message, logged by ``vf-eval -v``, carried an OSC 52)."""

    def format(self, record: logging.LogRecord) -> str:
        return plain(super().format(record))


def log_to_stderr(level: int, fmt: str, *, force: bool = False) -> None:
    """``logging.basicConfig(level=..., format=...)`` through a :class:`TextFormatter`."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(TextFormatter(fmt))
    logging.basicConfig(level=level, handlers=[handler], force=force)


# libraries whose debug lines are transport noise: -v shows rollouts, not sockets
NOISY_LOGGERS = ("httpx", "httpcore", "aiohttp", "urllib3", "asyncio", "filelock", "fsspec")


def setup_logging(
    level: str = "INFO", log_format: str | None = None, date_format: str | None = None
) -> None:
    """Send ``verifiers.*`` log records at ``level`` to stderr (replacing earlier handlers)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        TextFormatter(
            fmt=log_format or "%(asctime)s - %(name)s - %(levelname)s - %(message)s",
            datefmt=date_format or "%Y-%m-%d %H:%M:%S",
        )
    )
    logger = logging.getLogger("verifiers")
    logger.handlers.clear()
    logger.setLevel(level.upper())
    logger.addHandler(handler)
    logger.propagate = False


@contextmanager
def log_level(level: str | int) -> Iterator[None]:
    """Set the ``verifiers`` loggers to ``level`` inside the block, then restore the old level."""
    logger = logging.getLogger("verifiers")
    previous = logger.level
    logger.setLevel(level if isinstance(level, int) else level.upper())
    try:
        yield
    finally:
        logger.setLevel(previous)


def quiet_verifiers() -> Any:
    """``with vf.quiet_verifiers():`` only warnings and errors from the SDK."""
    return log_level("WARNING")


def print_prompt_completions_sample(
    prompts: list[Any], completions: list[Any], *args: Any, **kwargs: Any
) -> None:
    """Print the first ``num_samples`` prompt/completion/reward rows as a table.

    Both classic signatures work: ``(prompts, completions, rewards, step, num_samples=1)``
    (0.1.x) and ``(prompts, completions, errors, rewards, step, num_samples=1)`` (0.1.11+).
    """
    from rich.console import Console
    from rich.table import Table

    names: tuple[str, ...]
    if len(args) >= 3 or "errors" in kwargs:
        names = ("errors", "rewards", "step", "num_samples")
    else:
        names = ("rewards", "step", "num_samples")
    call = {
        "errors": None,
        "step": 0,
        "num_samples": 1,
        **dict(zip(names, args, strict=False)),
        **kwargs,
    }
    rewards, errors = list(call["rewards"]), call["errors"]
    table = Table(title=f"step {call['step']}", show_lines=True)
    for column in ("prompt", "completion", "reward"):
        table.add_column(column)
    for i, (prompt, completion) in enumerate(
        list(zip(prompts, completions, strict=False))[: call["num_samples"]]
    ):
        reward = f"{float(rewards[i]):.3f}" if i < len(rewards) else "-"
        if errors and i < len(errors) and errors[i]:
            reward += f" (error: {errors[i]})"
        table.add_row(safe(prompt), safe(completion), safe(reward))
    Console().print(table)
