"""This SDK's own wheel, served by the hub, so a second machine installs exactly this SDK.

The distribution is named ``verifiers``, like PyPI's unrelated v1-only project: any install by
name (``pip install verifiers``, with or without an extra index) can resolve to PyPI's package.
The hub therefore serves the wheel of the SDK it runs at ``/sdk/`` (JSON: version, filename,
sha256, URL and the install commands) and ``/sdk/<filename>``, and the documented install is a
direct URL requirement pinned by its sha256, which no index can substitute, then the local model
stack from the SDK's own installer (torch pinned, its CPU build without a GPU, and the embedded
model: an extra cannot say which torch build, so ``verifiers[local]`` would pull CUDA's)::

    pip install "verifiers @ http://HUB/sdk/verifiers-0.3.1.post1-py3-none-any.whl#sha256=…"
    python -m verifiers.local_model.stack

The wheel is the one given to ``prime hub serve --sdk-wheel`` or, for a hub run from a source
checkout, built with ``uv build`` when the hub starts (in the background, never because a request
asked), from a copy of the files git tracks: untracked files in the working tree (notes, keys,
scratch code) never end up in a wheel other machines install. The build is cached in the hub's
data directory per SDK version and content of those files.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import threading
import tomllib
from dataclasses import dataclass
from pathlib import Path

from verifiers.installs.build_scratch import build_env
from verifiers.installs.sdk_guard import sdk_version
from verifiers.installs.uv_config import uv_config_args
from verifiers.processes.leftovers import owned_dir, remove_abandoned

# what a machine that runs models adds after the SDK (verifiers/local_model/stack.py)
LOCAL_STACK_COMMAND = "python -m verifiers.local_model.stack"


class SDKWheelUnavailable(RuntimeError):
    """The hub has no wheel of its SDK to serve (installed from a wheel, none given)."""


@dataclass(frozen=True)
class SDKWheel:
    path: Path
    version: str
    sha256: str

    @property
    def filename(self) -> str:
        return self.path.name

    def install_command(self, base_url: str) -> str:
        url = f"{base_url}/sdk/{self.filename}#sha256={self.sha256}"
        return f'pip install "verifiers @ {url}"'


def source_checkout() -> Path | None:
    """The project root this SDK runs from, when it is a source checkout (editable install)."""
    import verifiers

    root = Path(verifiers.__file__).resolve().parent.parent
    pyproject = root / "pyproject.toml"
    if not pyproject.exists():
        return None
    try:
        name = tomllib.loads(pyproject.read_text())["project"]["name"]
    except (KeyError, tomllib.TOMLDecodeError):
        return None
    return root if name == "verifiers" else None


BUILD_PREFIX = ".build-"


class SDKWheels:
    """The one wheel this hub serves: given, or built once at start (``start``)."""

    def __init__(self, data_dir: Path, given: Path | None = None, build: bool = True) -> None:
        self.cache = data_dir / "sdk"
        self.given = given
        self.build = build
        self.wheel: SDKWheel | None = None
        self.problem = "the SDK wheel is being built; try again in a minute"
        self.done = threading.Event()

    def start(self) -> None:
        """Describe the given wheel, or build one in a background thread."""
        if self.given is not None:
            self._finish(lambda: _describe(self.given))
        elif not self.build:
            self.problem = "this hub serves no SDK wheel (started with --no-sdk)"
            self.done.set()
        else:
            threading.Thread(target=self._finish, args=(self._find_or_build,), daemon=True).start()

    def _finish(self, make) -> None:
        try:
            self.wheel = make()
        except SDKWheelUnavailable as exc:
            self.problem = str(exc)
        self.done.set()

    def get(self) -> SDKWheel:
        if self.wheel is None:
            raise SDKWheelUnavailable(self.problem)
        return self.wheel

    def _find_or_build(self) -> SDKWheel:
        root = source_checkout()
        if root is None:
            raise SDKWheelUnavailable(
                "this hub runs an installed SDK and was given no wheel to serve: start it with "
                "prime hub serve --sdk-wheel PATH"
            )
        files = tracked_files(root)
        digest = hashlib.sha256()
        for relative in files:
            digest.update(relative.encode() + b"\0" + (root / relative).read_bytes() + b"\0")
        folder = self.cache / f"{sdk_version()}-{digest.hexdigest()[:16]}"
        existing = sorted(folder.glob("verifiers-*.whl")) if folder.exists() else []
        if existing:
            return _describe(existing[-1])
        # built under the hub's own data dir, named for this process: a hub stopped mid-build
        # (its build thread dies with it, no cleanup runs) leaves it for the next start to remove
        self.cache.mkdir(parents=True, exist_ok=True)
        remove_abandoned(self.cache, BUILD_PREFIX)
        build_dir = owned_dir(BUILD_PREFIX, self.cache)
        try:
            tmp = str(build_dir)
            source = Path(tmp) / "src"
            for relative in files:
                (source / relative).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(root / relative, source / relative)
            result = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "uv",
                    *uv_config_args(),
                    "build",
                    "--wheel",
                    "--out-dir",
                    f"{tmp}/out",
                    str(source),
                ],
                capture_output=True,
                text=True,
                env=build_env(Path(tmp)),  # the backend's temporary files go with the dir
            )
            built = sorted(Path(tmp, "out").glob("verifiers-*.whl"))
            if result.returncode != 0 or not built:
                raise SDKWheelUnavailable(f"building the SDK wheel failed: {result.stderr[-500:]}")
            folder.mkdir(parents=True, exist_ok=True)
            target = folder / built[0].name
            shutil.move(built[0], target)
        finally:
            shutil.rmtree(build_dir, ignore_errors=True)
        return _describe(target)


def tracked_files(root: Path) -> list[str]:
    """The files git tracks under ``root`` (as they are in the working tree), or an error."""
    result = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--cached"], capture_output=True, text=True
    )
    if result.returncode != 0:
        raise SDKWheelUnavailable(
            "this checkout is not a git repository, so the hub cannot tell its files from "
            "untracked ones: build a wheel (uv build) and start with --sdk-wheel PATH"
        )
    return sorted(f for f in result.stdout.split("\0") if f and (root / f).is_file())


def _describe(path: Path) -> SDKWheel:
    if not path.is_file() or not path.name.startswith("verifiers-") or path.suffix != ".whl":
        raise SDKWheelUnavailable(f"{path} is not a verifiers wheel")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    version = path.name.split("-")[1]
    return SDKWheel(path=path, version=version, sha256=digest)
