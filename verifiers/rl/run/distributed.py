"""Data-parallel training with torch FSDP2 under ``torchrun`` (NCCL on GPUs, gloo on CPU).

Rank 0 runs the orchestrator and broadcasts each step's samples; every rank trains on its
round-robin share, with the loss divided by the *global* loss-token count (an all-reduce), so
the summed gradient equals the single-process one. FSDP2 averages gradients over ranks when it
reduce-scatters them, so each rank's loss is scaled by the world size to turn that mean back
into the sum. Exporting weights gathers the full state dict (a collective every rank joins).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import torch
import torch.distributed as dist

from verifiers.errors import UsageError


@dataclass
class DistContext:
    rank: int
    world_size: int
    mesh: Any

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def all_reduce_sum(self, value: float) -> float:
        tensor = torch.tensor([float(value)], dtype=torch.float64, device=self.device)
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return float(tensor.item())

    def broadcast(self, obj: Any) -> Any:
        holder = [obj if self.is_main else None]
        dist.broadcast_object_list(holder, src=0)
        return holder[0]

    @property
    def device(self) -> torch.device:
        return (
            torch.device("cuda", torch.cuda.current_device())
            if dist.get_backend() == "nccl"
            else torch.device("cpu")
        )


def init_from_env() -> DistContext | None:
    """A context when launched by torchrun with more than one process; None otherwise."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return None
    from torch.distributed.device_mesh import init_device_mesh

    use_cuda = torch.cuda.is_available()
    if use_cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    if not dist.is_initialized():
        dist.init_process_group("nccl" if use_cuda else "gloo", **private_rendezvous())
    mesh = init_device_mesh("cuda" if use_cuda else "cpu", (dist.get_world_size(),))
    return DistContext(dist.get_rank(), dist.get_world_size(), mesh)


RANKS_DIR = "vf-ranks-"
"""Where the ranks of one machine meet: ``$TMPDIR/vf-ranks-UID-RUNID``, 0700 (``private_rendezvous``)."""
_MET_IN: Path | None = None  # that directory, once this process met there (rank 0 removes it)


def private_rendezvous() -> dict[str, Any]:
    """How this run's ranks meet when all are on this machine under a run id of their own
    (``torchrun --standalone`` makes a random one): in a ``FileStore`` in a directory only this
    user may enter, and gloo on loopback. torchrun's own ``TCPStore`` takes no credential and
    listens on every interface: through it any local user or network peer could write the
    group's keys (a rank's address, NCCL's unique id). Ranks on several machines, or a run id
    torchrun did not make unique, still meet there (SECURITY.md); so does a group already set."""
    run_id = os.environ.get("TORCHELASTIC_RUN_ID", "")
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if run_id in ("", "none") or int(os.environ.get("LOCAL_WORLD_SIZE", "0")) != world_size:
        return {}
    from verifiers.processes.own_dir import require_own_dir

    global _MET_IN
    directory = _MET_IN = Path(tempfile.gettempdir()) / f"{RANKS_DIR}{os.geteuid()}-{run_id}"
    require_own_dir(directory, "rendezvous directory", mode=0o700)
    if directory.stat().st_mode & 0o077:  # it was there already, readable by others
        raise UsageError(f"{directory} may be read by others; remove it and start again")
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # this machine's ranks only
    return {
        "store": dist.FileStore(str(directory / "store"), world_size),
        "rank": int(os.environ["RANK"]),
        "world_size": world_size,
    }


def shard_model(model: Any, ctx: DistContext) -> Any:
    """FSDP2: each decoder layer is its own shard unit, then the root (embeddings, head)."""
    from torch.distributed.fsdp import fully_shard

    layers = getattr(getattr(model, "model", model), "layers", [])
    for layer in layers:
        fully_shard(layer, mesh=ctx.mesh)
    fully_shard(model, mesh=ctx.mesh)
    return model


def full_state_dict(model: Any) -> dict[str, torch.Tensor]:
    """The unsharded weights on CPU (every rank must call; rank 0 gets the tensors)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    state = get_model_state_dict(
        model, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
    )
    # torch types a state dict's values broadly; a full model state dict holds tensors
    return cast(dict[str, torch.Tensor], state)


def shutdown(exit_code: int | None = None) -> None:
    """Tear the process group down; with ``exit_code``, also leave the process at once.

    gloo's C++ threads can still abort the interpreter's own teardown ("terminate called
    without an active exception", SIGABRT) after the work succeeded and the group was
    destroyed, so a torchrun worker that is done flushes its output and skips that teardown.
    """
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
        if _MET_IN is not None and os.environ.get("RANK") == "0":
            shutil.rmtree(_MET_IN, ignore_errors=True)
    if exit_code is not None:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(exit_code)


def shard_samples(samples: list[Any], ctx: DistContext) -> list[Any]:
    return samples[ctx.rank :: ctx.world_size]
