"""The tests mirror the package tree (CONTRIBUTING.md, "Tests"): each folder of ``tests/`` is a
room of ``verifiers/`` or a top-level package of the hub, or one of the named suites that span
packages; helpers live in ``tests/support/`` and no test module imports another, so a test can
move with its room and a newcomer finds a room's tests by its name."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"

# The folders of tests/ that are no package's: what each checks. CONTRIBUTING.md names each.
CROSS_CUTTING = {
    "codebase": "rules over the whole tree: import rules, documents, exceptions, this layout",
    "environments": "the environment packages in environments/",
    "benchmarks": "the scripts in benchmarks/ run to their end and stop cleanly",
    "workflows": "a user's path end to end across commands, scripts, client and server",
    "upstream": "this SDK beside PyPI's verifiers, run side by side",
    "support": "the helpers and fixtures test folders share (no tests)",
}
# the hub's packages, each with a folder of its own
HUB_PACKAGES = ("hub_server", "hub_client", "hub_protocol")


def _package(path: Path) -> bool:
    return path.is_dir() and (path / "__init__.py").is_file()


def test_every_test_folder_is_a_package_room_or_a_named_cross_cutting_suite():
    rooms = {path.name for path in (ROOT / "verifiers").iterdir() if _package(path)}
    ambiguous = rooms & (set(HUB_PACKAGES) | set(CROSS_CUTTING))
    assert ambiguous == set(), "a folder name of tests/ must say which package it is for"
    stray = {}
    for folder in sorted(path for path in TESTS.iterdir() if path.is_dir()):
        if folder.name == "__pycache__" or folder.name in CROSS_CUTTING:
            continue
        if folder.name in HUB_PACKAGES:
            assert _package(ROOT / folder.name), folder
        elif folder.name not in rooms:
            stray[folder.name] = "neither verifiers/<room>/, a hub package nor in CROSS_CUTTING"
    assert stray == {}


def test_tests_are_one_folder_deep_and_helpers_live_in_support():
    misplaced = []
    for path in sorted(TESTS.rglob("*.py")):
        parts = path.relative_to(TESTS).parts
        if "__pycache__" in parts or parts == ("conftest.py",) or parts[0] == "support":
            continue
        if len(parts) != 2 or not (path.name.startswith("test_") or path.name == "conftest.py"):
            misplaced.append(str(path.relative_to(ROOT)))
    assert misplaced == [], "a helper goes in tests/support/, a test in tests/<room>/test_*.py"


def test_no_two_test_files_share_a_name():
    """pytest imports a test file by its basename (no ``__init__.py`` in tests/): two with one
    name would collide."""
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.glob("*/test_*.py"):
        by_name[path.name].append(str(path.relative_to(ROOT)))
    assert {name: paths for name, paths in by_name.items() if len(paths) > 1} == {}


def test_no_test_module_imports_another():
    """What two test files share is a helper in tests/support/ (``from support.x import ...``)."""
    test_modules = {
        path.stem for path in TESTS.rglob("*.py") if path.relative_to(TESTS).parts[0] != "support"
    }
    imports_of_tests = []
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.ImportFrom):
                names = [f"(relative) {node.module}"]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in test_modules or top == "tests" or name.startswith("(relative)"):
                    imports_of_tests.append(
                        f"{path.relative_to(ROOT)}:{node.lineno} imports {name}"
                    )
    assert imports_of_tests == []


def test_contributing_names_every_cross_cutting_suite():
    tests_section = (ROOT / "CONTRIBUTING.md").read_text().split("## Tests", 1)[1]
    assert [name for name in CROSS_CUTTING if f"{name}/`" not in tests_section] == []
