"""Where a multi-rank trainer's processes meet (``verifiers.rl.run.distributed``): torchrun's
rendezvous store takes no credential and listens on every interface, so the ranks of one
machine meet in a store file only their user reaches instead."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

pytest.importorskip("torch")

from verifiers.errors import UsageError
from verifiers.rl.run import distributed

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]  # another local user


@pytest.fixture
def ranks_of_this_machine(monkeypatch) -> str:
    """The environment torchrun --standalone gives rank 0 of 2 on one machine; its run id."""
    run_id = uuid.uuid4().hex
    for name, value in {
        "TORCHELASTIC_RUN_ID": run_id,
        "WORLD_SIZE": "2",
        "LOCAL_WORLD_SIZE": "2",
        "RANK": "0",
        "GLOO_SOCKET_IFNAME": "lo",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(distributed, "_MET_IN", None)
    return run_id


@pytest.mark.skipif(os.geteuid() != 0, reason="runs a second local user (uid 65534): needs root")
def test_a_rendezvous_dir_another_user_made_first_is_refused_and_a_run_meets_in_its_own(
    ranks_of_this_machine,
):
    """Another local user who made the ranks' directory first would hold their store (and
    could write a rank's address into it): refused, naming its owner. A run's own is 0700, the
    store in it works and the other user can neither list nor read it."""
    planted = Path(distributed.tempfile.gettempdir()) / (
        f"{distributed.RANKS_DIR}{os.geteuid()}-{ranks_of_this_machine}"
    )
    subprocess.run([*NOBODY, "mkdir", "-m", "777", str(planted)], check=True)
    try:
        with pytest.raises(UsageError, match="belongs to uid 65534"):
            distributed.private_rendezvous()
    finally:
        planted.rmdir()
    met = distributed.private_rendezvous()
    try:
        assert met["rank"] == 0 and met["world_size"] == 2
        store = met["store"]
        store.set("k", "v")
        assert store.get("k") == b"v"
        assert stat.S_IMODE(planted.stat().st_mode) == 0o700 and planted.stat().st_uid == 0
        stranger = subprocess.run(
            [
                *NOBODY,
                sys.executable,
                "-I",
                "-c",
                "import os, sys; os.listdir(sys.argv[1])",
                planted,
            ],
            capture_output=True,
            text=True,
        )
        assert stranger.returncode != 0 and "PermissionError" in stranger.stderr
    finally:
        distributed.shutil.rmtree(planted, ignore_errors=True)


def test_ranks_on_several_machines_or_without_a_run_id_of_their_own_meet_as_torchrun_says(
    ranks_of_this_machine, monkeypatch
):
    """A store file is reached only on this machine, and torchrun's default run id ("none") is
    every such run's: those keep torchrun's own rendezvous (SECURITY.md says what it allows)."""
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")  # the other rank is elsewhere
    assert distributed.private_rendezvous() == {}
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "none")
    assert distributed.private_rendezvous() == {}
