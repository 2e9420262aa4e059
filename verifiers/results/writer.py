"""Streaming results to a run directory, and resuming a run from it.

Rows are appended one group at a time and flushed, so a run killed at any moment keeps every group
that finished. On resume, complete groups are kept and skipped; a group cut off mid-write (or a
truncated last line) is dropped and rerun, so no rollout is lost or duplicated.

An environment may keep one more line per rollout in files beside ``results.jsonl`` (a v1
taskset's ``traces.jsonl``: ``side_files``, a state key -> a file name). Each such line is the
state's string under that key (a JSON object) with the rollout's ``example_id`` and
``rollout_index`` put first; a group's side lines are flushed before its rows, and a resume keeps
exactly the side lines of the rows it keeps, so the files never disagree.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from verifiers.errors import ResumeError
from verifiers.results.layout import METADATA_FILE, RESULTS_FILE
from verifiers.results.records import SummaryAccumulator, dumps_line
from verifiers.results.schema import RunMetadata, RunStatus


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def read_rows(path: Path) -> Iterator[dict[str, Any]]:
    """Rows of a results file, skipping a truncated or corrupt line (a killed writer's last one)."""
    if not path.exists():
        return
    with path.open("rb") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                row = orjson.loads(line)
            except orjson.JSONDecodeError:
                try:  # NaN / Infinity (another writer's json.dumps): valid Python JSON
                    row = json.loads(line)
                except ValueError:
                    continue
            if isinstance(row, dict) and "example_id" in row and "rollout_index" in row:
                yield row


class RunWriter:
    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        metadata: RunMetadata,
        side_files: Mapping[str, str] | None = None,
    ) -> None:
        self.run_dir = Path(run_dir)
        self.side_files = dict(side_files or {})
        self.results_path = self.run_dir / RESULTS_FILE
        self.metadata_path = self.run_dir / METADATA_FILE
        self.metadata = metadata
        self.summary = SummaryAccumulator()
        self.completed_ids: set[int] = set()
        self.previous_rows: list[dict[str, Any]] = []
        self._file: BinaryIO | None = None
        self._side: dict[str, BinaryIO] = {}

    def open(self, rollouts_per_example: int) -> RunWriter:
        """Create the run directory, or pick up the complete groups of an earlier run in it."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if self.metadata_path.exists() or self.results_path.exists():
            self._resume(rollouts_per_example)
        self._file = self.results_path.open("ab")
        self._side = {
            key: (self.run_dir / name).open("ab") for key, name in self.side_files.items()
        }
        self.write_metadata()
        return self

    def _resume(self, rollouts_per_example: int) -> None:
        if self.metadata_path.exists():
            try:
                old = RunMetadata.model_validate_json(self.metadata_path.read_bytes())
            except ValueError as exc:
                raise ResumeError(
                    f"{self.metadata_path} is not a valid metadata file: {exc}"
                ) from exc
            for field in ("env_id", "model", "rollouts_per_example"):
                before, now = getattr(old, field), getattr(self.metadata, field)
                if before != now:
                    raise ResumeError(
                        f"cannot resume {self.run_dir}: it was run with {field}={before!r}, now {field}={now!r}; "
                        "use the same settings or a new output directory"
                    )
            self.metadata.run_id = old.run_id  # a resumed run is the same run
            self.metadata.started_at = old.started_at
            self.metadata.duration_s = old.duration_s
            self.metadata.resumed = old.resumed + 1
        groups: dict[int, list[dict[str, Any]]] = {}
        for row in read_rows(self.results_path):
            groups.setdefault(int(row["example_id"]), []).append(row)
        kept: list[dict[str, Any]] = []
        for example_id, rows in groups.items():
            indices = {int(r["rollout_index"]) for r in rows}
            if indices == set(range(rollouts_per_example)) and len(rows) == rollouts_per_example:
                kept.extend(rows)
                self.completed_ids.add(example_id)
        self.previous_rows = kept
        for row in kept:
            self.summary.add(row)
        # Rewrite atomically without partial groups or a torn last line.
        _replace_lines(self.results_path, [dumps_line(row) for row in kept])
        keys = {_rollout_key(row) for row in kept}
        for name in self.side_files.values():
            _replace_lines(self.run_dir / name, _kept_side_lines(self.run_dir / name, keys))

    def write_group(
        self, records: list[dict[str, Any]], states: Sequence[Mapping[str, Any]] = ()
    ) -> None:
        """Append a finished group's rows; each of ``states`` (the rows' rollouts, in order)
        gives its side lines, written and flushed first."""
        assert self._file is not None, "RunWriter.open() first"
        for key, side in self._side.items():
            lines = [
                side_line(record, state[key])
                for record, state in zip(records, states, strict=False)
                if isinstance(state.get(key), str)
            ]
            if lines:
                side.write(b"".join(lines))
                side.flush()
        self._file.write(b"".join(dumps_line(r) for r in records))
        self._file.flush()
        for record in records:
            self.summary.add(record)

    def write_metadata(self, status: RunStatus | None = None, elapsed_s: float = 0.0) -> None:
        if status is not None:
            self.metadata.status = status
            self.metadata.finished_at = now_iso()
            self.metadata.duration_s += elapsed_s
        self.metadata.summary = self.summary.summary()
        tmp = self.metadata_path.with_suffix(".json.tmp")
        tmp.write_bytes(self.metadata.model_dump_json(indent=2).encode())
        os.replace(tmp, self.metadata_path)

    def close(self, status: RunStatus, elapsed_s: float) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        for side in self._side.values():
            side.close()
        self._side = {}
        self.write_metadata(status, elapsed_s)


def side_line(record: Mapping[str, Any], line: str) -> bytes:
    """A side file's line: the state's JSON object with the rollout's key put first."""
    body = line.strip()
    if not body.startswith("{"):
        raise ValueError(f"a side file's line is a JSON object, got {body[:40]!r}")
    example_id, rollout_index = _rollout_key(record)
    key = f'{{"example_id":{example_id},"rollout_index":{rollout_index}'
    return (key + ("}" if body == "{}" else "," + body[1:]) + "\n").encode()


def _rollout_key(row: Mapping[str, Any]) -> tuple[int, int]:
    return int(row["example_id"]), int(row["rollout_index"])


def _kept_side_lines(path: Path, keys: set[tuple[int, int]]) -> list[bytes]:
    """The side lines of ``keys``, the first of each (a torn or keyless line is dropped)."""
    if not path.exists():
        return []
    kept: dict[tuple[int, int], bytes] = {}
    with path.open("rb") as f:
        for line in f:
            try:
                data = orjson.loads(line)
                key = _rollout_key(data)
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                continue
            if key in keys and key not in kept:
                kept[key] = line if line.endswith(b"\n") else line + b"\n"
    return list(kept.values())


def _replace_lines(path: Path, lines: list[bytes]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as f:
        f.writelines(lines)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
