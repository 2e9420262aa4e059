"""The trainer's weight group (verifiers.weights.group) meets where no one else reaches: its
rendezvous store and gloo's connections take no credential, so what reaches them could write
the group's keys or join it. An outside attack reached a gloo run's store at the machine's
network address (torch's ``TCPStore`` listened on every interface whatever host it was given),
and any local user could connect to it at its loopback port; the store is now a file in a
directory only the trainer's user may enter."""

from __future__ import annotations

import ipaddress
import os
import socket
import stat
import subprocess
import sys
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


NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]  # another local user

STRANGER = """
import os, sys
store = sys.argv[1]
for what, attempt in (
    ("list", lambda: os.listdir(os.path.dirname(store))),
    ("read", lambda: open(store, "rb").read()),
    ("write", lambda: open(store, "ab").write(b"x")),
):
    try:
        attempt()
        print(what, "done")
    except PermissionError:
        print(what, "refused")
"""


def test_no_one_else_reaches_the_weight_groups_store_and_the_server_still_joins_it():
    """The store opens no port (a TCPStore's took anyone's keys on loopback, and a network
    peer's at the machine's address); another local user can neither list, read nor write its
    file; gloo listens on loopback alone, refused at the machine's network address; a server
    joining as rank 1, as vf-serve does, gets the trainer's broadcast; the directory goes with
    the group."""
    before = _listening()
    store, store_file = WeightGroup.private_store(2, timeout_s=30)
    assert _listening() == before  # no port to connect to
    assert stat.S_IMODE(store_file.parent.stat().st_mode) == 0o700
    assert store_file.parent.stat().st_uid == os.geteuid()
    if os.geteuid() == 0:  # CI: a second local user tries it (setpriv needs root)
        stranger = subprocess.run(
            [*NOBODY, sys.executable, "-I", "-c", STRANGER, str(store_file)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert stranger.stdout.split("\n")[:3] == ["list refused", "read refused", "write refused"]

    received: dict[int, torch.Tensor] = {}
    during: list[set[tuple[str, int]]] = []
    joined = threading.Barrier(2)

    def rank(number: int) -> None:
        group = WeightGroup.join(
            host="127.0.0.1",
            store_file=str(store_file),
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
    address = _network_address()
    for _, port in during[0] if address is not None else ():
        with pytest.raises(OSError):
            socket.create_connection((address, port), timeout=5).close()
    WeightGroup.remove_store(store_file)
    assert not store_file.parent.exists()
