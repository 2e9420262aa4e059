"""vf-install: install a local environment package (editable) into the current Python environment."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from verifiers.sdk_guard import installed_sdk_requirement, keep_sdk_args, kept_sdk_line


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


def uv_binary() -> str | None:
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        return shutil.which("uv")


def install_command(directory: Path, workdir: Path, editable: bool = True) -> list[str]:
    """The uv (or pip) command; uv leaves the installed SDK out of the resolution."""
    target = ["-e", str(directory)] if editable else [str(directory)]
    uv = uv_binary()
    if uv:
        return [uv, "pip", "install", "--python", sys.executable, *keep_sdk_args(workdir), *target]
    return [sys.executable, "-m", "pip", "install", *target]


def distribution_name(directory: Path) -> str | None:
    import tomllib

    try:
        return tomllib.loads((directory / "pyproject.toml").read_text())["project"]["name"]
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vf-install", description=__doc__)
    parser.add_argument("name", help="environment name (or a path to its directory)")
    parser.add_argument(
        "-p",
        "--path",
        default="./environments",
        help="where environments live (default ./environments)",
    )
    parser.add_argument(
        "--no-editable", action="store_true", help="a regular install instead of an editable one"
    )
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="one line per environment; the installer's own output only if it fails",
    )
    args = parser.parse_args(argv)
    try:
        directory = find_package(args.name, args.path)
    except FileNotFoundError as exc:
        print(f"vf-install: {exc}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as workdir:
        command = install_command(directory, Path(workdir), editable=not args.no_editable)
        if not command[0].endswith("uv"):
            print(
                "vf-install: uv not found, installing with pip, which cannot keep this SDK if the "
                "environment pins another verifiers; `pip install uv` first",
                file=sys.stderr,
            )
        if not args.quiet:
            print("$ " + " ".join(command), file=sys.stderr)
        result = subprocess.run(command, capture_output=args.quiet, text=True)
    if result.returncode != 0:
        if args.quiet:
            print("$ " + " ".join(command), file=sys.stderr)
            print((result.stdout or "") + (result.stderr or ""), file=sys.stderr, end="")
        print(
            f"vf-install: installing {directory} failed (exit {result.returncode})", file=sys.stderr
        )
        return result.returncode
    name = distribution_name(directory)
    line = kept_sdk_line(name, installed_sdk_requirement(name)) if name else None
    if line:
        print(line)
    print(f"installed {directory}; evaluate with: vf-eval {args.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
