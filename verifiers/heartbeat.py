"""A line of progress every few seconds where output is no terminal.

rich draws its live bars and tables only on a terminal: in a log file, a pipe or CI a long
command said nothing until it ended (vf-eval was silent for 29 minutes on a slow model, vf-rl
through its first held-out eval). Commands print a plain line at the start, then this prints
the current one every ``PLAIN_EVERY_S`` seconds, whether work finished or not.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

PLAIN_EVERY_S = 15.0


class Heartbeat:
    """Prints ``line()`` on ``console`` every ``PLAIN_EVERY_S`` seconds until the block ends."""

    def __init__(self, console: Any, line: Callable[[], str]) -> None:
        self.console = console
        self.line = line
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="vf-heartbeat", daemon=True)

    def _beat(self) -> None:
        while not self._stop.wait(PLAIN_EVERY_S):
            self.console.print(self.line(), highlight=False)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
