"""Where results live: ``outputs/evals/<env-id>--<model>/<run-id>/``."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from pathlib import Path

RESULTS_FILE = "results.jsonl"
METADATA_FILE = "metadata.json"


def safe_segment(text: str) -> str:
    """A path segment from an env id or model name: ``/`` becomes ``--``, odd characters ``_``."""
    text = text.replace("/", "--")
    return re.sub(r"[^A-Za-z0-9._@+=-]", "_", text).strip(".") or "unnamed"


def new_run_dir(output_dir: str | Path, env_id: str, model: str) -> Path:
    """A fresh run directory; the run id sorts by start time and never collides."""
    run_id = datetime.now(UTC).strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]
    return Path(output_dir) / "evals" / f"{safe_segment(env_id)}--{safe_segment(model)}" / run_id
