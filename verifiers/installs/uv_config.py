"""uv reads only the configuration its user chose: never a ``uv.toml`` found in the working
directory or any directory above it.

uv discovers ``uv.toml`` and ``pyproject.toml`` ``[tool.uv]`` tables from the working directory
upwards. Run from ``/tmp/x``, another local user's ``/tmp/uv.toml`` would swap an
environment's dependencies or, with ``verify-hashes = false`` and a ``find-links`` page, the
hash-pinned environment wheel itself. So every uv this project runs gets ``--no-config``, and
the user's own ``uv.toml`` (``$XDG_CONFIG_HOME/uv/uv.toml``), else the system's
(``/etc/uv/uv.toml``), is passed back explicitly when it is the user's or root's and nobody
else may write it. ``$UV_CONFIG_FILE``, set by the user, still applies.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from verifiers.processes.credential_file import trusted_file


def _candidates() -> list[Path]:
    config_home = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    dirs = [d for d in os.environ.get("XDG_CONFIG_DIRS", "").split(":") if d] or ["/etc/xdg"]
    return [
        Path(config_home) / "uv" / "uv.toml",
        *(Path(d) / "uv" / "uv.toml" for d in dirs),
        Path("/etc/uv/uv.toml"),
    ]


def uv_config_args() -> list[str]:
    """The global flags for every uv invocation (see the module docstring)."""
    named = os.environ.get("UV_CONFIG_FILE")
    if named:  # the user named the file
        return ["--no-config", "--config-file", named]
    for path in _candidates():
        if trusted_file(path):
            return ["--no-config", "--config-file", str(path)]
    return ["--no-config"]


def uv_command(uv: str, *args: str) -> list[str]:
    """``uv`` with its global configuration flags, then ``args``."""
    return [uv, *uv_config_args(), *args]


def uv_binary() -> str | None:
    """The uv this SDK runs: the one pip installed beside it (the ``uv`` package), else PATH's."""
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        return shutil.which("uv")
