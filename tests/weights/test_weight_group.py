"""The trainer's weight group (verifiers.weights.group) listens only where it meets: its
rendezvous store and gloo's connections take no credential, so what reaches them could write
the group's keys or join it. An outside attack reached a gloo run's store at the machine's
network address (torch's ``TCPStore`` listened on every interface whatever host it was given)."""

from __future__ import annotations

import ipaddress
import socket
import threading

import psutil
import pytest
import torch

from verifiers.weights.group import WeightGroup


def _network_address() -> str | None:
    """An IPv4 address of this machine other than loopback: where a network peer connects."""
    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            if (
                address.family == socket.AF_INET
                and not ipaddress.ip_address(address.address).is_loopback
            ):
                return str(address.address)
    return None


def _listening() -> set[tuple[str, int]]:
    return {
        (c.laddr.ip, c.laddr.port)
        for c in psutil.Process().net_connections(kind="tcp")
        if c.status == psutil.CONN_LISTEN
    }


def test_a_network_peer_cannot_reach_the_weight_group_and_the_server_still_joins_it():
    """A peer at the machine's own address finds nothing listening, neither the store nor gloo;
    a server joining over loopback, as vf-serve does, gets the trainer's broadcast."""
    address = _network_address()
    if address is None:
        pytest.skip("this machine has no network address besides loopback")
    before = _listening()
    store = WeightGroup.host_store("127.0.0.1", 2, timeout_s=30)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((address, store.port), timeout=5).close()

    received: dict[int, torch.Tensor] = {}
    during: list[set[tuple[str, int]]] = []
    joined = threading.Barrier(2)

    def rank(number: int) -> None:
        group = WeightGroup.join(
            host="127.0.0.1",
            port=store.port,
            rank=number,
            world_size=2,
            backend="gloo",
            device="cpu",
            timeout_s=30,
            store=store if number == 0 else None,
        )
        joined.wait()
        if number == 0:
            during.append(_listening() - before)
        joined.wait()
        tensor = torch.arange(6.0) if number == 0 else torch.zeros(6)
        received[number] = group.broadcast(tensor)
        group.close()

    threads = [threading.Thread(target=rank, args=(n,)) for n in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert torch.equal(received[1], torch.arange(6.0))
    assert during[0] and all(ip == "127.0.0.1" for ip, _ in during[0]), during[0]
    for _, port in during[0]:
        with pytest.raises(OSError):
            socket.create_connection((address, port), timeout=5).close()
