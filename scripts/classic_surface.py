"""Render the classic surface (verifiers/classic/surface.py) into docs/environments.md.

    python scripts/classic_surface.py          # rewrite the section between the markers
    python scripts/classic_surface.py --check  # exit 1 when the section is not what it renders

tests/codebase/test_contract.py runs the check, so the page cannot drift from the data.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from verifiers.classic import surface  # noqa: E402

DOC = ROOT / "docs" / "environments.md"
START = (
    "<!-- classic-surface: made by scripts/classic_surface.py from verifiers/classic/surface.py -->"
)
END = "<!-- classic-surface: end -->"


def render() -> str:
    """The section's body: one line per import path, then one per signature."""
    lines = [
        "| module path | since | names |",
        "|---|---|---|",
    ]
    for entry in surface.IMPORT_PATHS:
        names = ", ".join(f"`{name}`" for name in entry.names) or "(its submodules)"
        if entry.module == surface.TOP_LEVEL:
            names = f"`vf.__all__`: {names}"
        lines.append(f"| `{entry.module}` | {entry.since} | {names} |")
    lines += [
        "",
        "Parameters environments pass by name (each also takes `**kwargs` where marked):",
        "",
    ]
    for sig in surface.SIGNATURES:
        params = ", ".join(sig.parameters)
        more = ", **kwargs" if sig.var_keyword and params else "**kwargs" if sig.var_keyword else ""
        lines.append(f"- `{sig.module}.{sig.qualname}({params}{more})`")
    return "\n".join(lines)


def rendered_doc(text: str) -> str:
    """``text`` with the section between the markers replaced by ``render()``."""
    head, start, rest = text.partition(START)
    _, end, tail = rest.partition(END)
    if not start or not end:
        raise SystemExit(f"{DOC}: the markers {START!r} and {END!r} are missing")
    return f"{head}{START}\n{render()}\n{END}{tail}"


def main(argv: list[str]) -> int:
    text = DOC.read_text()
    new = rendered_doc(text)
    if "--check" in argv:
        if new != text:
            print(f"{DOC} is out of date: run python scripts/classic_surface.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
