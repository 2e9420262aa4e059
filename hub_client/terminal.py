"""Text from the hub is untrusted: strip terminal control sequences and Rich markup before printing.

A README or description could otherwise move the cursor, rewrite earlier output, set the window
title or hide text (ANSI/OSC escape sequences), or restyle and fake output (Rich markup). The
filter is the SDK's (``verifiers.logging_setup``), which vf-eval applies to model output too.
"""

from __future__ import annotations

from verifiers.logging_setup import plain, safe

__all__ = ["plain", "safe"]
