"""The classic surface (verifiers/classic/surface.py) holds: every module path environments
import from imports, every name in it resolves, every parameter they pass by name is accepted,
``vf.__all__`` is exactly the surface's top-level row, and each contract room exports what its
``__all__`` says (httpx's exported-members test)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import verifiers as vf
from verifiers.classic import surface

# Modules of a contract room that need an optional extra this machine may lack.
OPTIONAL = {"reasoning_gym", "textarena", "mcp", "anthropic", "gymnasium"}


def _optional_missing(exc: ImportError) -> bool:
    return (exc.name or "").split(".")[0] in OPTIONAL


@pytest.mark.parametrize("entry", surface.IMPORT_PATHS, ids=lambda e: e.module)
def test_classic_module_paths_and_names_exist(entry):
    module = importlib.import_module(entry.module)
    missing = [name for name in entry.names if not hasattr(module, name)]
    assert not missing, f"{entry.module} lacks {missing}"


@pytest.mark.parametrize("sig", surface.SIGNATURES, ids=lambda s: f"{s.module}.{s.qualname}")
def test_classic_signatures_take_their_parameters(sig):
    owner: object = importlib.import_module(sig.module)
    for part in sig.qualname.split("."):
        owner = getattr(owner, part)
    params = inspect.signature(owner).parameters  # type: ignore[arg-type]
    missing = [name for name in sig.parameters if name not in params]
    assert not missing, f"{sig.qualname} no longer takes {missing}"
    takes_kwargs = any(p.kind is p.VAR_KEYWORD for p in params.values())
    assert takes_kwargs == sig.var_keyword


def test_vf_all_is_the_surface_top_level_row_sorted_and_resolving():
    assert vf.__all__ == sorted(set(vf.__all__)), "vf.__all__ is sorted, without repeats"
    assert set(vf.__all__) == set(surface.top_level_names())
    unresolved = [name for name in vf.__all__ if getattr(vf, name, None) is None]
    assert not unresolved


def test_the_surface_lists_each_module_path_once_sorted_by_path():
    modules = [entry.module for entry in surface.IMPORT_PATHS]
    assert modules == sorted(set(modules)) and modules[0] == surface.TOP_LEVEL
    for entry in surface.IMPORT_PATHS:
        assert list(entry.names) == sorted(set(entry.names)), entry.module


def _contract_modules() -> list[str]:
    """Every module of the contract rooms (``verifiers`` and each package or module a classic
    path lives in), found by walking the packages, so a new module is covered without a list."""
    found = {surface.TOP_LEVEL}
    for room in surface.rooms():
        if room == "__init__":
            continue
        name = f"verifiers.{room}"
        found.add(name)
        module = importlib.import_module(name)
        if hasattr(module, "__path__"):
            found |= {
                info.name for info in pkgutil.walk_packages(module.__path__, prefix=f"{name}.")
            }
    return sorted(found)


@pytest.mark.parametrize("module_name", _contract_modules())
def test_each_contract_module_exports_what_its_all_names(module_name):
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        if _optional_missing(exc):
            pytest.skip(f"needs the optional {exc.name}")
        raise
    exported = getattr(module, "__all__", None)
    if exported is None:
        return
    assert len(exported) == len(set(exported)), f"{module_name}.__all__ repeats a name"
    missing = [name for name in exported if not hasattr(module, name)]
    assert not missing, f"{module_name}.__all__ names what it does not have: {missing}"
