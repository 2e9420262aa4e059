"""The frozen contract is marked and kept apart: docs/environments.md renders the classic surface
as it is, docs/architecture.md marks every room contract or internal (each room a classic path
lives in: contract), ``verifiers/utils/`` only re-exports and nothing imports it, and package
``__init__``s export without implementing."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

from verifiers.classic import surface

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("verifiers", "hub_server", "hub_client", "hub_protocol")

# Package ``__init__``s that may define something, and only this: the PEP 562 hooks that load a
# name on first use (``import verifiers as vf`` and ``verifiers.rubrics`` stay cheap: no openai
# SDK, no math-verify until asked for), which must live in the package's own ``__init__``.
LAZY_INITS = {
    "verifiers/__init__.py": {"__getattr__", "__dir__"},
    "verifiers/rubrics/__init__.py": {"__getattr__"},
    "verifiers/clients/__init__.py": {"__getattr__"},
    "verifiers/types/__init__.py": {"__getattr__"},
}


def test_the_environments_doc_renders_the_classic_surface_as_it_is():
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "classic_surface.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr


def _rooms_table() -> dict[str, str]:
    """Each room cell of docs/architecture.md's rooms table -> its contract/internal mark."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    table = text[text.index("| room | contract or internal |") :].split("\n\n")[0]
    rows = {}
    for line in table.splitlines()[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows[cells[0]] = cells[1]
    return rows


def test_every_room_is_marked_and_each_classic_room_is_contract():
    rows = _rooms_table()
    assert rows and set(rows.values()) <= {"contract", "internal"}, rows
    for room in surface.rooms():
        if room == "__init__":
            pattern = r"`verifiers/__init__\.py`"
        elif (ROOT / "verifiers" / f"{room}.py").is_file():
            pattern = rf"`(verifiers/)?{room}\.py`"
        else:
            pattern = rf"`{room}/`"
        marks = [mark for cell, mark in rows.items() if re.search(pattern, cell)]
        assert marks == ["contract"], f"room {room}: {marks or 'not in the table'}"


def _python_files(*packages: str) -> list[Path]:
    return [path for package in packages for path in sorted((ROOT / package).rglob("*.py"))]


def _imports(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append(node.module)
            found += [f"{node.module}.{alias.name}" for alias in node.names]
    return found


def test_nothing_imports_verifiers_utils_but_verifiers_utils():
    """Lazy imports too (import-linter's contract sees only what it can build a graph from)."""
    offenders = []
    for path in _python_files(*PACKAGES, "environments"):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("verifiers/utils/"):
            continue
        for name in _imports(ast.parse(path.read_text())):
            if name == "verifiers.utils" or name.startswith("verifiers.utils."):
                offenders.append(f"{rel}: {name}")
    assert offenders == []


# Classic helpers still defined at their classic path, to move when their rooms settle (issue 39
# moves messages/ and envs/ apart): message_utils' builders and readers -> messages/ (and
# ``sanitize_tool_calls`` -> results/outputs.py), response_utils' parsers -> envs/model_turn.py.
NOT_YET_MOVED: set[str] = set()  # every utils module is a re-export now


def test_verifiers_utils_modules_only_re_export():
    """Each ``verifiers.utils`` module imports names that live elsewhere and lists them in
    ``__all__``: no definitions (the classic paths stay, the code lives in its room)."""
    defining = []
    for path in _python_files("verifiers/utils"):
        if path.relative_to(ROOT).as_posix() in NOT_YET_MOVED:
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Import | ast.ImportFrom | ast.Expr):
                continue  # imports and the docstring
            if isinstance(node, ast.Assign) and [getattr(t, "id", "") for t in node.targets] == [
                "__all__"
            ]:
                continue
            defining.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert defining == []


def test_package_inits_export_and_do_not_implement():
    implementing = []
    for path in _python_files(*PACKAGES):
        if path.name != "__init__.py":
            continue
        rel = path.relative_to(ROOT).as_posix()
        allowed = LAZY_INITS.get(rel, set())
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                if node.name not in allowed or node.col_offset:
                    implementing.append(f"{rel}:{node.lineno} {node.name}")
    assert implementing == []
