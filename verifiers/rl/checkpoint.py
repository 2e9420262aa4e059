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

from verifiers.processes.leftovers import STAGING, remove_abandoned, staging_dir


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
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    if not (directory / "trainer.pt").exists():
        raise FileNotFoundError(f"{directory} is not a complete checkpoint (no trainer.pt)")
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
    meta = torch.load(directory / "trainer.pt", weights_only=False)
    trainer.scheduler.load_state_dict(meta["scheduler"])
    trainer.version = meta["version"]
    rng = directory / f"rng_rank{trainer.rank}.pt"
    if rng.exists():  # a checkpoint from fewer ranks: new ranks keep their seeds
        saved = torch.load(rng, weights_only=False)
        torch.set_rng_state(saved["torch"])
        random.setstate(saved["python"])
    return json.loads((directory / "state.json").read_text())


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
