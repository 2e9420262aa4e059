"""Checkpoints: model, optimizer, scheduler, RNG and step, resumable on any number of ranks.

Model and optimizer go through ``torch.distributed.checkpoint``: each FSDP2 rank writes its own
shards in parallel, and a checkpoint loads into any number of ranks (or one process) because DCP
reshards on load. A checkpoint is written to a staging directory renamed into place when
complete, so a crash mid-save leaves the previous one.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from verifiers.errors import VFError
from verifiers.processes.leftovers import STAGING, remove_abandoned, staging_dir


class UnsafeCheckpointError(VFError):
    """A checkpoint whose files would run code when read (pickles), refused before reading."""


class BrokenCheckpointError(UnsafeCheckpointError):
    """A checkpoint that is data but not what a run saves (a ``state.json`` without a step
    number, shards that do not decode, tensors of other shapes, RNG state of other types):
    refused with the file and the reason, as an unsafe one is, never a traceback."""


# What torch's distributed checkpoint pickles into ``dcp/.metadata``, and nothing else: a
# ``.metadata`` (or ``trainer.pt``) copied from a colleague, a shared filesystem or a download
# could otherwise run code as the user on --resume, and the resume would then succeed silently.
_DCP_CLASSES = {
    ("pathlib", "PosixPath"),
    ("pathlib", "PurePosixPath"),
    ("collections", "OrderedDict"),
    ("builtins", "set"),
    ("builtins", "frozenset"),
    ("torch", "Size"),
    ("torch.serialization", "_get_layout"),
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
}
_DCP_MODULES = ("torch.distributed.checkpoint.metadata",)


def save_checkpoint(trainer: Any, directory: Path, step: int, extra: dict[str, Any]) -> Path:
    """Model, optimizer, scheduler, RNG and step, written to a staging directory that is
    renamed into place when complete (a crash mid-save leaves the previous checkpoint).

    Model and optimizer go through ``torch.distributed.checkpoint``: each FSDP2 rank writes
    its own shards in parallel, and a checkpoint loads into any number of ranks (or one
    process) because DCP reshards on load.
    """
    directory.parent.mkdir(parents=True, exist_ok=True)
    # a run killed mid-save (preempted, out of memory) left a staging directory of its size
    remove_abandoned(directory.parent, STAGING)
    staging = staging_dir(directory.name, directory.parent)
    if trainer.dist is not None:
        trainer.dist.broadcast({"op": "checkpoint", "staging": str(staging)})
    write_checkpoint(trainer, staging)
    torch.save(
        {"scheduler": trainer.scheduler.state_dict(), "version": trainer.version, "step": step},
        staging / "trainer.pt",
    )
    (staging / "state.json").write_text(
        json.dumps({"step": step, "version": trainer.version, **extra})
    )
    if directory.exists():
        shutil.rmtree(directory)
    os.replace(staging, directory)
    return directory


def load_checkpoint(trainer: Any, directory: Path) -> dict[str, Any]:
    """Every rank calls this (a collective under FSDP2), before rank 0 starts training."""
    if not (directory / "trainer.pt").exists():
        raise FileNotFoundError(f"{directory} is not a complete checkpoint (no trainer.pt)")
    check_checkpoint(directory)
    from torch.distributed.checkpoint.api import CheckpointException

    state = _state(directory)
    try:
        _load(trainer, directory)
    except UnsafeCheckpointError:
        raise
    except (Exception, CheckpointException) as exc:  # torch's: a shard cut short, a shape, a type
        # (DCP's CheckpointException is a BaseException: it gathers the ranks' failures)
        told = [line.strip() for line in str(exc).splitlines() if line.strip()]  # DCP's: the
        reason = told[-1][:300] if told else ""  # ranks' tracebacks, each ending in its error
        raise BrokenCheckpointError(
            f"{directory} is not a checkpoint this run can resume from "
            f"({type(exc).__name__}: {reason}); resume from another, or start again"
        ) from None
    return state


def _state(directory: Path) -> dict[str, Any]:
    """``state.json``: a JSON object whose ``step`` is a step number (what a run saves)."""
    path = directory / "state.json"
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise BrokenCheckpointError(
            f"{path} cannot be read as a checkpoint's state: {exc}"
        ) from None
    step = state.get("step") if isinstance(state, dict) else None
    if type(step) is not int or not 0 <= step < 2**31:
        raise BrokenCheckpointError(f"{path} names no step number (step: {str(step)[:40]})")
    return state


def _load(trainer: Any, directory: Path) -> None:
    """The model, optimizer, schedule and RNG state of a checked checkpoint, into ``trainer``."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    model_state, optim_state = get_state_dict(trainer.model, trainer.optimizer)
    state: dict[str, Any] = {"model": model_state, "optim": optim_state}
    with _single_process_is_intended():
        dcp.load(state, checkpoint_id=str(directory / "dcp"))
    set_state_dict(
        trainer.model,
        trainer.optimizer,
        model_state_dict=state["model"],
        optim_state_dict=state["optim"],
    )
    meta = _data_only(directory / "trainer.pt")
    trainer.scheduler.load_state_dict(meta["scheduler"])
    trainer.version = meta["version"]
    rng = directory / f"rng_rank{trainer.rank}.pt"
    if rng.exists():  # a checkpoint from fewer ranks: new ranks keep their seeds
        saved = _data_only(rng)
        torch.set_rng_state(saved["torch"])
        random.setstate(saved["python"])


