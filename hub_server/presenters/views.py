"""Database rows → the wire models of ``hub_protocol.wire`` (and an eval as a web page shows it).

Absolute links use the hub's configured public URL (``--public-url``, default the address it
serves on); without one they are path-absolute. They never come from a request's ``Host``
header, which any client sets to anything.
"""

from __future__ import annotations

import json
import math
from typing import Any
from urllib.parse import quote

from hub_protocol.wire import (
    DatasetInfo,
    EnvironmentSummary,
    EvalInfo,
    FileInfo,
    VersionInfo,
)
from hub_server.db.rows import DatasetRow, EnvironmentRow, EvalRow, FileRow, SummaryRow, VersionRow


class Views:
    def __init__(self, public_url: str | None) -> None:
        self.base = (public_url or "").rstrip("/")

    def url(self, path: str) -> str:
        return self.base + path

    @staticmethod
    def summary(row: SummaryRow | EnvironmentRow) -> EnvironmentSummary:
        return EnvironmentSummary(
            owner=row.owner,
            name=row.name,
            distribution=row.distribution,
            visibility=row.visibility,
            description=row.description,
            tags=json.loads(row.tags),
            latest_version=row.latest_version,
            created_at=row.created_at,
            updated_at=row.updated_at,
        )

    def file(self, env: EnvironmentRow, f: FileRow) -> FileInfo:
        return FileInfo(
            filename=f.filename,
            kind=f.kind,
            sha256=f.sha256,
            size=f.size,
            upload_time=f.upload_time,
            url=self.url(f"/files/{quote(env.owner)}/{quote(env.name)}/{quote(f.filename)}"),
            metadata_sha256=f.metadata_sha256,
        )

    def version(self, env: EnvironmentRow, v: VersionRow, files: list[FileRow]) -> VersionInfo:
        return VersionInfo(
            owner=env.owner,
            name=env.name,
            version=v.version,
            created_at=v.created_at,
            yanked=bool(v.yanked),
            yanked_reason=v.yanked_reason,
            content_hash=v.content_hash,
            requires_python=v.requires_python,
            dependencies=json.loads(v.dependencies),
            summary=v.summary,
            files=[self.file(env, f) for f in files],
        )

    @staticmethod
    def eval(env: EnvironmentRow, version: str, row: EvalRow) -> EvalInfo:
        return EvalInfo(
            id=row.id,
            owner=env.owner,
            name=env.name,
            version=version,
            uploaded_by=row.uploaded_by,
            created_at=row.created_at,
            model=row.model,
            summary=json.loads(row.summary),
            num_rollouts=row.num_rollouts,
        )

    def dataset(self, env: EnvironmentRow, version: str, row: DatasetRow) -> DatasetInfo:
        path = (
            f"/api/v1/environments/{quote(env.owner)}/{quote(env.name)}/versions/"
            f"{quote(version)}/datasets/{row.id}/data.parquet"
        )
        return DatasetInfo(
            id=row.id,
            owner=env.owner,
            name=env.name,
            version=version,
            uploaded_by=row.uploaded_by,
            created_at=row.created_at,
            rows=row.rows,
            filter=row.filter,
            models=json.loads(row.models),
            sha256=row.data_sha256,
            url=self.url(path),
        )


def finite(value: Any) -> float | None:
    """A number to show, or None: stored summaries from before validation may hold anything."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def eval_view(row: EvalRow) -> dict[str, Any]:
    """What the page shows of an eval: numbers that are numbers (old rows may hold anything)."""
    try:
        summary = json.loads(row.summary)
        histogram = json.loads(row.histogram)
    except (TypeError, ValueError):
        summary, histogram = {}, {}
    summary = summary if isinstance(summary, dict) else {}
    pass_at_k = summary.get("pass_at_k")
    if not isinstance(pass_at_k, dict):
        pass_at_k = {}
    counts = histogram.get("counts") if isinstance(histogram, dict) else None
    if not isinstance(counts, list) or not all(isinstance(c, int) for c in counts):
        histogram = {"counts": [], "low": 0.0, "high": 1.0, "peak": 0}
    return {
        "id": row.id,
        "model": row.model,
        "created_at": row.created_at,
        "uploaded_by": row.uploaded_by,
        "num_rollouts": row.num_rollouts,
        "avg_reward": finite(summary.get("avg_reward")),
        "std_reward": finite(summary.get("std_reward")),
        "num_errors": finite(summary.get("num_errors")) or 0,
        "pass_at_k": {str(k): v for k, v in pass_at_k.items() if finite(v) is not None},
        "histogram": {
            "counts": histogram["counts"],
            "low": finite(histogram.get("low")) or 0.0,
            "high": finite(histogram.get("high")) or 1.0,
            "peak": max(histogram["counts"], default=0),
        },
    }
