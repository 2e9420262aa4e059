"""One definition of an environment's content hash, for ``metadata.json`` and the hub alike.

The hash covers what ``import`` runs: every file the environment installs into site-packages
(its modules and package data), by POSIX path relative to site-packages, sorted, each as
``path NUL sha256(bytes)``; compiled files (``__pycache__``, ``*.pyc``) and the ``.dist-info``
metadata are left out. ``vf-eval`` hashes the loaded module's files, the hub the same members of
the uploaded wheel, so a run's ``env_content_hash`` names the hub version whose code it ran.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable


def is_hashed(path: str) -> bool:
    """Whether a site-packages-relative path is part of the environment's content."""
    parts = path.split("/")
    return (
        bool(path)
        and not parts[0].endswith(".dist-info")
        and "__pycache__" not in parts
        and not path.endswith((".pyc", ".pyo"))
    )


def content_hash(files: Iterable[tuple[str, bytes]]) -> str:
    """``sha256:<hex>`` of ``(site-packages-relative path, bytes)`` pairs (order does not matter)."""
    digest = hashlib.sha256()
    for path, data in sorted((p, d) for p, d in files if is_hashed(p)):
        digest.update(path.encode() + b"\0" + hashlib.sha256(data).digest())
    return "sha256:" + digest.hexdigest()