def check_checkpoint(directory: Path) -> None:
    """Refuse a checkpoint that is not data: another user's or one others may change (it could
    be swapped after this check), or a ``dcp/.metadata`` that names anything but DCP's own
    metadata types (a pickle that would run code)."""
    import io
    import pickle
    import stat

    for path in (directory, directory / "dcp"):
        info = path.lstat()
        if info.st_uid != os.geteuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise UnsafeCheckpointError(
                f"{path} belongs to another user or others may write it: a checkpoint runs as "
                "you when resumed, so only your own is read (copy it into a directory of yours)"
            )
    metadata = directory / "dcp" / ".metadata"

    class MetadataOnly(pickle.Unpickler):
        def find_class(self, module: str, name: str) -> Any:
            allowed = (module, name) in _DCP_CLASSES or module in _DCP_MODULES
            if module == "torch" and isinstance(getattr(torch, name, None), torch.dtype):
                allowed = True
            if not allowed:
                raise UnsafeCheckpointError(
                    f"{metadata} names {module}.{name}, which a checkpoint's metadata never "
                    "holds: reading it would run code; refused"
                )
            return super().find_class(module, name)

    try:
        MetadataOnly(io.BytesIO(metadata.read_bytes())).load()
    except UnsafeCheckpointError:
        raise
    except Exception as exc:
        raise UnsafeCheckpointError(f"{metadata} is not a checkpoint's metadata: {exc}") from None


def _data_only(path: Path) -> Any:
    """A ``torch.save`` file read as data (tensors, numbers, containers), never as code."""
    try:
        return torch.load(path, weights_only=True)
    except Exception as exc:
        raise UnsafeCheckpointError(
            f"{path} holds more than data (tensors, numbers, containers): reading it would run "
            f"code; refused ({type(exc).__name__})"
        ) from None


def write_checkpoint(trainer: Any, staging: Path) -> None:
    """Every rank's share of a checkpoint: its model/optimizer shards and its RNG state."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    # RNG first: rank 0 renames the staging directory once its dcp.save returns, and dcp.save
    # returns only after every rank has written its shards
    torch.save(
        {"torch": torch.get_rng_state(), "python": random.getstate()},
        staging / f"rng_rank{trainer.rank}.pt",
    )
    model_state, optim_state = get_state_dict(trainer.model, trainer.optimizer)
    with _single_process_is_intended():
        dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=str(staging / "dcp"))


@contextlib.contextmanager
def _single_process_is_intended() -> Iterator[None]:
    """DCP warns when no process group exists; one process is a supported layout here."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        yield
