"""The one place a command's ``UsageError`` becomes its message and exit status 2.

A command raises :class:`~verifiers.errors.UsageError` for what it cannot use (a refused flag, a
bad value, a missing directory); its ``main`` is wrapped in :func:`command`, which says the error
on stderr as one line, ``PROG: message`` (after the usage line, ``PROG: error: message``, when
the parser refused the arguments, as argparse says it), and returns :data:`USAGE_EXIT`.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, Protocol

from verifiers.errors import UsageError
from verifiers.logging_setup import plain, safe

USAGE_EXIT = 2  # a usage error's exit status (argparse's)


class Main(Protocol):
    """A command's ``main``: its arguments (None: ``sys.argv[1:]``) to its exit status."""

    def __call__(self, argv: list[str] | None = None) -> int: ...


def say_usage_error(prog: str, exc: UsageError, console: Any = None) -> int:
    """``exc`` said on stderr (on ``console``, a rich console, when the command has one); the
    exit status."""
    if exc.usage is not None:
        sys.stderr.write(exc.usage)
        sys.stderr.write(f"{prog}: error: {exc}\n")
    elif console is not None:  # a message may quote what an endpoint or a file said: as text
        console.print(f"[red]{prog}:[/red] {safe(exc)}", highlight=False, soft_wrap=True)
    else:
        print(f"{prog}: {plain(exc)}", file=sys.stderr)
    return USAGE_EXIT


def command(prog: str) -> Callable[[Main], Main]:
    """``main(argv) -> exit status`` with its ``UsageError`` said and exit status 2."""

    def wrap(main: Main) -> Main:
        @functools.wraps(main)
        def run(argv: list[str] | None = None) -> int:
            try:
                return main(argv)
            except UsageError as exc:
                return say_usage_error(prog, exc)

        return run

    return wrap
