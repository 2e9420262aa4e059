"""The import rules of docs/architecture.md hold: ``lint-imports`` checks the contracts in
pyproject.toml's ``[tool.importlinter]`` over every import statement, lazy ones included."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_every_import_contract_is_kept():
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run(
        [str(lint), "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


PACKAGES = ("verifiers", "hub_server", "hub_client", "hub_protocol")


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _import_graph() -> dict[str, set[str]]:
    """Every import between the packages' modules, lazy and TYPE_CHECKING ones included."""
    import grimp

    graph = grimp.build_graph(*PACKAGES, include_external_packages=False, cache_dir=None)
    return {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}


def _room(module: str) -> str:
    """``verifiers.envs.tool_env`` -> ``verifiers.envs``: the package (or top module) it is in."""
    return ".".join(module.split(".")[:2])


def test_no_import_cycle_between_modules_or_rooms():
    """Lazy imports inside functions and ``TYPE_CHECKING`` imports count: a cycle is a room in
    the wrong place, whatever form the import takes."""
    imports = _import_graph()
    assert _cycles(imports) == [], "module-level import cycles"
    rooms: dict[str, set[str]] = {}
    for importer, imported_modules in imports.items():
        for imported in imported_modules:
            if _room(importer) != _room(imported) and imported not in PACKAGES:
                rooms.setdefault(_room(importer), set()).add(_room(imported))
    assert _cycles(rooms) == [], "import cycles between rooms (verifiers.X, hub_server.X, ...)"
