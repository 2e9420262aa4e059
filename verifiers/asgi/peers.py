"""Who a connection is from, for every per-peer limit of this project's servers.

A limit keyed by the bare address is one budget per address the peer can pick, and some peers
pick many: any local process may bind all of 127.0.0.0/8 (and the host's own addresses), and an
IPv6 host holds a whole /64. So an IPv4 address counts as itself (IPv4-mapped too), an IPv6
address by its /64, and every address of this machine as one peer, split by the local user that
owns the connecting socket where Linux says (``sock_diag``): one local user flooding from a
hundred loopback addresses is one peer, and does not shut out another local user. Used by
vf-serve's budget, vf-env-server's gate and the hub's connection caps and rate limits.
"""

from __future__ import annotations

import ipaddress
import socket
import struct

THIS_MACHINE = "this machine"
NETLINK_SOCK_DIAG, SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST = 4, 20, 1
IP = ipaddress.IPv4Address | ipaddress.IPv6Address


def peer_of(host: str, port: int | None = None, local: tuple[str, int] | None = None) -> str:
    """The key of a connection from ``host`` (and ``port``) to ``local`` (our address and port:
    with both ports, a local peer is told apart by its user)."""
    try:
        address = unmapped(ipaddress.ip_address(host.split("%")[0]))
    except ValueError:  # not an IP address (a unix socket): one peer
        return host or "unknown"
    if address.is_loopback or (local and is_loopback(local[0])) or _is_ours(address):
        uid = _local_uid(address, port, local) if port and local else None
        return THIS_MACHINE if uid is None else f"{THIS_MACHINE} (uid {uid})"
    if address.version == 6:
        return str(ipaddress.IPv6Network((int(address) >> 64 << 64, 64)))
    return str(address)


def unmapped(address: IP) -> IP:
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    return mapped or address


def is_loopback(host: str) -> bool:
    """A connection to a loopback address can only come from this machine (Linux drops
    packets from elsewhere addressed to 127.0.0.0/8 or ``::1``)."""
    try:
        return unmapped(ipaddress.ip_address(host.split("%")[0])).is_loopback
    except ValueError:
        return False


def _is_ours(address: IP) -> bool:
    """Whether ``address`` is one of this host's: only a local address can be bound."""
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    try:  # (out of descriptors, the probe itself fails: then a stranger's address, as most are)
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.bind((str(address), 0))
    except OSError:
        return False
    return True


def _local_uid(address: IP, port: int, local: tuple[str, int]) -> int | None:
    """The uid owning the local socket at ``address:port`` connected to ``local``, or None where
    the kernel does not say (not Linux, or the connection is gone). One exact ``sock_diag``
    lookup (what ``ss`` uses; no privilege needed): microseconds, however many sockets exist."""
    try:
        ours = unmapped(ipaddress.ip_address(local[0].split("%")[0]))
    except ValueError:
        return None
    family = socket.AF_INET if address.version == 4 else socket.AF_INET6
    if ours.version != address.version or not hasattr(socket, "AF_NETLINK"):
        return None
    # inet_diag_req_v2: family, protocol, ext, pad, states; inet_diag_sockid: ports (network
    # order), addresses (16 bytes each), interface, cookie (none)
    request = (
        struct.pack("=BBBxI", family, socket.IPPROTO_TCP, 0, 0xFFFFFFFF)
        + struct.pack(
            "!HH16s16s",
            port,
            local[1],
            address.packed.ljust(16, b"\0"),
            ours.packed.ljust(16, b"\0"),
        )
        + struct.pack("=III", 0, 0xFFFFFFFF, 0xFFFFFFFF)
    )
    header = struct.pack("=IHHII", 16 + len(request), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, 1, 0)
    try:
        with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG) as diag:
            diag.settimeout(1.0)
            diag.send(header + request)
            reply = diag.recv(4096)
    except OSError:
        return None
    # nlmsghdr (16), then inet_diag_msg: 4 bytes, its sockid (48), expires, rqueue, wqueue, uid
    if len(reply) < 16 + 4 + 48 + 16:
        return None
    _, kind = struct.unpack_from("=IH", reply)
    if kind != SOCK_DIAG_BY_FAMILY:
        return None  # NLMSG_ERROR: no such socket
    return int(struct.unpack_from("=I", reply, 16 + 4 + 48 + 12)[0])
