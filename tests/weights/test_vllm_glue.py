"""The glue that gives vLLM the trainer's weight-update API (verifiers.weights.vllm_routes and
verifiers.weights.vllm_worker).

vLLM needs CUDA and cannot be installed on the CPU machines CI runs on, so these tests run the
glue itself for real — the middleware inside a live HTTP server, the worker extension's methods,
a real gloo process group, a real model taking the weights, the trainer's real transports — with
a small stand-in for the two vLLM objects it touches: the engine client (``collective_rpc``,
``reset_prefix_cache``, ``vllm_config``) and the worker (``device``,
``model_runner.model.load_weights``). Against real vLLM: ``test_vllm_*`` (CUDA + vllm) and
``scripts/gpu_check.sh``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import socket
import threading
import time
from collections.abc import Callable
from types import SimpleNamespace

import httpx
import pytest
import torch
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from support.toy import tiny_llama

from verifiers.rl.algorithm.trainer import Trainer
from verifiers.rl.configs.rl import TrainerConfig
from verifiers.weights import vllm_routes
from verifiers.weights.access import WeightAccess
from verifiers.weights.errors import InferenceServerError
from verifiers.weights.transport import BroadcastTransport, FilesystemTransport
from verifiers.weights.vllm_worker import WeightUpdateExtension


class LoadableModel:
    """vLLM's model interface for weights: ``load_weights`` takes (checkpoint name, tensor)."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model
        self.params = dict(model.named_parameters())
        self.loaded = 0

    def load_weights(self, weights) -> None:
        with torch.no_grad():
            for name, tensor in weights:
                self.params[name].copy_(tensor)
                self.loaded += 1


class Worker(WeightUpdateExtension):
    """``model_dir`` is the checkpoint vLLM was started on (``--model``): updates are checked
    against its safetensors manifest."""

    def __init__(self, model: torch.nn.Module, model_dir) -> None:
        self.device = torch.device("cpu")
        self.model_runner = SimpleNamespace(model=LoadableModel(model))
        self.model_config = SimpleNamespace(model=str(model_dir))

    def _verifiers_worker_rank(self) -> int:
        return 0


class EngineClient:
    """collective_rpc runs the method on every worker (here one) off the event loop, as vLLM
    runs it in the worker processes, and returns the list of their results."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.vllm_config = SimpleNamespace(parallel_config=SimpleNamespace(world_size=1))
        self.prefix_cache_resets = 0
        self.refusals = 0  # how many resets to refuse (running requests hold cached blocks)
        self.forced = 0
        self.never_reset = False

    async def collective_rpc(self, method, timeout=None, args=(), kwargs=None):
        call = getattr(self.worker, method)
        return [await asyncio.to_thread(call, *args, **(kwargs or {}))]

    async def reset_prefix_cache(self, reset_running_requests: bool = False) -> bool:
        """As vLLM's: False while running requests hold blocks, unless they are preempted."""
        if reset_running_requests:
            self.forced += 1
        elif self.never_reset or self.refusals > 0:
            self.refusals -= 1
            return False
        self.prefix_cache_resets += 1
        return True


SECRET = "vllm-test-secret"
AUTH = {"X-VF-Weights-Secret": SECRET}


