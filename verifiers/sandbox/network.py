"""``network=True`` without the host: the sandbox gets a network namespace of its own, wired
to the outside by slirp4netns (user-mode NAT), with the host's loopback out of reach.

Sharing the host's network namespace would let sandboxed code talk to every service this
machine keeps on 127.0.0.1 (a hub, a model server, PostgreSQL, an SSH agent's forwards);
slirp4netns with ``--disable-host-loopback`` refuses its gateway address, and 127.0.0.1
inside is the sandbox's own. The sandbox reaches other machines (and this one's non-loopback
addresses) as any other host on the network would.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from verifiers.sandbox.base import SandboxUnavailableError

RESOLV_CONF = b"nameserver 10.0.2.3\n"  # slirp4netns's DNS forwarder


def slirp4netns() -> str:
    found = shutil.which("slirp4netns")
    if found is None:
        raise SandboxUnavailableError(
            "network=True needs slirp4netns, which gives the sandbox a network of its own "
            "without the host's loopback services (Debian: apt-get install slirp4netns)"
        )
    return found


def connect(pid: int) -> subprocess.Popen:
    """Wire the network namespace of ``pid`` (a host pid) to the outside; returns once its
    interface is up. The process ends with the namespace or when killed."""
    args = [slirp4netns(), "--configure", "--mtu=65520", "--disable-host-loopback"]
    args += ["--enable-sandbox", "--enable-seccomp"]  # libslirp parses what the sandbox sends
    if os.getuid() != 0:  # its namespace belongs to the sandbox's user namespace
        args += ["--userns-path", f"/proc/{pid}/ns/user"]
    read_end, write_end = os.pipe()
    process = subprocess.Popen(
        [*args, "--ready-fd", str(write_end), str(pid), "tap0"],
        pass_fds=(write_end,),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    os.close(write_end)
    try:
        ready = os.read(read_end, 1)
    finally:
        os.close(read_end)
    if ready != b"1":
        process.kill()
        process.wait()
        raise SandboxUnavailableError("slirp4netns could not set up the sandbox's network")
    return process
