"""A process group that exists only to ship weights from the trainer to the inference server.

The trainer is rank 0 and hosts the rendezvous store; each inference process (vf-serve, or one
vLLM worker per tensor-parallel rank) joins as rank 1..N. Every update is a sequence of
broadcasts from rank 0, in the order of a manifest both sides agreed on when the group was made,
so no names or shapes travel with the tensors. Built from torch's own process-group classes and
a ``TCPStore``, independent of any default group (an FSDP2 trainer already has one under
torchrun, and vLLM workers have theirs): NCCL between GPUs, gloo on CPU (and between processes
that share one GPU, which NCCL refuses).

Nothing of the group listens beyond the address it meets at (``127.0.0.1`` by default): torch's
``TCPStore`` binds every interface whatever host it is given, and gloo the address the machine's
hostname resolves to, so a network peer reached the unauthenticated store at the machine's own
address and could write the group's keys (an outside attack). The store now listens on a socket
bound to the meeting address, and gloo's connections on the local address that reaches it.
"""

from __future__ import annotations

import datetime
import socket
from typing import Any

import torch
import torch.distributed as dist

from verifiers.weights.manifest import TensorSpec

STORE_PREFIX = "verifiers-weights"
BACKENDS = ("gloo", "nccl")


class WeightGroup:
    def __init__(self, group: Any, store: Any, rank: int, world_size: int, device: torch.device):
        self.group, self.store = group, store
        self.rank, self.world_size, self.device = rank, world_size, device

    @classmethod
    def host_store(cls, host: str, world_size: int, timeout_s: float) -> Any:
        """Rank 0's rendezvous store, on a free port of ``host`` alone (read it from ``.port``);
        returns at once. The listening socket is handed to torch, which closes it with the store."""
        family = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM)[0][0]
        listener = socket.create_server((host, 0), family=family, backlog=128)
        port = listener.getsockname()[1]
        return dist.TCPStore(
            host,
            port,
            world_size,
            is_master=True,
            wait_for_workers=False,
            timeout=datetime.timedelta(seconds=timeout_s),
            master_listen_fd=listener.detach(),
        )

    @classmethod
    def join(
        cls,
        *,
        host: str,
        port: int,
        rank: int,
        world_size: int,
        backend: str,
        device: torch.device | str,
        timeout_s: float = 300,
        store: Any = None,
    ) -> WeightGroup:
        """Blocks until all ``world_size`` ranks have joined (each side calls this)."""
        if backend not in BACKENDS:
            raise ValueError(f"unknown weight transport backend {backend!r}; use gloo or nccl")
        timeout = datetime.timedelta(seconds=timeout_s)
        if store is None:
            store = dist.TCPStore(host, port, world_size, is_master=False, timeout=timeout)
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


def _address_toward(host: str) -> str:
    """This machine's address that reaches ``host`` (``host`` itself when it is local): gloo
    listens there for the other ranks, not on whatever the machine's hostname resolves to."""
    family, _, _, _, address = socket.getaddrinfo(host, 0, type=socket.SOCK_DGRAM)[0]
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        probe.connect((address[0], 9))  # a UDP connect sends nothing; it only picks the route
        return str(probe.getsockname()[0])
