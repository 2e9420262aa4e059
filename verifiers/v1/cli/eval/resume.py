"""Resuming a v1 eval (``EvalConfig.resume``, upstream's ``--resume DIR``): the run's
``traces.jsonl`` in DIR keeps its good episodes, and only the rollouts still owed run again,
appended to the same file, so an interrupted run finishes with each selected task's rollouts
exactly once.

A saved episode belongs to a selected task by content: its task's wire data, hashed
(``task_key``), so identical tasks are interchangeable and a task whose data changed since
runs again. An episode that failed (not ``ok``), a torn last line (the run died mid-write) or
a line of some other shape is owed again, never a crash. A classic env run through
``[legacy]`` is keyed by row (its task data's ``idx``) and redone group by group
(``whole_task``): its rubric may score a group together.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable, Hashable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from verifiers.errors import UsageError
from verifiers.v1.configs.cli.eval import EvalConfig
from verifiers.v1.episode import TRACES_FILE, Episode, WireEpisode

K = TypeVar("K", bound=Hashable)


def task_key(data: Mapping[str, Any]) -> str:
    """The content identity of a task's wire data, whatever its field order."""
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def run_dir(config: EvalConfig) -> Path | None:
    """Where the run's episodes go: the resumed run's directory, else ``output_dir``."""
    if config.resume is None:
        return config.output_dir
    if config.output_dir is not None and config.output_dir.resolve() != config.resume.resolve():
        raise UsageError(
            f"resume {config.resume} and output_dir {config.output_dir} differ: a resumed run "
            "appends to the directory it resumes"
        )
    if not (config.resume / TRACES_FILE).is_file():
        raise UsageError(f"resume: no {TRACES_FILE} in {config.resume} (not a v1 eval's output)")
    return config.resume


def owed_counts(
    config: EvalConfig,
    keys: list[K],
    *,
    key_of: Callable[[Mapping[str, Any]], K] = task_key,  # type: ignore[assignment]
    whole_task: bool = False,
) -> tuple[list[Episode[Any, Any, Any]], list[int]]:
    """The kept episodes of the resumed run and how many rollouts each selected task (one key
    each, in order) still needs: all of them for a fresh run. ``traces.jsonl`` is rewritten
    (atomically) to the kept lines, so what follows appends to exactly what is kept."""
    if config.resume is None:
        return [], [config.num_rollouts] * len(keys)
    path = config.resume / TRACES_FILE
    targets = {key: n * config.num_rollouts for key, n in Counter(keys).items()}
    good: dict[K, list[tuple[bytes, Episode[Any, Any, Any]]]] = {}
    for line in path.read_bytes().splitlines(keepends=True):
        kept = _kept(line, key_of)
        if kept is None:
            continue
        key, episode = kept
        rows = good.setdefault(key, [])
        if len(rows) < targets.get(key, 0):
            rows.append((line if line.endswith(b"\n") else line + b"\n", episode))
    lines: list[bytes] = []
    episodes: list[Episode[Any, Any, Any]] = []
    owed: dict[K, int] = {}
    for key, target in targets.items():
        rows = good.get(key, [])
        if whole_task and len(rows) < target:
            rows = []  # a group scored together runs again whole
        lines += [line for line, _ in rows]
        episodes += [episode for _, episode in rows]
        owed[key] = target - len(rows)
    staged = path.with_suffix(".jsonl.tmp")
    staged.write_bytes(b"".join(lines))
    staged.replace(path)
    counts = []
    for key in keys:  # a key selected twice: its owed rollouts spread over its selections
        take = min(config.num_rollouts, owed[key])
        owed[key] -= take
        counts.append(take)
    return episodes, counts


def _kept(line: bytes, key_of: Callable[[Mapping[str, Any]], K]) -> tuple[K, Any] | None:
    """A saved line's task key and episode when it is a good episode, else None."""
    if not line.strip():
        return None
    try:
        episode = WireEpisode.model_validate_json(line)
        task = episode.task or (episode.traces[0].task if episode.traces else None)
        if task is None or not episode.ok:
            return None
        return key_of(task.data.model_dump(mode="json", exclude_none=True)), episode
    except ValueError:  # a torn or foreign line (pydantic's ValidationError is a ValueError)
        return None


def appender(directory: Path | None) -> Callable[[Episode[Any, Any, Any]], None]:
    """Append each finished episode to ``traces.jsonl`` under ``directory`` as it finishes
    (so an interrupted run keeps what it finished); nothing without a directory."""
    if directory is None:
        return lambda episode: None
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / TRACES_FILE

    def append(episode: Episode[Any, Any, Any]) -> None:
        with path.open("a", encoding="utf-8") as f:
            f.write(episode.model_dump_json() + "\n")

    return append