@pytest.fixture
def served(tmp_path_factory):
    """A live HTTP server: a completions route and vLLM's middleware hook with our routes."""
    vllm_routes.STATE = vllm_routes._WeightState()
    # what vf-rl puts in vLLM's environment: the secret and the trainer's weights dir
    vllm_routes.ACCESS = WeightAccess(SECRET, [tmp_path_factory.getbasetemp()])
    checkpoint = tmp_path_factory.mktemp("served-model")
    tiny_llama(seed=1).save_pretrained(checkpoint)
    worker = Worker(tiny_llama(seed=1), checkpoint)
    engine = EngineClient(worker)

    async def completions(request: Request):
        return JSONResponse({"id": "x", "choices": [{"index": 0, "text": "hi"}]})

    app = FastAPI()  # vLLM's server is a FastAPI app too
    app.add_api_route("/v1/completions", completions, methods=["POST"])
    app.state.engine_client = engine
    app.middleware("http")(vllm_routes.weight_routes)  # what vLLM does with --middleware
    arrived: list[str] = []  # the path of each request as it reaches the server, held or not

    async def note_arrival(request: Request, call_next):
        arrived.append(request.url.path)
        return await call_next(request)

    app.middleware("http")(note_arrival)  # added last: outside vLLM's, so it sees them first
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    yield SimpleNamespace(
        url=f"http://127.0.0.1:{port}/v1", worker=worker, engine=engine, app=app, arrived=arrived
    )
    server.should_exit = True
    thread.join(10)


def served_version(url: str) -> int:
    reply = httpx.post(f"{url}/completions", json={"prompt": "x"}).json()
    return reply["policy_version"]


def assert_same_weights(trainer: Trainer, worker: Worker) -> None:
    served_params = worker.model_runner.model.params
    for name, param in trainer.model.named_parameters():
        assert torch.equal(param.detach(), served_params[name].detach()), name


def test_broadcast_updates_reach_the_worker_and_every_reply_says_which_version(served):
    trainer = Trainer(tiny_llama(seed=0), TrainerConfig(lr=1e-2))
    transport = BroadcastTransport(served.url, timeout_s=30, secret=SECRET)
    assert served_version(served.url) == 0
    for version in (1, 2):
        trainer.version = version
        with torch.no_grad():
            for param in trainer.model.parameters():
                param.add_(0.01 * version)
        assert transport.push(trainer) == version
        assert_same_weights(trainer, served.worker)
        assert served_version(served.url) == version
    info = httpx.get(f"{served.url}/weights").json()
    assert info == {"policy_version": 2, "path": "broadcast", "inference_ranks": 1}
    assert served.engine.prefix_cache_resets == 2  # cached KV came from the old weights
    transport.close()
    restarted = BroadcastTransport(served.url, timeout_s=30, secret=SECRET)  # a new trainer
    trainer.version = 3
    assert restarted.push(trainer) == 3 and served_version(served.url) == 3
    restarted.close()


def test_filesystem_updates_load_through_the_worker(served, tmp_path):
    trainer = Trainer(tiny_llama(seed=0), TrainerConfig())
    trainer.version = 5
    assert FilesystemTransport(served.url, tmp_path / "w", secret=SECRET).push(trainer) == 5
    assert_same_weights(trainer, served.worker)
    assert served_version(served.url) == 5
    with pytest.raises(InferenceServerError, match="no safetensors weights"):
        FilesystemTransport(served.url, tmp_path / "missing", secret=SECRET).push(
            SimpleNamespace(version=6, save_weights=lambda d: None)
        )
    assert served_version(served.url) == 5  # a failed load changes nothing


