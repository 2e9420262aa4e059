"""Directories a command writes its runs into must be the user's own: not a link, not another
user's, not writable by anyone (vf-eval, vf-rl and vf-sft check their output dir with this)."""

from __future__ import annotations

import os
import stat
from pathlib import Path


def foreign_dir_problem(out: Path, flag: str = "--output-dir") -> str | None:
    """Why a run may not write into ``out``: a directory another user made first (in /tmp, say)
    or one others may change; its files would be theirs to plant (a link where config.json or
    results.jsonl goes, a checkpoint --resume then runs). None when it is the user's own.
    ``flag`` is the command's name for it, said in the message."""
    try:
        info = out.lstat()
    except OSError as exc:
        return f"cannot use {out} as the output dir: {exc}"
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        return f"{out} is not a directory of its own (a link or a file); choose another {flag}"
    if info.st_uid != os.geteuid():
        return (
            f"{out} belongs to uid {info.st_uid}, not to you: what it holds is theirs to plant; "
            f"choose an {flag} of your own"
        )
    if info.st_mode & stat.S_IWOTH:
        return f"{out} may be changed by anyone (mode {oct(info.st_mode & 0o777)}); chmod o-w it"
    return None
