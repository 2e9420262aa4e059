"""Weights from the trainer to the inference server: exactly the trained weights (full or LoRA)
served, weights that do not fit refused, a dead or stuck server reported, never waited for."""

from __future__ import annotations

import pytest
from support.trainer_runs import run_loop

SECRET = "test-weights-secret"  # what the trainer would make at launch (weight_access)
torch = pytest.importorskip("torch")


def _probe_logprobs(into: dict):
    """What the server's current weights say about a fixed prompt: exact float32 logprobs."""

    def probe(server) -> None:
        import httpx

        body = {
            "model": "policy",
            "prompt": "AAB",
            "max_tokens": 4,
            "temperature": 0,
            "logprobs": 1,
            "ignore_eos": True,
        }
        reply = httpx.post(f"{server.base_url}/completions", json=body, timeout=60).json()
        into["logprobs"] = reply["choices"][0]["logprobs"]["token_logprobs"]
        into["weights"] = httpx.get(f"{server.base_url}/weights").json()

    return probe


@pytest.mark.slow
def test_broadcast_transport_serves_exactly_the_trained_weights(policy_dir, tmp_path):
    """Weights over a gloo process group (no disk) reach the server bit for bit: the same run
    with the filesystem transport gives the same rollouts, the same trained weights and the same
    logprobs from the server afterwards."""
    by_disk, by_broadcast = {}, {}
    disk_history, disk = run_loop(
        policy_dir, tmp_path / "disk", steps=3, lag=0, probe=_probe_logprobs(by_disk)
    )
    group_history, group = run_loop(
        policy_dir,
        tmp_path / "group",
        steps=3,
        lag=0,
        transport="gloo",
        probe=_probe_logprobs(by_broadcast),
    )
    assert [h["reward"] for h in group_history] == [h["reward"] for h in disk_history]
    assert [h["served_version"] for h in group_history] == [1, 2, 3]
    for a, b in zip(disk.model.parameters(), group.model.parameters(), strict=True):
        assert torch.equal(a, b)
    assert by_broadcast["logprobs"] == by_disk["logprobs"]
    assert by_broadcast["weights"] == {
        "policy_version": 3,
        "path": "broadcast",
        "inference_ranks": 1,
    }
    assert not (tmp_path / "group" / "weights").exists()  # nothing went through the disk


def test_lora_trains_only_the_adapters_and_the_server_serves_exactly_them(policy_dir, tmp_path):
    """LoRA through peft: the base weights do not move, only adapter tensors reach the server
    (peft's layout), and vf-serve merges them into its base so exactly: the next step's rollouts
    have trainer/inference ratio 1."""
    from transformers import AutoModelForCausalLM

    from verifiers.weights.files import read_safetensors

    start = AutoModelForCausalLM.from_pretrained(policy_dir).state_dict()
    lora = {"lora": {"rank": 4, "alpha": 8}, "kl_beta": 0.1}
    history, trainer = run_loop(
        policy_dir, tmp_path, steps=3, lag=0, lr=2e-2, trainer_settings=lora
    )
    changed, fixed = [], []
    for name, value in trainer.model.named_parameters():
        plain = name.removeprefix("base_model.model.").replace(".base_layer", "")
        if "lora_" in name:
            changed.append(name)
        else:
            assert torch.equal(value, start[plain]), f"{name} moved"
            fixed.append(name)
    assert (
        changed
        and fixed
        and all(p.requires_grad == ("lora_" in n) for n, p in trainer.model.named_parameters())
    )
    pushed = read_safetensors(tmp_path / "weights" / "adapter")
    assert pushed and all(".lora_" in k for k in pushed)
    assert not list((tmp_path / "weights").glob("*.safetensors"))  # no full weights written
    assert all(abs(h["mean_ratio"] - 1) < 1e-4 for h in history[1:])  # served = trained
    assert all(h["mismatch_kl"] < 1e-6 for h in history[1:])
    assert history[-1]["ref_kl"] > 0  # the reference is the base with the adapter off
    merged = trainer.merged_state()
    moved = [k for k, v in merged.items() if not torch.equal(v, start[k])]
    assert moved and all(k.endswith("proj.weight") for k in moved)


