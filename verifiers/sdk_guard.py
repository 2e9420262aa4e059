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

SDK_DISTRIBUTION = "verifiers"


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
        if requirement.name.lower() == SDK_DISTRIBUTION and not requirement.marker:
            return str(requirement)
        if requirement.name.lower() == SDK_DISTRIBUTION and requirement.marker.evaluate(
            {"extra": ""}
        ):
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
