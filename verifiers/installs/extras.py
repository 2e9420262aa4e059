"""The command that installs one of this SDK's optional extras, for error messages.

``pip install 'verifiers[mcp]'`` would install PyPI's ``verifiers`` (upstream's, v1-only since
0.4) over this SDK; the hint names the extra's own requirements, read from this SDK's installed
metadata, so they are declared once (pyproject.toml)."""

from __future__ import annotations

import shlex
from importlib.metadata import PackageNotFoundError, requires

from packaging.requirements import Requirement


def extra_requirements(extra: str) -> list[str]:
    """The requirements extra ``extra`` adds, nested extras of this SDK expanded."""
    try:
        declared = requires("verifiers") or []
    except PackageNotFoundError:
        return []
    found: list[str] = []
    for line in declared:
        requirement = Requirement(line)
        if requirement.marker is None or not requirement.marker.evaluate({"extra": extra}):
            continue
        if requirement.name == "verifiers":
            for nested in sorted(requirement.extras):
                found += [r for r in extra_requirements(nested) if r not in found]
            continue
        requirement.marker = None
        if str(requirement) not in found:
            found.append(str(requirement))
    return found


def install_hint(extra: str, fallback: str) -> str:
    """``pip install 'psycopg[binary]>=3.1' ...`` for ``extra`` (``fallback``: the packages
    to name when this SDK's metadata is not installed)."""
    packages = extra_requirements(extra) or [fallback]
    return "pip install " + " ".join(shlex.quote(p) for p in packages)
