"""What a sandbox sees of the host: the interpreter (its binary, shared library and standard
library, never a virtualenv's site-packages), the packages it may import, and the system
directories, each bound read-only; and whether a sandbox uid can reach them (landlock mode).
"""

from __future__ import annotations

import ast
import importlib.machinery
import logging
import marshal
import os
import subprocess
import sys
from functools import cache
from pathlib import Path
from types import CodeType

from verifiers.sandbox.base import SandboxUnavailableError

logger = logging.getLogger("verifiers.sandbox")

WORKER = Path(__file__).with_name("worker.py")
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
# A bwrap-mode worker's whole environment (the zygote starts with it too, so that its
# interpreter sets itself up as a worker's would). No user site: a usercustomize or .pth the
# model writes under $HOME runs in no snippet.
SANDBOX_ENV = {
    "HOME": "/workspace",
    "PATH": SAFE_PATH,
    "LANG": "C.UTF-8",
    "PYTHONIOENCODING": "utf-8",
    "PYTHONNOUSERSITE": "1",
    "TMPDIR": "/tmp",
}


def uid_drop_possible(mode: str) -> bool:
    """In bwrap mode the mount namespace makes parents traversable; without it (landlock), the
    interpreter must be reachable for another uid (see ``sandbox_python``)."""
    if mode == "bwrap":
        return True
    return _reachable(sandbox_python("landlock").paths)


def _reachable(paths: list[str]) -> bool:
    """Other users can reach each path: every directory on the way is searchable, and the path
    itself is readable (a file) or searchable (a directory)."""
    for path in paths:
        current = Path(path)
        try:
            mode = current.stat().st_mode
        except OSError:
            return False
        if not mode & (0o001 if current.is_dir() else 0o004):
            return False
        for part in current.parents:
            try:
                if not part.stat().st_mode & 0o001:
                    return False
            except OSError:
                return False
    return True


class SandboxPython:
    """The interpreter the in-sandbox worker runs with, and exactly what of it the sandbox sees:
    the executable, its shared library, its standard library (without the site-packages inside
    it), and the snippet's ``sys.path``. Nothing of a virtualenv, the project or ``$HOME``."""

    def __init__(
        self, executable: str, paths: list[str], hidden: list[str], sys_path: list[str]
    ) -> None:
        self.executable, self.paths, self.hidden, self.sys_path = (
            executable,
            paths,
            hidden,
            sys_path,
        )


# printed as a literal, read by ast.literal_eval: json would import re and enum, and take 40% of
# the first sandbox's wait for this interpreter
_DESCRIBE = """
import os, sys, sysconfig
stdlib = sysconfig.get_paths()["stdlib"]
libdir, shared = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("Py_ENABLE_SHARED")
libs = []
if shared and libdir and os.path.isdir(libdir):
    libs = [os.path.join(libdir, f) for f in os.listdir(libdir) if f.startswith("libpython")]
print(repr([sys.version_info[:2], os.path.realpath(sys.executable), stdlib, sys.path, libs]))
"""


@cache
def sandbox_python(mode: str) -> SandboxPython:
    """This interpreter (its real binary, never a virtualenv's), except in landlock mode as root
    when it lives somewhere other users cannot reach (e.g. pyenv under /root, 0700): then
    ``VF_SANDBOX_PYTHON`` or a system ``python3`` of the same version that they can."""
    override = os.environ.get("VF_SANDBOX_PYTHON")
    current = _describe(override or os.path.realpath(sys.executable))
    if current is None:
        raise SandboxUnavailableError(
            f"the sandbox interpreter {override or sys.executable} did not start"
        )
    if override or mode != "landlock" or os.getuid() != 0 or _reachable(current.paths):
        return current
    for candidate in (
        f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}",
        "/usr/bin/python3",
    ):
        other = _describe(candidate) if os.path.exists(candidate) else None
        if other is not None and _reachable(other.paths):
            logger.info(
                "landlock sandboxes run %s (%s is not reachable for other uids)",
                candidate,
                sys.executable,
            )
            return other
    return current


