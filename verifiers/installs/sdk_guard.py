"""Installing an environment never replaces this SDK.

Environments written for the classic SDK pin ``verifiers`` (``==0.1.5``, ``>=0.3.0``, a git
source). PyPI's ``verifiers`` is a different, v1-only project, so honouring the pin would swap
this SDK out. Every install (``vf-install``, ``prime env install``, ``--locked``) therefore
excludes ``verifiers`` from uv's resolution (``--excludes``), keeps the installed SDK, and says
so in one line; the lock file records the SDK that satisfied the requirement.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from verifiers.local_model import stack as local_stack

SDK_DISTRIBUTION = "verifiers"
MARKER_MODULES = ("verifiers.installs.sdk_guard", "verifiers.sdk_guard")
"""This module, and where earlier releases of this SDK kept it: PyPI's unrelated verifiers has neither."""

INSTALL_HINT = (
    "install this SDK from its checkout (bash scripts/setup.sh, or pip install -e '.[local]'), "
    "or on another machine with the pip command a hub prints at http://HUB/sdk/ "
    "(never `pip install verifiers`: PyPI's verifiers is an unrelated project)"
)
"""The one way every message names to get this SDK."""

LOCAL_STACK_HINT = local_stack.HINT
"""What the built-in model server needs (vf-eval without -b, vf-serve), in order."""

_PROBE = (
    "import importlib.util, importlib.metadata as m\n"
    "spec = importlib.util.find_spec('verifiers')\n"
    "if spec is None: print('missing')\n"
    "else:\n"
    "    def has(name):\n"
    "        try: return importlib.util.find_spec(name) is not None\n"
    "        except ImportError: return False\n"
    f"    ours = any(has(name) for name in {MARKER_MODULES!r})\n"
    "    try: version = m.version('verifiers')\n"
    "    except m.PackageNotFoundError: version = '?'\n"
    "    print(('ours' if ours else 'foreign') + ' ' + version + ' ' + str(spec.origin))\n"
)


def sdk_problem(python: str) -> str | None:
    """Why ``python``'s importable ``verifiers`` cannot run this SDK's environments, if so:
    absent, or another project of the same name (PyPI's)."""
    import subprocess

    from verifiers.installs.interpreter import ask

    try:
        probe = ask(python, _PROBE, check=True)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{python} could not be run: {exc}"
    state, *rest = probe.stdout.split() or ["missing"]
    if state == "missing":
        return f"{python} has no verifiers installed: {INSTALL_HINT}"
    if state == "foreign":
        version, origin = [*rest, "?", "?"][:2]
        return (
            f"the verifiers importable by {python} ({version}, {origin}) is not this SDK: "
            f"{INSTALL_HINT}"
        )
    return None


def sdk_version() -> str:
    try:
        return metadata.version(SDK_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "0+unknown"


def keep_sdk_args(workdir: str | Path) -> list[str]:
    """uv flags that leave the installed ``verifiers`` out of the resolution."""
    excludes = Path(workdir) / "vf-excludes.txt"
    excludes.write_text(SDK_DISTRIBUTION + "\n")
    return ["--excludes", str(excludes)]


def sdk_requirement(requires: list[str] | None) -> str | None:
    """The ``verifiers`` requirement among a package's ``Requires-Dist`` lines, if any."""
    for line in requires or []:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if requirement.name.lower() != SDK_DISTRIBUTION:
            continue
        if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
            return str(requirement)
    return None


def installed_sdk_requirement(distribution: str) -> str | None:
    """The ``verifiers`` requirement of an installed distribution (in this Python)."""
    try:
        return sdk_requirement(metadata.requires(distribution))
    except metadata.PackageNotFoundError:
        return None


def kept_sdk_line(package: str, requirement: str | None) -> str | None:
    """What to tell the user when a package asked for ``verifiers`` itself."""
    if not requirement:
        return None
    return (
        f"{package}: its own requirement {requirement!r} is satisfied by this SDK "
        f"(verifiers {sdk_version()}, kept as installed)"
    )
