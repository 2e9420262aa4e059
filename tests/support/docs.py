"""What the document tests share: the test functions a test file defines (a document's named
test, or a skipped doc line's covering test, must exist)."""

from __future__ import annotations

import ast
from pathlib import Path


def defined_tests(path: Path) -> set[str]:
    """The names of the ``test_*`` functions defined anywhere in ``path``."""
    tree = ast.parse(path.read_text())
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.name.startswith("test_")
    }