def test_new_weights_wait_for_the_prefix_cache_reset_and_requests_wait_with_them(
    served, tmp_path, monkeypatch
):
    """vLLM refuses to reset while requests run: the update retries, and a completion that
    arrives meanwhile is held until the reset has happened (never served old-weights KV). The
    engine refuses until that completion has reached the server, however slowly it comes."""
    import concurrent.futures

    monkeypatch.setattr(vllm_routes, "RESET_RETRY_S", 600.0)  # refused: never forced here
    trainer = Trainer(tiny_llama(seed=0), TrainerConfig())
    trainer.version = 1
    refusing = 10**9
    served.engine.refusals = refusing
    transport = FilesystemTransport(served.url, tmp_path / "w", secret=SECRET)

    def wait_until(condition: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + 60
        while not condition():
            assert time.monotonic() < deadline and not update.done(), what
            time.sleep(0.01)

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        update = pool.submit(transport.push, trainer)
        wait_until(lambda: served.engine.refusals < refusing, "the update never tried a reset")
        during = pool.submit(served_version, served.url)  # the update is retrying its reset now
        wait_until(lambda: "/v1/completions" in served.arrived, "the completion never arrived")
        served.engine.refusals = 0  # the running requests finished: the next reset is done
        assert update.result(timeout=30) == 1
        assert during.result(timeout=30) == 1  # held back, then served by the new weights
    assert served.engine.prefix_cache_resets == 1 and served.engine.forced == 0


def test_a_reset_refused_too_long_is_forced(served, tmp_path, monkeypatch):
    monkeypatch.setattr(vllm_routes, "RESET_RETRY_S", 0.2)
    served.engine.never_reset = True
    trainer = Trainer(tiny_llama(seed=0), TrainerConfig())
    trainer.version = 1
    assert FilesystemTransport(served.url, tmp_path / "w", secret=SECRET).push(trainer) == 1
    assert served.engine.forced == 1  # preempting the running requests made it succeed
    assert served_version(served.url) == 1


def test_weights_of_another_model_are_refused_before_any_tensor_is_applied(served, tmp_path):
    wrong = Trainer(tiny_llama(vocab_size=96, seed=0), TrainerConfig())  # not the served model
    wrong.version = 1
    with pytest.raises(InferenceServerError, match=r"do not fit the served model.*shape"):
        FilesystemTransport(served.url, tmp_path / "w", secret=SECRET).push(wrong)
    assert served.worker.model_runner.model.loaded == 0
    with pytest.raises(InferenceServerError, match="do not fit the served model"):
        BroadcastTransport(served.url, timeout_s=30, secret=SECRET).push(wrong)
    assert served.worker.model_runner.model.loaded == 0 and served_version(served.url) == 0


def test_a_group_of_the_wrong_size_is_refused_before_anyone_waits(served):
    body = {
        "host": "127.0.0.1",
        "store_file": "/x",
        "world_size": 3,
        "tensors": [{"name": "x", "dtype": "float32", "shape": [1]}],
    }
    reply = httpx.post(f"{served.url}/weights/broadcast/init", json=body, headers=AUTH)
    assert reply.status_code == 400
    assert "world_size 2" in reply.json()["error"]["message"]
    reply = httpx.post(f"{served.url}/weights/broadcast/update", json={}, headers=AUTH)
    assert reply.status_code == 409 and "init first" in reply.json()["error"]["message"]
    assert httpx.get(f"{served.url}/weights/nope").status_code == 404


def test_vllm_api_key_protects_the_weight_routes_too(served):
    from types import SimpleNamespace as NS

    served.app.state.args = NS(api_key="k3y")
    try:
        assert httpx.get(f"{served.url}/weights").status_code == 401
        ok = httpx.get(f"{served.url}/weights", headers={"Authorization": "Bearer k3y"})
        assert ok.status_code == 200
    finally:
        served.app.state.args = None


def test_vllm_weight_routes_need_the_secret_and_a_trusted_path(served, tmp_path):
    for path, body in (
        ("/weights/load", {"path": str(tmp_path)}),
        ("/weights/broadcast/update", {}),
    ):
        assert httpx.post(f"{served.url}{path}", json=body).status_code == 401
    outside = httpx.post(f"{served.url}/weights/load", json={"path": "/etc"}, headers=AUTH)
    assert outside.status_code == 403 and served_version(served.url) == 0


def test_vllm_loads_only_files_under_trusted_directories(served, tmp_path):
    """As in vf-serve: a weights file inside the trusted directory that is a link to one
    elsewhere is refused by the worker before a tensor is applied; a path with a NUL byte is a
    400, not a 500."""
    import shutil
    import tempfile
    from pathlib import Path

    trainer = Trainer(tiny_llama(seed=0), TrainerConfig())
    outside = Path(tempfile.mkdtemp(prefix="vf-untrusted-"))
    try:
        trainer.save_weights(outside)
        linked = tmp_path / "linked"
        linked.mkdir()
        for file in outside.glob("*.safetensors"):
            (linked / file.name).symlink_to(file)
        reply = httpx.post(f"{served.url}/weights/load", json={"path": str(linked)}, headers=AUTH)
        assert reply.status_code == 400, reply.text
        assert "trusted weights directory" in reply.json()["error"]["message"]
    finally:
        shutil.rmtree(outside)
    nul = httpx.post(f"{served.url}/weights/load", json={"path": "/tmp/\x00w"}, headers=AUTH)
    assert nul.status_code == 400 and "not a usable path" in nul.json()["error"]["message"]
    assert served.worker.model_runner.model.loaded == 0 and served_version(served.url) == 0


# --- against real vLLM (a CUDA machine with vllm installed; scripts/gpu_check.sh runs these) ---

needs_vllm = pytest.mark.skipif(
    not (torch.cuda.is_available() and importlib.util.find_spec("vllm") is not None),
    reason="needs a CUDA GPU and vLLM (run scripts/gpu_check.sh on a GPU machine)",
)


def _greedy_probe(url: str) -> tuple[list[int], list[float], int]:
    body = {
        "model": "policy",
        "prompt": "user: say A\nassistant: ",
        "max_tokens": 8,
        "temperature": 0,
        "logprobs": 1,
        "ignore_eos": True,
        "return_token_ids": True,
    }
    reply = httpx.post(f"{url}/completions", json=body, timeout=120).json()
    choice = reply["choices"][0]
    ids = list(choice["prompt_token_ids"]) + list(choice["token_ids"])
    return ids, choice["logprobs"]["token_logprobs"], reply["policy_version"]


def _trainer_logprobs(model: torch.nn.Module, ids: list[int], completion: int) -> list[float]:
    with torch.no_grad():
        tokens = torch.tensor([ids], device=next(model.parameters()).device)
        logprobs = torch.log_softmax(model(input_ids=tokens).logits[0, :-1].float(), dim=-1)
        picked = logprobs.gather(-1, tokens[0, 1:].unsqueeze(-1)).squeeze(-1)
    return picked[-completion:].tolist()


@needs_vllm
def test_vllm_serves_the_trainers_weights_after_each_transport(tmp_path):
    from support.toy import make_tiny_policy
    from transformers import AutoModelForCausalLM

    from verifiers.rl.configs.rl import InferenceConfig
    from verifiers.rl.training.inference import start_inference

    policy = make_tiny_policy(tmp_path / "policy", hidden=256, layers=4)
    inference = InferenceConfig(
        backend="vllm",
        device="cuda",
        dtype="float32",
        gpu_memory_utilization=0.2,
        max_model_len=512,
        extra_args=["--enforce-eager"],
    )
    server = start_inference(
        inference, policy, tmp_path / "vllm.log", weights_dir=tmp_path, weights_secret=SECRET
    )
    try:
        trainer = Trainer(
            AutoModelForCausalLM.from_pretrained(policy).cuda(), TrainerConfig(lr=1e-2)
        )
        ids, served, version = _greedy_probe(server.base_url)
        assert version == 0
        assert _trainer_logprobs(trainer.model, ids, len(served)) == pytest.approx(served, abs=2e-3)
        transports = {
            "filesystem": FilesystemTransport(server.base_url, tmp_path / "weights", secret=SECRET),
            "gloo": BroadcastTransport(
                server.base_url, backend="gloo", device="cuda", secret=SECRET
            ),
        }
        for step, transport in enumerate(transports.values(), start=1):
            with torch.no_grad():
                for param in trainer.model.parameters():
                    param.mul_(1.05)
            trainer.version = step
            assert transport.push(trainer) == step
            ids, served, version = _greedy_probe(server.base_url)
            assert version == step
            expected = _trainer_logprobs(trainer.model, ids, len(served))
            assert expected == pytest.approx(served, abs=2e-3)
            transport.close()
    finally:
        server.stop()
