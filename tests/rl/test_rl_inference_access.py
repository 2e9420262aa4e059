"""Who may use the inference server vf-rl and vf-sft start for their rollouts: its one client,
the trainer, holding this run's key; not another local user, who reads every process's argv and
can connect to every loopback port."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
psutil = pytest.importorskip("psutil")

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]  # another local user

STRANGER = r"""
import json, os, sys, urllib.error, urllib.request

base, pids = sys.argv[1], [int(p) for p in sys.argv[2:]]
seen = {"argv": [], "environ": {}, "status": {}}
for entry in os.listdir("/proc"):  # every command line on the machine, as `ps` shows them
    if entry.isdigit():
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                seen["argv"].append(f.read().decode(errors="replace"))
        except OSError:
            pass
for pid in pids:  # the server's own environment, where its key is
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            seen["environ"][pid] = f.read().decode(errors="replace")
    except OSError as exc:
        seen["environ"][pid] = type(exc).__name__
body = json.dumps({"model": "policy", "messages": [{"role": "user", "content": "hi"}],
                   "max_tokens": 4}).encode()
for method, path, data in (
    ("GET", "/models", None),
    ("POST", "/chat/completions", body),
    ("POST", "/completions", json.dumps({"model": "policy", "prompt": "a"}).encode()),
    ("POST", "/weights/load", json.dumps({"path": "/tmp", "policy_version": 9}).encode()),
    ("GET", "/weights", None),
):
    request = urllib.request.Request(base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json",
                                              "Authorization": "Bearer EMPTY"})
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            seen["status"][path] = reply.status
    except urllib.error.HTTPError as exc:
        seen["status"][path] = exc.code
print(json.dumps(seen))
"""


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="runs a second local user (uid 65534): needs root")
def test_another_local_user_cannot_use_the_trainers_inference_server_and_the_trainer_can(
    policy_dir, tmp_path
):
    """An outside attack queried a vf-rl run's policy at its loopback port with no credential
    (and could flood it): the server now has a key made for the run, handed over in its
    environment (which only its user reads), never on a command line. Another local user gets a
    401 on every route but /health and finds the key in no argv; the trainer, holding it, is
    answered, and its weight transport gets past the key to the weights secret."""
    from verifiers.clients import OpenAICompatibleClient
    from verifiers.rl.configs.rl import InferenceConfig
    from verifiers.rl.training.inference import start_inference
    from verifiers.weights.access import new_secret
    from verifiers.weights.transport import FilesystemTransport

    log = tmp_path / "logs" / "inference.log"
    with start_inference(
        InferenceConfig(startup_timeout_s=300),
        policy_dir,
        log,
        weights_dir=tmp_path / "weights",
        weights_secret=new_secret(),
    ) as server:
        key = server.api_key
        assert key and len(key) >= 32
        tree = psutil.Process(server.process.pid)
        pids = [tree.pid, *(p.pid for p in tree.children(recursive=True))]
        stranger = subprocess.run(
            [*NOBODY, sys.executable, "-I", "-c", STRANGER, server.base_url, *map(str, pids)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert stranger.returncode == 0, stranger.stderr
        seen = json.loads(stranger.stdout)
        assert any("verifiers.cli.serve" in argv for argv in seen["argv"])  # it saw the server
        assert not [argv for argv in seen["argv"] if key in argv]
        assert all(v == "PermissionError" for v in seen["environ"].values()), seen["environ"]
        assert seen["status"] == {
            "/models": 401,
            "/chat/completions": 401,
            "/completions": 401,
            "/weights/load": 401,
            "/weights": 401,
        }

        async def trainer_asks() -> str:
            client = OpenAICompatibleClient(server.base_url, key)
            try:
                reply = await client.chat(
                    model="policy",
                    messages=[{"role": "user", "content": "hi"}],
                    sampling_args={"max_tokens": 4, "temperature": 0},
                )
            finally:
                await client.aclose()
            return reply.choices[0].finish_reason or ""

        assert asyncio.run(trainer_asks()) in ("stop", "length")
        # the trainer's weight transport carries the key beside the weights secret
        transport = FilesystemTransport(
            server.base_url, tmp_path / "weights", secret=server.weights_secret, api_key=key
        )
        assert transport.post("/weights", None, timeout=30)["policy_version"] == 0
