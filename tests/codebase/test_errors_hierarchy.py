"""Every exception class the SDK defines is a ``vf.Error``, so ``except vf.Error`` catches what
the SDK raises on purpose (and the builtin bases a class also has keep older handlers working)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import verifiers as vf

ROOT = Path(vf.__file__).parent
NOT_MODULES = {"verifiers/rubrics/sandbox_checks.py"}  # a program's template, run in a sandbox


def exception_classes() -> list[tuple[str, str]]:
    """(module, class name) of every top-level class in verifiers/ whose bases name an
    exception: found by reading the source, so a new module is covered without a list."""
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent).as_posix()
        if rel in NOT_MODULES:
            continue
        module = rel.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and node.bases:
                found.append((module, node.name))
    return found


def test_every_sdk_exception_is_a_vf_error():
    checked, outside = 0, []
    for module, name in exception_classes():
        try:
            cls = getattr(importlib.import_module(module), name)
        except ImportError as exc:  # an optional extra (vLLM...) this machine lacks
            assert "vllm" in str(exc) or "deepspeed" in str(exc), f"{module}: {exc}"
            continue
        if isinstance(cls, type) and issubclass(cls, BaseException):
            checked += 1
            if not issubclass(cls, vf.Error):
                outside.append(f"{module}.{name}")
    assert checked >= 40  # the hierarchy in errors.py and the commands' own
    assert outside == [], f"exception classes outside vf.Error: {outside}"