def test_broadcast_refuses_weights_that_do_not_fit_the_served_model(policy_dir, tmp_path):
    import httpx
    from support.toy import tiny_llama
    from transformers import AutoModelForCausalLM

    from verifiers.processes.server import start_server
    from verifiers.rl.algorithm.trainer import Trainer
    from verifiers.rl.configs.rl import TrainerConfig
    from verifiers.weights.errors import InferenceServerError
    from verifiers.weights.transport import BroadcastTransport

    server = start_server(str(policy_dir), log_path=tmp_path / "s.log", weights_secret=SECRET)
    try:
        wrong = Trainer(tiny_llama(vocab_size=64), TrainerConfig())  # not the served model
        transport = BroadcastTransport(server.base_url, timeout_s=30, secret=SECRET)
        with pytest.raises(InferenceServerError, match=r"do not fit the served model.*shape"):
            transport.push(wrong)
        assert transport.group is None
        spec = {"name": "x", "dtype": "float32", "shape": [1]}
        too_many = {"host": "127.0.0.1", "store_file": "/x", "world_size": 3, "tensors": [spec]}
        reply = httpx.post(
            f"{server.base_url}/weights/broadcast/init",
            json=too_many,
            headers={"X-VF-Weights-Secret": SECRET},
        )
        # refused, rather than joining a group whose third rank never comes
        assert reply.status_code == 400 and "world_size 2" in reply.json()["error"]["message"]
        # the refusals left the server usable: the right weights still go through
        right = Trainer(AutoModelForCausalLM.from_pretrained(policy_dir), TrainerConfig())
        right.version = 7
        assert transport.push(right) == 7
        transport.close()
        # a restarted trainer sets up a new group; the server drops the old one for it
        right.version = 8
        restarted = BroadcastTransport(server.base_url, timeout_s=30, secret=SECRET)
        assert restarted.push(right) == 8
        restarted.close()
    finally:
        server.stop()


def test_a_server_killed_between_broadcasts_is_reported_not_waited_for(policy_dir, tmp_path):
    """No health callback: the transport itself must notice the dead peer, well before the
    group's 60 s timeout."""
    import time

    from transformers import AutoModelForCausalLM

    from verifiers.processes.server import start_server
    from verifiers.rl.algorithm.trainer import Trainer
    from verifiers.rl.configs.rl import TrainerConfig
    from verifiers.weights.errors import InferenceServerError
    from verifiers.weights.transport import BroadcastTransport

    server = start_server(str(policy_dir), log_path=tmp_path / "s.log", weights_secret=SECRET)
    try:
        trainer = Trainer(AutoModelForCausalLM.from_pretrained(policy_dir), TrainerConfig())
        transport = BroadcastTransport(server.base_url, timeout_s=60, secret=SECRET)
        assert transport.push(trainer) == 0
        server.process.kill()
        server.process.wait()
        start = time.monotonic()
        with pytest.raises(InferenceServerError):
            transport.push(trainer)
        assert time.monotonic() - start < 10
        assert transport.group is None
    finally:
        server.stop()


def test_a_stuck_broadcast_init_cannot_lock_the_trainer_out(policy_dir, tmp_path):
    """An init whose trainer never joins (a dead or hostile one) is replaced by the next init."""
    import httpx
    from transformers import AutoModelForCausalLM

    from verifiers.processes.server import start_server
    from verifiers.rl.algorithm.trainer import Trainer
    from verifiers.rl.configs.rl import TrainerConfig
    from verifiers.weights.transport import BroadcastTransport

    server = start_server(str(policy_dir), log_path=tmp_path / "s.log", weights_secret=SECRET)
    try:
        trainer = Trainer(AutoModelForCausalLM.from_pretrained(policy_dir), TrainerConfig())
        specs = [
            {"name": n, "dtype": "float32", "shape": list(p.shape)}
            for n, p in trainer.model.state_dict().items()
        ]
        stuck = {
            "host": "127.0.0.1",
            "store_file": str(tmp_path / "stuck"),
            "timeout_s": 600,
            "tensors": specs,
        }
        reply = httpx.post(
            f"{server.base_url}/weights/broadcast/init",
            json=stuck,
            headers={"X-VF-Weights-Secret": SECRET},
            timeout=30,
        )
        assert reply.status_code == 202  # joining a group nobody else will join
        trainer.version = 3
        transport = BroadcastTransport(server.base_url, timeout_s=60, secret=SECRET)
        assert transport.push(trainer) == 3  # the newer init won
        transport.close()
    finally:
        server.stop()
