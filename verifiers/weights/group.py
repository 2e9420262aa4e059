"""A process group that exists only to ship weights from the trainer to the inference server.

The trainer is rank 0 and hosts the rendezvous store; each inference process (vf-serve, or one
vLLM worker per tensor-parallel rank) joins as rank 1..N. Every update is a sequence of
broadcasts from rank 0, in the order of a manifest both sides agreed on when the group was made,
so no names or shapes travel with the tensors. Built from torch's own process-group classes and
a store of its own, independent of any default group (an FSDP2 trainer already has one under
torchrun, and vLLM workers have theirs): NCCL between GPUs, gloo on CPU (and between processes
that share one GPU, which NCCL refuses).

Nothing of the group listens beyond the address it meets at (``127.0.0.1`` by default): gloo
binds the address the machine's hostname resolves to unless told, so it listens on the local
address that reaches the meeting address. And the group meets in no port at all: torch's
``TCPStore`` takes no credential (any local user could connect, list and write the group's keys,
NCCL's unique id and gloo's addresses among them), and listened on every interface whatever host
it was given (an outside attack wrote a key at the machine's network address). The store is a
``FileStore`` in a fresh directory only this user may enter (0700), named to the inference server
in the weight routes' requests, which carry the weights secret. NCCL's own bootstrap then checks
the random magic of that unique id, which travels only through the store; gloo's connections
(``127.0.0.1``) take none: see SECURITY.md.
"""

from __future__ import annotations

import datetime
import re
import shutil
import socket
import tempfile
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from verifiers.processes.leftovers import owned_dir, remove_abandoned
from verifiers.weights.manifest import TensorSpec

STORE_PREFIX = "verifiers-weights"
STORE_DIR = "vf-weight-group-"  # the store's directory, named for its maker (processes.leftovers)
BACKENDS = ("gloo", "nccl")


class WeightGroup:
    def __init__(self, group: Any, store: Any, rank: int, world_size: int, device: torch.device):
        self.group, self.store = group, store
        self.rank, self.world_size, self.device = rank, world_size, device

    @classmethod
    def private_store(cls, world_size: int, timeout_s: float) -> tuple[Any, Path]:
        """Rank 0's rendezvous store and its file, in a fresh 0700 directory of this user's
        (the caller removes it with ``remove_store``); returns at once."""
        parent = Path(tempfile.gettempdir())
        remove_abandoned(parent, re.escape(STORE_DIR))  # what a killed trainer left
        store_file = owned_dir(STORE_DIR, parent) / "store"
        return _file_store(str(store_file), world_size, timeout_s), store_file

    @staticmethod
    def remove_store(store_file: Path) -> None:
        shutil.rmtree(store_file.parent, ignore_errors=True)

    @classmethod
    def join(
        cls,
        *,
        host: str,
        store_file: str,
        rank: int,
        world_size: int,
        backend: str,
        device: torch.device | str,
        timeout_s: float = 300,
        store: Any = None,
    ) -> WeightGroup:
        """Blocks until all ``world_size`` ranks have joined (each side calls this): they meet in
        ``store_file`` (rank 0's ``private_store``) and gloo listens on the address toward
        ``host``."""
        if backend not in BACKENDS:
            raise ValueError(f"unknown weight transport backend {backend!r}; use gloo or nccl")
        timeout = datetime.timedelta(seconds=timeout_s)
        if store is None:
            store = _file_store(store_file, world_size, timeout_s)
        prefixed = dist.PrefixStore(STORE_PREFIX, store)
        device = torch.device(device)
        group: dist.ProcessGroupNCCL | dist.ProcessGroupGloo
        if backend == "nccl":
            if not (torch.cuda.is_available() and dist.is_nccl_available()):
                raise RuntimeError(
                    "the nccl weight transport needs CUDA and a torch built with NCCL"
                )
            if device.type != "cuda":
                raise ValueError(f"the nccl weight transport needs a CUDA device, not {device}")
            options = dist.ProcessGroupNCCL.Options()
            options._timeout = timeout
            group = dist.ProcessGroupNCCL(prefixed, rank, world_size, options)
        else:
            # torch's stubs lack the options class its constructor takes with its devices
            gloo = dist.ProcessGroupGloo._Options()  # type: ignore[attr-defined]
            gloo._timeout = timeout
            gloo._devices = [dist.ProcessGroupGloo.create_device(hostname=_address_toward(host))]
            group = dist.ProcessGroupGloo(prefixed, rank, world_size, gloo)
        return cls(group, store, rank, world_size, device)

    def broadcast(self, tensor: torch.Tensor) -> torch.Tensor:
        """From rank 0 into ``tensor`` on every other rank (in place)."""
        options = dist.BroadcastOptions()
        options.rootRank = 0
        options.rootTensor = 0
        self.group.broadcast([tensor], options).wait()
        return tensor

    def send(self, state: dict[str, torch.Tensor], specs: list[TensorSpec]) -> None:
        """Rank 0: every tensor of the manifest, in order."""
        for spec in specs:
            self.broadcast(state[spec.name].detach().to(self.device).contiguous())
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def receive(self, specs: list[TensorSpec]) -> dict[str, torch.Tensor]:
        """Rank >= 1: fresh buffers for the whole manifest (the caller swaps them in at once,
        so no request ever decodes with half-updated weights)."""
        received = {spec.name: self.broadcast(spec.empty(self.device)) for spec in specs}
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return received

    def close(self) -> None:
        """Shut the group down explicitly: gloo's threads abort the process (SIGABRT) if they
        are still running when the interpreter tears down."""
        shutdown = getattr(self.group, "shutdown", None)
        if shutdown is not None:
            try:
                shutdown()
            except RuntimeError:
                pass
        self.group = None


def _file_store(store_file: str, world_size: int, timeout_s: float) -> Any:
    store = dist.FileStore(store_file, world_size)
    store.set_timeout(datetime.timedelta(seconds=timeout_s))
    return store


def _address_toward(host: str) -> str:
    """This machine's address that reaches ``host`` (``host`` itself when it is local): gloo
    listens there for the other ranks, not on whatever the machine's hostname resolves to."""
    family, _, _, _, address = socket.getaddrinfo(host, 0, type=socket.SOCK_DGRAM)[0]
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        probe.connect((address[0], 9))  # a UDP connect sends nothing; it only picks the route
        return str(probe.getsockname()[0])
