"""Text from the hub is untrusted: strip terminal control sequences and Rich markup before printing.

A README or description could otherwise move the cursor, rewrite earlier output, set the window
title or hide text (ANSI/OSC escape sequences), or restyle and fake output (Rich markup).
"""

from __future__ import annotations

import re

from rich.markup import escape

# ESC-introduced sequences (CSI, OSC terminated by BEL or ST, and two-byte escapes), C1 controls,
# and every other C0 control except newline and tab.
_SEQUENCES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]|[\x80-\x9f]"
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def plain(text: object) -> str:
    """``text`` with terminal control sequences removed."""
    return _CONTROLS.sub("", _SEQUENCES.sub("", str(text)))


def safe(text: object) -> str:
    """``text`` safe to hand to ``console.print``: no control sequences, no live Rich markup."""
    return escape(plain(text))