def _describe(executable: str) -> SandboxPython | None:
    """Ask an interpreter (isolated: -I -S) where its parts live; None unless it is this
    Python's major.minor version."""
    try:
        out = subprocess.run(
            [executable, "-I", "-S", "-c", _DESCRIBE], capture_output=True, text=True, timeout=30
        )
        version, real, stdlib, path, libs = ast.literal_eval(out.stdout)
    except (OSError, ValueError, SyntaxError, subprocess.TimeoutExpired):
        logger.warning("sandbox interpreter %s did not start", executable)
        return None
    if tuple(version) != tuple(sys.version_info[:2]):
        logger.warning(
            "sandbox interpreter %s is Python %s, not %s.%s: not used",
            executable,
            ".".join(map(str, version)),
            *sys.version_info[:2],
        )
        return None
    sys_path = [p for p in path if p and os.path.exists(p)]
    hidden = [
        os.path.join(stdlib, d)
        for d in ("site-packages", "dist-packages")
        if os.path.isdir(os.path.join(stdlib, d))
    ]
    paths = _outermost({real, *sys_path, *libs})
    return SandboxPython(real, paths, hidden, sys_path)


def without(paths: list[str], hidden: list[str]) -> list[str]:
    """``paths``, with each directory that holds a hidden one replaced by its other entries
    (Landlock grants whole trees, so the hidden directory must not be under any grant)."""
    out = []
    for path in paths:
        inside = [h for h in hidden if os.path.dirname(h) == path]
        if not inside or not os.path.isdir(path):
            out.append(path)
            continue
        out += [
            os.path.join(path, e) for e in os.listdir(path) if os.path.join(path, e) not in inside
        ]
    return out


def package_dirs(names: list[str]) -> list[str]:
    """Host directories (or single-file modules) of the packages a sandbox may import."""
    import importlib.util

    found: list[str] = []
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is None:
            raise SandboxUnavailableError(f"sandbox package {name!r} is not installed")
        if spec.submodule_search_locations:
            found.extend(str(Path(p).resolve()) for p in spec.submodule_search_locations)
        elif spec.origin:
            found.append(str(Path(spec.origin).resolve()))
    return found


def _outermost(paths: set[str]) -> list[str]:
    """Keep only the outermost of nested paths."""
    ordered = sorted(paths, key=len)
    kept: list[str] = []
    for path in ordered:
        if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return kept


BOOTSTRAP = (
    "import marshal,sys;o=sys.stdout.buffer;o.write(b'\\n');o.flush();"
    "i=sys.stdin.buffer;exec(marshal.loads(i.read(int(i.readline()))))"
)
"""The worker's whole argv program: it says it has started (an empty line: its processes are
all there, to be moved into the sandbox's budget), then runs the code ``worker_code`` sends on
stdin."""


def _named(code: CodeType, filename: str) -> CodeType:
    """``code`` with ``filename`` in it and in every function defined in it."""
    consts = tuple(_named(c, filename) if isinstance(c, CodeType) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


@cache
def worker_code() -> bytes:
    """The worker as ``BOOTSTRAP`` reads it: the length of its marshalled code object on a line,
    then the code. Compiled once per process on the host: compiling its 700 lines took each
    sandbox's interpreter 5-10 ms of its start, loading the code takes 0.1 ms. The sandbox runs
    this interpreter's major.minor version (``sandbox_python``), whose bytecode it reads. Named
    ``<string>`` as ``-c`` source is, so no host path reaches a traceback, and no file of it is
    needed where the sandbox uid could read it. Read through Python's own bytecode cache
    (``__pycache__``, checked against the source), so that the first sandbox of a process does
    not compile it either."""
    loader = importlib.machinery.SourceFileLoader("_vf_sandbox_worker", str(WORKER))
    code = loader.get_code("_vf_sandbox_worker")
    if code is None:  # a source file always has code; the type says it may not
        raise SandboxUnavailableError(f"no code in the sandbox worker {WORKER}")
    blob = marshal.dumps(_named(code, "<string>"))
    return b"%d\n" % len(blob) + blob


def system_binds() -> list[str]:
    args: list[str] = []
    for path in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64"):
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    args += ["--perms", "0755", "--dir", "/etc"]  # what is bound in it is meant to be read
    for path in (
        "/etc/ld.so.cache",
        "/etc/ld.so.conf",
        "/etc/ld.so.conf.d",
        "/etc/alternatives",
        "/etc/localtime",
    ):
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    return args


def with_parents(binds: list[tuple[str, str]], flag: str) -> list[str]:
    """Bind arguments preceded by world-traversable parent dirs (bwrap makes them 0700 otherwise)."""
    args: list[str] = []
    made: set[str] = {"/", "/usr", "/tmp", "/workspace", "/proc", "/dev"}
    for source, dest in binds:
        parents = []
        parent = os.path.dirname(dest)
        while parent not in made and parent != "/":
            parents.append(parent)
            parent = os.path.dirname(parent)
        for p in reversed(parents):
            args += ["--perms", "0755", "--dir", p]
            made.add(p)
        args += [flag, source, dest]
        made.add(dest)
    return args
