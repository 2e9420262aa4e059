"""A server's descriptor budget: the soft limit raised to the hard one at start.

The usual soft limit (1024) let 1,100 idle TCP connections from a stranger exhaust
``vf-env-server``'s descriptors before any handshake; the hard limit (often 512k or more) is
what the administrator allows, and a server should use it. A connection flood that still reaches
it is survivable: the pool no longer mistakes an unreadable heartbeat for a hung worker.
"""

from __future__ import annotations

import resource


def raise_open_files_limit() -> tuple[int, int]:
    """Set the soft ``RLIMIT_NOFILE`` to the hard limit; returns (soft, hard) after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return soft, hard


ACCEPT_BURST = 128
"""Connections asyncio may accept in one go (its ``backlog``) before a handler closes any."""


def descriptors_to_spare(per_item: int) -> int:
    """How many things taking ``per_item`` descriptors each this process can hold open while
    keeping an eighth of its soft limit (at least 64), and one accept burst, for everything
    else: a server caps its connections by it rather than meet EMFILE (libzmq's IPC listener
    aborts the process on it)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 20
    return max(1, (soft - max(64, soft // 8) - ACCEPT_BURST) // per_item)
