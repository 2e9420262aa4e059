"""vf-install: install a local environment package (editable) into the current Python environment.

The install is confined (``verifiers.installs.confined``): the project and every dependency uv
picks are staged and checked before anything lands, and dependencies install from wheels only.
Building the project runs its build backend: vf-install only source you trust (a hub
environment installs with ``prime env install``, from its published wheel, with nothing built).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Annotated

from packaging.utils import canonicalize_name
from pydantic import Field

from verifiers.cli.settings import CommandSettings, Flag, parse_settings
from verifiers.cli.usage import command
from verifiers.errors import UsageError
from verifiers.installs.build_scratch import build_env
from verifiers.installs.confined import ConfinementError, InstallFailed, Requested, install
from verifiers.installs.sdk_guard import installed_sdk_requirement, keep_sdk_args, kept_sdk_line
from verifiers.installs.uv_config import uv_binary, uv_command


def find_package(name: str, path: str) -> Path:
    """The package directory for NAME under PATH (``-``/``_`` spellings), or NAME itself as a path."""
    direct = Path(name)
    if (direct / "pyproject.toml").exists():
        return direct
    for candidate in (name, name.replace("-", "_"), name.replace("_", "-")):
        directory = Path(path) / candidate
        if (directory / "pyproject.toml").exists():
            return directory
    raise FileNotFoundError(
        f"no environment package {name!r} under {path} (looked for a pyproject.toml in {Path(path) / name.replace('-', '_')})"
    )


def build_wheel(uv: str, directory: Path, out: Path) -> Path:
    """The project's wheel (its own build backend runs: this is the source being installed;
    no dependency is ever built)."""
    result = subprocess.run(
        uv_command(uv, "build", "--wheel", "--out-dir", str(out), str(directory)),
        capture_output=True,
        text=True,
        env=build_env(out),  # the backend's temporary files go with ``out``
    )
    wheels = sorted(out.glob("*.whl"))
    if result.returncode != 0 or not wheels:
        raise InstallFailed((result.stderr or result.stdout).strip()[-3000:])
    return wheels[0]


def distribution_name(directory: Path) -> str | None:
    import tomllib

    try:
        return tomllib.loads((directory / "pyproject.toml").read_text())["project"]["name"]
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return None


class InstallSettings(CommandSettings):
    """Every vf-install flag: its default and help, declared once."""

    name: Annotated[str, Flag(positional=True)] = Field(
        description="environment name (or a path to its directory)"
    )
    path: Annotated[str, Flag("-p")] = Field(
        "./environments", description="where environments live"
    )
    no_editable: bool = Field(False, description="a regular install instead of an editable one")
    quiet: Annotated[bool, Flag("-q")] = Field(
        False, description="one line per environment; the installer's own output only if it fails"
    )


@command("vf-install")
def main(argv: list[str] | None = None) -> int:
    args = parse_settings(InstallSettings, argv, "vf-install", __doc__)
    try:
        directory = find_package(args.name, args.path)
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from exc
    name = distribution_name(directory)
    uv = uv_binary()
    if uv is None or name is None:
        raise UsageError(
            "uv is needed (pip install uv)"
            if uv is None
            else f"{directory}/pyproject.toml names no [project] name"
        )
    from verifiers.installs.provenance import read_records

    hub = read_records().get(canonicalize_name(name))
    if hub is not None:
        raise UsageError(
            f"{name} is installed here from the hub as {hub.get('owner')}/"
            f"{hub.get('name')} {hub.get('version')}; installing {directory} would replace it "
            f"(and `prime env uninstall` would then remove yours). Uninstall it first: "
            f"prime env uninstall {hub.get('owner')}/{hub.get('name')}"
        )
    requested = Requested(
        name, {canonicalize_name(name)}, directory.resolve() if not args.no_editable else None
    )
    with tempfile.TemporaryDirectory() as workdir:
        try:
            target = (
                ["-e", str(directory)]
                if not args.no_editable
                else [str(build_wheel(uv, directory, Path(workdir)))]
            )
            installed = install(
                uv,
                sys.executable,
                target,
                [requested],
                resolve_args=keep_sdk_args(workdir),
            )
        except (ConfinementError, InstallFailed) as exc:
            print(f"vf-install: installing {directory} failed: {exc}", file=sys.stderr)
            return 1
    if not args.quiet:
        for dist, version in installed:
            print(f" + {dist}=={version}", file=sys.stderr)
    line = kept_sdk_line(name, installed_sdk_requirement(name)) if name else None
    if line:
        print(line)
    print(f"installed {directory}; evaluate with: vf-eval {args.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
