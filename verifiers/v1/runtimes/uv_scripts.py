"""PEP 723 scripts for the ``subprocess`` runtime (upstream's ``prepare_uv_script`` /
``run_uv_script``, which ``uv sync --script`` inside the box): a reward that runs a verifier
with dependencies of its own, which never touch the eval process.

Here the script's dependencies are installed on the host by uv as wheels only (no build step,
so installing them runs none of their code), into a content-addressed directory of a per-process
cache that every sandbox of this process sees read-only (``SandboxLimits.read_only_dirs``); the
script itself runs inside the rollout's confined sandbox, with that directory on its
``PYTHONPATH`` and the sandbox's interpreter. Resolving needs the package index (or uv's cache);
when it cannot be reached, preparing the script fails saying so.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import shutil
import sys
import tomllib
from functools import cache
from pathlib import Path

from verifiers.installs.uv_config import uv_binary, uv_command
from verifiers.processes.leftovers import owned_dir
from verifiers.v1.errors import SandboxError

CACHE_PREFIX = "vf-uv-scripts-"
INSTALL_TIMEOUT_S = 600.0
"""How long resolving and installing one script's dependencies may take."""

_BLOCK = re.compile(
    r"(?m)^# /// (?P<type>[a-zA-Z0-9-]+)$\s(?P<content>(^#(| .*)$\s)+)^# ///$"
)  # PEP 723's reference expression
_locks: dict[str, asyncio.Lock] = {}


def script_metadata(script: bytes) -> dict[str, object]:
    """The script's ``# /// script`` block as TOML (empty when it has none); a malformed or
    repeated block is a ``SandboxError`` naming the problem."""
    text = script.decode("utf-8", errors="replace")
    blocks = [m for m in _BLOCK.finditer(text) if m["type"] == "script"]
    if len(blocks) > 1:
        raise SandboxError("uv script: more than one `# /// script` block (PEP 723)")
    if not blocks:
        return {}
    body = "".join(
        line[2:] if line.startswith("# ") else line[1:]
        for line in blocks[0]["content"].splitlines(keepends=True)
    )
    try:
        return tomllib.loads(body)
    except tomllib.TOMLDecodeError as e:
        raise SandboxError(f"uv script: its `# /// script` block is not TOML: {e}") from e


def script_dependencies(script: bytes) -> list[str]:
    """The requirements the script's metadata lists (``dependencies``)."""
    deps = script_metadata(script).get("dependencies", [])
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        raise SandboxError("uv script: `dependencies` must be a list of requirement strings")
    return deps


@cache
def cache_root() -> Path:
    """This process's directory of script environments: made fresh (so nobody else planted
    anything in it), readable by the sandboxes' uids, removed when the process exits (as
    every ``owned_dir`` is)."""
    root = owned_dir(CACHE_PREFIX)
    root.chmod(0o755)
    return root


def _uv() -> str:
    found = uv_binary()
    if found is None:
        raise SandboxError("uv script: needs uv to install its dependencies (pip install uv)")
    return found


def _readable(root: Path) -> None:
    """Every file readable and every directory traversable by the sandbox's uid."""
    root.chmod(0o755)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            (Path(dirpath) / name).chmod(0o755)
        for name in filenames:
            path = Path(dirpath) / name
            if not path.is_symlink():
                path.chmod(path.stat().st_mode | 0o444)


async def script_site(script: bytes, python: str) -> Path | None:
    """The directory holding the script's dependencies installed for ``python`` (None when it
    lists none), installed once per process and script content."""
    deps = script_dependencies(script)
    if not deps:
        return None
    digest = hashlib.sha256(b"\0".join([python.encode(), *(d.encode() for d in deps)])).hexdigest()
    site = cache_root() / digest[:32]
    async with _locks.setdefault(digest, asyncio.Lock()):
        if site.is_dir():
            return site
        stage = owned_dir(f".{digest[:32]}-", cache_root())
        argv = uv_command(_uv(), "pip", "install", "--quiet", "--only-binary", ":all:")
        argv += ["--python", python, "--target", str(stage), *deps]
        env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
        process = await asyncio.create_subprocess_exec(
            *argv,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            _, err = await asyncio.wait_for(process.communicate(), INSTALL_TIMEOUT_S)
        except TimeoutError:
            process.kill()
            await process.wait()
            shutil.rmtree(stage, ignore_errors=True)
            raise SandboxError(
                f"uv script: installing {deps} took over {INSTALL_TIMEOUT_S:.0f}s"
            ) from None
        if process.returncode != 0:
            shutil.rmtree(stage, ignore_errors=True)
            tail = err.decode(errors="replace").strip()[-1500:]
            raise SandboxError(
                f"uv script: could not install its dependencies {deps} as wheels (it needs the "
                f"package index, or uv's cache, and a wheel of each): {tail}"
            )
        _readable(stage)
        stage.rename(site)
    return site


def sandbox_interpreter(mode: str) -> str:
    """The interpreter a sandbox of ``mode`` runs (the one the dependencies are installed for)."""
    from verifiers.sandbox.view import sandbox_python

    return sandbox_python(mode).executable if mode != "unsafe" else sys.executable
