"""Where results live: ``outputs/evals/<env-id>--<model>/<run-id>/``."""

from __future__ import annotations

import hashlib
import re
import uuid
from datetime import UTC, datetime
from pathlib import Path

RESULTS_FILE = "results.jsonl"
METADATA_FILE = "metadata.json"
MAX_SEGMENT = 200  # bytes of a directory name: filesystems refuse past 255


def safe_segment(text: str) -> str:
    """A path segment from an env id or model name: ``/`` becomes ``--``, odd characters ``_``."""
    text = text.replace("/", "--")
    return re.sub(r"[^A-Za-z0-9._@+=-]", "_", text).strip(".") or "unnamed"


def new_run_dir(output_dir: str | Path, env_id: str, model: str) -> Path:
    """A fresh run directory; the run id sorts by start time and never collides. A name past
    ``MAX_SEGMENT`` (a model id an endpoint lists is anyone's choice: 300 characters crashed
    vf-eval with ENAMETOOLONG) is cut and keeps a hash of the whole, so names stay apart."""
    run_id = datetime.now(UTC).strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]
    name = f"{safe_segment(env_id)}--{safe_segment(model)}"
    if len(name) > MAX_SEGMENT:
        digest = hashlib.sha256(name.encode()).hexdigest()[:12]
        name = f"{name[: MAX_SEGMENT - 13]}-{digest}"
    return Path(output_dir) / "evals" / name / run_id
