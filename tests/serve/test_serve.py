"""vf-serve: the OpenAI-compatible server over the batching engine, on a tiny random Llama.

The tiny model shares the embedded SmolLM2 tokenizer and chat template, so prompts render
exactly as in production while every forward pass takes milliseconds.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
from pathlib import Path

import httpx
import pytest

torch = pytest.importorskip("torch", reason="vf-serve needs the local extra (torch, transformers)")
transformers = pytest.importorskip("transformers")

from verifiers.processes.server import start_server  # noqa: E402
from verifiers.serve.engine import Engine, SamplingParams, Sequence  # noqa: E402
from verifiers.serve.service import parse_tool_calls  # noqa: E402
from verifiers.testing.processes import descendants  # noqa: E402

SECRET = "serve-test-secret"
AUTH = {"X-VF-Weights-Secret": SECRET}


@pytest.fixture(scope="module")
def served(tiny_dir: Path, tmp_path_factory):
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    with start_server(
        str(tiny_dir),
        log_path=log,
        extra_args=["--dtype", "float32", "--served-model-name", "tiny"],
        weights_secret=SECRET,
        trusted_weights_dirs=[tmp_path_factory.getbasetemp()],
    ) as server:
        yield server


KEY = "s3cret-key-of-the-keyed-server"


@pytest.fixture(scope="module")
def keyed(tiny_dir: Path, tmp_path_factory):
    """A server for trusted clients: the key in a 0600 file, no trainer's secret (so no weight
    changes), and a token budget that only anonymous clients would be held to."""
    root = tmp_path_factory.mktemp("keyed")
    key_file = root / "key"
    key_file.write_text(f"{KEY}\n")
    key_file.chmod(0o600)
    with start_server(
        str(tiny_dir),
        log_path=root / "serve.log",
        extra_args=[
            *("--dtype", "float32", "--served-model-name", "tiny"),
            *("--api-key-file", str(key_file), "--client-max-tokens", "600"),
        ],
    ) as server:
        yield server


def chat(served, **body):
    payload = {
        "model": "tiny",
        "messages": [{"role": "user", "content": "Hello there"}],
        "max_tokens": 12,
        "temperature": 0,
        **body,
    }
    return httpx.post(f"{served.base_url}/chat/completions", json=payload, timeout=60)


def test_models_and_health(served):
    data = httpx.get(f"{served.base_url}/models").json()["data"]
    assert (
        data[0]["id"] == "tiny"
        and data[0]["max_model_len"] == 256
        and data[0]["policy_version"] == 0
    )


def test_chat_completion_returns_tokens_logprobs_and_usage(served, tiny_dir):
    from transformers import AutoTokenizer

    resp = chat(served, logprobs=True, top_logprobs=2, return_token_ids=True, ignore_eos=True)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    choice = body["choices"][0]
    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Hello there"}], add_generation_prompt=True, tokenize=False
    )
    assert body["prompt_token_ids"] == tokenizer(text, add_special_tokens=False)["input_ids"]
    assert len(choice["token_ids"]) == 12 == body["usage"]["completion_tokens"]
    assert choice["finish_reason"] == "length"
    entries = choice["logprobs"]["content"]
    assert len(entries) == 12 and all(
        e["logprob"] <= 0 and len(e["top_logprobs"]) == 2 for e in entries
    )
    assert choice["message"]["content"] == tokenizer.decode(
        choice["token_ids"], skip_special_tokens=True
    )


def test_greedy_and_seeded_sampling_are_reproducible(served):
    assert (
        chat(served).json()["choices"][0]["message"] == chat(served).json()["choices"][0]["message"]
    )
    a = chat(served, temperature=1.0, seed=7, ignore_eos=True).json()["choices"][0]["message"][
        "content"
    ]
    b = chat(served, temperature=1.0, seed=7, ignore_eos=True).json()["choices"][0]["message"][
        "content"
    ]
    assert a == b
    many = chat(served, temperature=1.0, n=3, seed=1, top_p=0.9, top_k=50).json()["choices"]
    assert [c["index"] for c in many] == [0, 1, 2]


def test_a_tiny_temperature_samples_greedily_and_fails_no_one_beside_it(served):
    """temperature=1e-40 passes the API's range and overflowed float32 sampling to NaN, failing
    every request in the batch; under 1e-5 a request samples greedily, as vLLM's do."""
    import concurrent.futures

    greedy = chat(served, max_tokens=8, ignore_eos=True).json()["choices"][0]["message"]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        tiny = [
            pool.submit(chat, served, max_tokens=8, ignore_eos=True, temperature=t)
            for t in (1e-40, 1e-30, 5e-324)
        ]
        beside = pool.submit(chat, served, max_tokens=8, ignore_eos=True, temperature=1.0, seed=3)
        answers = [f.result() for f in tiny]
        assert beside.result().status_code == 200
    assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
    assert all(a.json()["choices"][0]["message"] == greedy for a in answers)


EDGES = [
    ({"top_p": 5e-324}, 200),
    ({"temperature": 2.0, "top_p": 1e-300}, 200),
    ({"top_k": 2**63}, 200),
    ({"seed": 2**64 - 1}, 200),
    ({"seed": -(2**63)}, 200),
    ({"n": 16, "top_k": 2**62, "seed": 2**62, "logprobs": True, "top_logprobs": 20}, 200),
    ({"logit_bias": {"1": 1e308}, "presence_penalty": 1e308}, 200),  # not implemented: ignored
    ({"seed": 2**64}, 400),
    ({"max_tokens": 2**63}, 400),
    ({"max_tokens": 10**30}, 400),
    ({"top_k": -(2**63)}, 400),
    ({"temperature": 1e308}, 400),
]


@pytest.mark.parametrize(("edge", "status"), EDGES, ids=[str(e) for e, _ in EDGES])
def test_numbers_at_the_edges_of_what_sampling_computes_fail_alone_or_compute(served, edge, status):
    """Each number at or past what the sampler can compute with (int64 seeds and top_k, denormal
    top_p, huge max_tokens) either samples or is a 400 naming its field, and a request in the
    same batch beside it is answered as if it were alone."""
    import concurrent.futures

    alone = chat(served, max_tokens=8, ignore_eos=True, temperature=1.0, seed=3).json()
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        body = {"max_tokens": 8, "ignore_eos": True, "temperature": 1.0, **edge}
        edgy = pool.submit(chat, served, **body)
        beside = pool.submit(chat, served, max_tokens=8, ignore_eos=True, temperature=1.0, seed=3)
        answer, neighbour = edgy.result(), beside.result()
    assert answer.status_code == status, answer.text
    if status == 400:
        assert next(iter(edge)) in answer.json()["error"]["message"]
    assert neighbour.json()["choices"] == alone["choices"]


def test_stop_strings_cut_the_text(served):
    full = chat(served, max_tokens=20, ignore_eos=True).json()["choices"][0]["message"]["content"]
    stop = full[len(full) // 2 : len(full) // 2 + 3]
    cut = chat(served, max_tokens=20, ignore_eos=True, stop=[stop]).json()["choices"][0]
    assert stop not in cut["message"]["content"] and full.startswith(cut["message"]["content"])
    assert cut["finish_reason"] == "stop"


def test_streaming_matches_non_streaming(served):
    expected = chat(served, max_tokens=16, ignore_eos=True).json()["choices"][0]["message"][
        "content"
    ]
    pieces, finish, usage = [], None, None
    with httpx.stream(
        "POST",
        f"{served.base_url}/chat/completions",
        timeout=60,
        json={
            "model": "tiny",
            "messages": [{"role": "user", "content": "Hello there"}],
            "max_tokens": 16,
            "temperature": 0,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    ) as resp:
        lines = [line for line in resp.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    for line in lines[:-1]:
        chunk = json.loads(line[6:])
        assert chunk["policy_version"] == 0  # every chunk says which weights sampled it
        if chunk.get("usage"):
            usage = chunk["usage"]
        for choice in chunk["choices"]:
            pieces.append(choice["delta"].get("content", ""))
            finish = choice["finish_reason"] or finish
    assert "".join(pieces) == expected and finish == "length" and usage["completion_tokens"] == 16


def test_text_completions_endpoint(served):
    resp = httpx.post(
        f"{served.base_url}/completions",
        json={
            "model": "tiny",
            "prompt": "Once upon a time",
            "max_tokens": 6,
            "temperature": 0,
            "logprobs": 1,
            "ignore_eos": True,
        },
        timeout=60,
    )
    choice = resp.json()["choices"][0]
    assert (
        resp.status_code == 200
        and len(choice["logprobs"]["token_logprobs"]) == 6
        and isinstance(choice["text"], str)
    )


@pytest.mark.parametrize(
    ("body", "status", "needle"),
    [
        ("{not json", 400, "not valid JSON"),
        ({"model": "tiny"}, 400, "messages"),
        (
            {"model": "tiny", "messages": [{"role": "user", "content": "x"}], "temperature": 5},
            400,
            "temperature",
        ),
        ({"model": "tiny", "messages": [{"role": "wizard", "content": "x"}]}, 400, "valid role"),
        ({"model": "tiny", "messages": [{"role": "user", "content": "x"}], "n": 0}, 400, "n"),
        (
            {"model": "other", "messages": [{"role": "user", "content": "x"}]},
            404,
            "not served here",
        ),
        (
            {"model": "tiny", "messages": [{"role": "user", "content": "x"}], "max_tokens": 10_000},
            400,
            "maximum context length",
        ),
        (
            {"model": "tiny", "messages": [{"role": "user", "content": "word " * 400}]},
            400,
            "maximum context length",
        ),
    ],
)
def test_bad_requests_get_openai_style_errors(served, body, status, needle):
    kwargs = {"content": body} if isinstance(body, str) else {"json": body}
    resp = httpx.post(f"{served.base_url}/chat/completions", timeout=30, **kwargs)
    assert resp.status_code == status
    error = resp.json()["error"]
    assert needle in error["message"] and error["type"] and error["code"] == status


def test_concurrent_requests_match_their_sequential_results(served):
    prompts = [f"Tell me about item {i}" for i in range(6)]

    def body(p):
        return {
            "model": "tiny",
            "messages": [{"role": "user", "content": p}],
            "max_tokens": 10,
            "temperature": 0,
            "ignore_eos": True,
        }

    sequential = [
        httpx.post(f"{served.base_url}/chat/completions", json=body(p), timeout=60).json()[
            "choices"
        ][0]["message"]["content"]
        for p in prompts
    ]

    async def all_at_once():
        async with httpx.AsyncClient(timeout=60) as client:
            replies = await asyncio.gather(
                *(client.post(f"{served.base_url}/chat/completions", json=body(p)) for p in prompts)
            )
        return [r.json()["choices"][0]["message"]["content"] for r in replies]

    assert asyncio.run(all_at_once()) == sequential


def test_engine_batches_concurrent_sequences_into_shared_steps(tiny_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    engine = Engine(AutoModelForCausalLM.from_pretrained(tiny_dir), tokenizer)
    done = threading.Semaphore(0)
    seqs = [
        Sequence(
            tokenizer(f"prompt {i} " * (i + 1))["input_ids"],
            SamplingParams(max_tokens=16, temperature=0, ignore_eos=True),
            lambda kind, payload: done.release() if kind == "done" else None,
        )
        for i in range(8)
    ]
    for seq in seqs:
        engine.submit(seq)
    for _ in seqs:
        assert done.acquire(timeout=60)
    engine.shutdown()
    assert all(len(s.out_ids) == 16 for s in seqs)
    # 8 x 16 tokens: one request at a time would take 8 x 15 decode steps
    assert engine.steps <= 2 * 15


def test_weights_reload_bumps_policy_version_and_changes_outputs(served, tiny_dir, tmp_path):
    from safetensors.torch import load_file, save_file

    before = chat(served, ignore_eos=True).json()["choices"][0]["message"]["content"]
    weights = load_file(str(tiny_dir / "model.safetensors"))
    perturbed = {
        k: (v + 0.5 * torch.randn_like(v) if v.dim() == 2 else v).contiguous()
        for k, v in weights.items()
    }
    save_file(perturbed, str(tmp_path / "model.safetensors"))
    resp = httpx.post(
        f"{served.base_url}/weights/load", json={"path": str(tmp_path)}, timeout=60, headers=AUTH
    )
    assert resp.status_code == 200 and resp.json()["policy_version"] == 1
    after = chat(served, ignore_eos=True).json()
    assert after["policy_version"] == 1 and after["choices"][0]["message"]["content"] != before
    assert httpx.get(f"{served.base_url}/weights").json() == {
        "policy_version": 1,
        "path": str(tmp_path),
        "inference_ranks": 1,
    }
    bad = httpx.post(
        f"{served.base_url}/weights/load",
        json={"path": str(tmp_path / "missing")},
        timeout=30,
        headers=AUTH,
    )
    assert bad.status_code == 400 and "no safetensors" in bad.json()["error"]["message"]
    # restore for the other tests in this module
    httpx.post(
        f"{served.base_url}/weights/load",
        json={"path": str(tiny_dir), "policy_version": 0},
        timeout=60,
        headers=AUTH,
    )


def test_hermes_tool_calls_are_parsed():
    content, calls = parse_tool_calls(
        'Let me check.<tool_call>{"name": "weather", "arguments": {"city": "Oslo"}}</tool_call>'
    )
    assert content == "Let me check." and calls[0]["function"] == {
        "name": "weather",
        "arguments": '{"city": "Oslo"}',
    }
    assert parse_tool_calls("plain text") == ("plain text", [])
    assert parse_tool_calls("<tool_call>{broken</tool_call>")[1] == []


def test_tools_are_accepted_by_the_chat_template(served):
    tools = [
        {
            "type": "function",
            "function": {
                "name": "f",
                "description": "d",
                "parameters": {"type": "object", "properties": {}},
            },
        }
    ]
    assert chat(served, tools=tools).status_code == 200


def test_a_server_does_not_outlive_a_parent_killed_with_sigkill(tiny_dir, tmp_path):
    """A trainer or vf-eval that dies by SIGKILL (no finally, no atexit) takes its server along,
    and the server its own children (the process that prepares large prompts): the port, the
    memory and, with vLLM, the GPU are not left held."""
    import os
    import subprocess
    import sys
    import time

    script = (
        "import os, signal, sys, httpx\n"
        "from pathlib import Path\n"
        "from verifiers.processes.server import start_server\n"
        "from verifiers.testing.processes import descendants\n"
        f"server = start_server({str(tiny_dir)!r}, log_path=Path({str(tmp_path / 's.log')!r}))\n"
        "large = {'model': server.model, 'prompt': 'Hi', 'max_tokens': 1, 'user': 'p' * 2**21}\n"
        "assert httpx.post(server.base_url + '/completions', json=large, timeout=60).is_success\n"
        "print(server.process.pid, server.base_url, *descendants(server.process.pid), flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    parent = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert parent.returncode == -9, parent.stderr
    pid, base_url, *children = parent.stdout.split()
    assert children, "the large prompt was not prepared in a child process"
    deadline = time.monotonic() + 15
    left = [int(p) for p in (pid, *children)]
    while left and time.monotonic() < deadline:
        left = [p for p in left if os.path.exists(f"/proc/{p}")]
        time.sleep(0.1)
    for p in left:
        os.kill(p, 9)
    assert not left, "the server or its children outlived its parent"
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{base_url}/models", timeout=2)


# --- attacks from a local process: vf-serve trusts no one ------------------------------------------


def test_weight_routes_need_the_trainers_secret(served, tiny_dir):
    body = {"path": str(tiny_dir)}
    for headers in ({}, {"X-VF-Weights-Secret": "guess"}):
        for path, payload in (
            ("/weights/load", body),
            ("/weights/broadcast/init", {"host": "127.0.0.1", "store_file": "/x", "tensors": [{}]}),
            ("/weights/broadcast/update", {}),
        ):
            resp = httpx.post(f"{served.base_url}{path}", json=payload, headers=headers, timeout=30)
            assert resp.status_code == 401, (path, resp.text)
    assert httpx.get(f"{served.base_url}/weights").json()["policy_version"] == 0  # untouched
    assert chat(served).status_code == 200  # and serving goes on


def test_weights_load_only_from_trusted_directories(served, tmp_path):
    outside = Path("/etc")
    link = tmp_path / "sneaky"
    link.symlink_to(outside)
    for path in (outside, link, tmp_path / ".." / ".." / ".." / "etc"):
        resp = httpx.post(
            f"{served.base_url}/weights/load", json={"path": str(path)}, headers=AUTH, timeout=30
        )
        assert resp.status_code == 403 and "trusted" in resp.json()["error"]["message"], path


@pytest.fixture
def untrusted(tmp_path_factory):
    """A directory outside every trusted weights directory of ``served``."""
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="vf-untrusted-"))
    assert not path.is_relative_to(tmp_path_factory.getbasetemp())
    yield path
    shutil.rmtree(path)


def load(served, path, **body) -> httpx.Response:
    return httpx.post(
        f"{served.base_url}/weights/load",
        json={"path": str(path), **body},
        headers=AUTH,
        timeout=60,
    )


def adapter_tensors(fill: float) -> dict:
    """A rank-1 LoRA adapter (peft's names) on the tiny model's first query projection."""
    module = "base_model.model.model.layers.0.self_attn.q_proj"
    return {
        f"{module}.lora_A.weight": torch.full((1, 64), fill),
        f"{module}.lora_B.weight": torch.full((64, 1), fill),
    }


def test_weights_load_reads_only_files_under_trusted_directories(
    served, tiny_dir, tmp_path, untrusted
):
    """A checkpoint directory inside a trusted one whose weights file was a link to a file
    elsewhere was loaded and served: links were resolved for the directory, not for the files
    in it. Now every file the load reads (each shard, an adapter's weights and its config) must
    itself lie under a trusted directory, judged by the file actually opened; a link to a file
    that does is fine."""
    from safetensors.torch import load_file, save_file

    weights = load_file(str(tiny_dir / "model.safetensors"))
    names = sorted(weights)
    zeros = {k: torch.zeros_like(v) for k, v in weights.items()}
    save_file(zeros, str(untrusted / "model.safetensors"))
    save_file({k: zeros[k] for k in names[1::2]}, str(untrusted / "shard.safetensors"))
    save_file(adapter_tensors(3.0), str(untrusted / "adapter_model.safetensors"))
    (untrusted / "adapter_config.json").write_text(json.dumps({"r": 1, "lora_alpha": 64}))

    def checkpoint(name: str, links: dict[str, Path], files: dict[str, dict] | None = None):
        directory = tmp_path / name
        directory.mkdir()
        for file, tensors in (files or {}).items():
            save_file(tensors, str(directory / file))
        for file, target in links.items():
            (directory / file).symlink_to(target)
        return directory

    adapter_config = tmp_path / "adapter_config.json"
    adapter_config.write_text(json.dumps({"r": 1, "lora_alpha": 1}))
    refused = [
        checkpoint("linked", {"model.safetensors": untrusted / "model.safetensors"}),
        checkpoint(
            "sharded",
            {"model-00002-of-00002.safetensors": untrusted / "shard.safetensors"},
            {"model-00001-of-00002.safetensors": {k: weights[k] for k in names[::2]}},
        ),
        checkpoint("passwd", {"model.safetensors": Path("/etc/passwd")}),
        checkpoint(
            "adapter-weights",
            {
                "adapter_config.json": adapter_config,
                "adapter_model.safetensors": untrusted / "adapter_model.safetensors",
            },
        ),
        checkpoint(
            "adapter-config",
            {"adapter_config.json": untrusted / "adapter_config.json"},
            {"adapter_model.safetensors": adapter_tensors(0.0)},
        ),
    ]
    before = chat(served, ignore_eos=True).json()["choices"][0]["message"]["content"]
    for directory in refused:
        resp = load(served, directory)
        assert resp.status_code == 403, (directory.name, resp.text)
        assert "trusted weights directory" in resp.json()["error"]["message"], resp.text
    after = chat(served, ignore_eos=True).json()
    assert after["policy_version"] == 0  # nothing was loaded, not even part of a checkpoint
    assert after["choices"][0]["message"]["content"] == before
    # links that stay inside the trusted directories still load
    inside = checkpoint("inside", {"model.safetensors": tiny_dir / "model.safetensors"})
    assert load(served, inside, policy_version=0).status_code == 200


def test_weights_are_read_from_the_file_that_was_checked(tmp_path, untrusted):
    """A file is judged after it is opened and read through that same descriptor: swapping a
    link to a file elsewhere into its place after the check changes nothing read."""
    from verifiers.weights.access import opened

    trusted = tmp_path / "trusted"
    trusted.mkdir()
    (trusted / "weights").write_text("trusted bytes")
    (untrusted / "weights").write_text("untrusted bytes")
    with opened(trusted / "weights", [trusted]) as name:
        (trusted / "weights").unlink()
        (trusted / "weights").symlink_to(untrusted / "weights")
        assert Path(name).read_text() == "trusted bytes"
    with pytest.raises(PermissionError, match="trusted weights directory"):
        with opened(trusted / "weights", [trusted]):
            pass


def test_weights_that_are_not_weights_are_a_clean_400(served, tmp_path):
    """A NUL byte in the path and a file that is not safetensors were a 500. Every way a
    weights directory can be unusable is a 400 saying why, and nothing is loaded: a path no
    file can have, a file that is not safetensors, a FIFO (which must not hang the server),
    a broken adapter config, tensors the served model does not have or of other shapes."""
    import os

    from safetensors.torch import save_file

    cases: dict[str, tuple[Path | str, str]] = {"nul": ("/tmp/\x00weights", "not a usable path")}

    def case(name: str, needle: str, files: dict[str, bytes | dict]) -> None:
        directory = tmp_path / name
        directory.mkdir()
        for file, content in files.items():
            if isinstance(content, bytes):
                (directory / file).write_bytes(content)
            else:
                save_file(content, str(directory / file))
        cases[name] = (directory, needle)

    case("text", "not a safetensors file", {"model.safetensors": b"root:x:0:0:root:/root\n"})
    case("empty", "not a safetensors file", {"model.safetensors": b""})
    case("config-not-json", "not JSON", {"adapter_config.json": b"{r: 1"})
    case("config-not-object", "not a JSON object", {"adapter_config.json": b"[1]"})
    case(
        "config-without-rank",
        "needs numbers r (not 0) and lora_alpha",
        {"adapter_config.json": b"{}", "adapter_model.safetensors": adapter_tensors(1.0)},
    )
    case(
        "adapter-shapes",
        "does not fit",
        {
            "adapter_config.json": b'{"r": 1, "lora_alpha": 1}',
            "adapter_model.safetensors": {
                **adapter_tensors(1.0),
                "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight": torch.ones(3, 1),
            },
        },
    )
    case(
        "other-shapes",
        "do not fit the served model",
        {"model.safetensors": {"model.embed_tokens.weight": torch.zeros(3, 3)}},
    )
    case(
        "other-names",
        "not a weight of the served model",
        {"model.safetensors": {"vision_tower.weight": torch.zeros(3, 3)}},
    )
    fifo = tmp_path / "fifo"
    fifo.mkdir()
    os.mkfifo(fifo / "model.safetensors")
    cases["fifo"] = (fifo, "no safetensors weights")
    for name, (path, needle) in cases.items():
        resp = load(served, path)
        assert resp.status_code == 400, (name, resp.text)
        assert needle in resp.json()["error"]["message"], (name, resp.text)
    assert chat(served).json()["policy_version"] == 0


def test_a_server_without_a_secret_refuses_every_weight_change(keyed, tiny_dir):
    resp = httpx.post(
        f"{keyed.base_url}/weights/load",
        json={"path": str(tiny_dir)},
        headers={**AUTH, "Authorization": f"Bearer {KEY}"},
    )
    assert resp.status_code == 403 and "weight updates are off" in resp.json()["error"]["message"]


def test_bad_token_ids_fail_alone(served):
    async def run() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=served.base_url, timeout=60) as client:
            bad = [
                client.post("/completions", json={"model": "tiny", "prompt": ids, "max_tokens": 4})
                for ids in ([10**9], [-1], [])
            ]
            good = client.post(
                "/chat/completions",
                json={
                    "model": "tiny",
                    "messages": [{"role": "user", "content": "hi"}],
                    "max_tokens": 4,
                },
            )
            return await asyncio.gather(*bad, good)

    *bad, good = asyncio.run(run())
    assert [r.status_code for r in bad] == [400, 400, 400], [r.text for r in bad]
    assert good.status_code == 200 and good.json()["choices"][0]["message"]["content"] is not None


def test_request_bodies_are_capped(served):
    huge = {"model": "tiny", "messages": [{"role": "user", "content": "x" * (33 * 1024 * 1024)}]}
    resp = httpx.post(f"{served.base_url}/chat/completions", json=huge, timeout=60)
    assert resp.status_code == 413
    assert chat(served).status_code == 200


def test_api_key_protects_every_route_but_health(keyed):
    assert httpx.get(f"{keyed.base_url.removesuffix('/v1')}/health").status_code == 200
    assert httpx.get(f"{keyed.base_url}/models").status_code == 401
    weights = httpx.post(f"{keyed.base_url}/weights/load", json={"path": "x"}, headers=AUTH)
    assert weights.status_code == 401
    ok = httpx.get(f"{keyed.base_url}/models", headers={"Authorization": f"Bearer {KEY}"})
    assert ok.status_code == 200


def test_the_api_key_comes_from_a_file_or_the_environment_not_the_command_line(
    keyed, tiny_dir, tmp_path
):
    """Any local user reads /proc/PID/cmdline: the key travels in a 0600 file (``keyed``) or the
    server's environment, and a key file others can read is refused."""
    import os
    import subprocess
    import sys

    with start_server(
        str(tiny_dir),
        log_path=tmp_path / "s.log",
        extra_args=["--dtype", "float32", "--served-model-name", "tiny"],
        env_overrides={"VF_SERVE_API_KEY": KEY},
    ) as from_environment:
        for server in (keyed, from_environment):
            cmdlines = b"".join(
                Path(f"/proc/{pid}/cmdline").read_bytes()
                for pid in (server.process.pid, *descendants(server.process.pid))
            )
            assert KEY.encode() not in cmdlines
            assert httpx.get(f"{server.base_url}/models").status_code == 401
            ok = httpx.get(f"{server.base_url}/models", headers={"Authorization": f"Bearer {KEY}"})
            assert ok.status_code == 200
    key_file = tmp_path / "key"
    key_file.write_text(f"{KEY}\n")
    key_file.chmod(0o644)
    refused = subprocess.run(
        [
            sys.executable,
            "-m",
            "verifiers.cli.serve",
            str(tiny_dir),
            "--api-key-file",
            str(key_file),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ},
    )
    assert refused.returncode == 2 and "chmod 600" in refused.stderr


def test_another_process_cannot_take_the_port_of_a_server_being_started(tiny_dir, tmp_path):
    """``start_server`` (vf-eval's built-in model, vf-rl's inference server) chose a free port
    and the child bound it once its interpreter had started: an outside attack (uid 65534)
    read ``--port N`` from the child's argv in /proc, bound N first and answered ``/health``,
    and vf-eval sent its prompts there and scored the answers. Now the launcher holds the port
    from before the child starts and hands it the listening socket: whoever reads the argv and
    binds the port is refused, and the server the launcher started is the one that answers."""
    import errno
    import os
    import socket

    marker = f"held-{os.getpid()}"
    tried: list[int] = []

    def attacker() -> None:  # what a local process sees: argv in /proc, then a bind
        while not tried:
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                if marker.encode() in argv and b"--port" in argv:
                    port = int(argv[argv.index(b"--port") + 1])
                    with socket.socket() as s:
                        try:
                            s.bind(("127.0.0.1", port))
                        except OSError as exc:
                            tried.append(exc.errno)
                        else:
                            tried.append(0)  # bound: the port was free for the taking
                    return

    watcher = threading.Thread(target=attacker, daemon=True)
    watcher.start()
    extra = ["--dtype", "float32", "--served-model-name", marker]
    with start_server(str(tiny_dir), log_path=tmp_path / "s.log", extra_args=extra) as server:
        watcher.join(timeout=60)
        assert tried == [errno.EADDRINUSE]
        served = httpx.get(f"{server.base_url}/models").json()["data"]
        assert [m["id"] for m in served] == [marker]
        hello = [{"role": "user", "content": "hi"}]
        payload = {"model": marker, "messages": hello, "max_tokens": 2}
        answer = httpx.post(f"{server.base_url}/chat/completions", json=payload, timeout=60)
        assert answer.status_code == 200, answer.text


def test_a_busy_port_is_found_before_the_model_loads(tiny_dir):
    import socket
    import subprocess
    import sys
    import time

    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    port = holder.getsockname()[1]
    started = time.monotonic()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "verifiers.cli.serve",
            "/nonexistent-model-dir",
            "--port",
            str(port),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    holder.close()
    assert result.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in result.stderr
    assert "pick another --port" in result.stderr and "Traceback" not in result.stderr
    assert time.monotonic() - started < 30  # no model was loaded (it does not even exist)


@pytest.mark.parametrize(
    "tool_calls",
    [
        "not a list",
        [1, 2],
        [{"function": "call me"}],
        [{"function": {"arguments": "{}"}}],
        [{"function": {"name": "f", "arguments": 7}}],
    ],
    ids=["string", "numbers", "function-not-object", "no-name", "arguments-not-json"],
)
def test_malformed_tool_calls_are_a_clean_400(served, tool_calls):
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": tool_calls},
    ]
    resp = chat(served, messages=messages)
    assert resp.status_code == 400 and "tool_calls" in resp.json()["error"]["message"], resp.text
    assert chat(served, messages=[{"role": "user", "content": ["not a part"]}]).status_code == 400
    assert chat(served).status_code == 200


def test_a_content_part_whose_text_is_not_a_string_is_a_400(served):
    """It was a 500 (the template's join met a number)."""
    resp = chat(served, messages=[{"role": "user", "content": [{"type": "text", "text": 5}]}])
    assert resp.status_code == 400 and "messages[0].content" in resp.text, resp.text


def test_a_huge_prompt_is_tokenized_without_stalling_other_clients(tiny_dir, tmp_path):
    """Tokenizing a 2 MB prompt takes about a second; /health and small chats answer meanwhile,
    each in a fraction of it. (A prompt that cannot fit the context at all is refused before
    tokenizing.)"""
    import time

    with start_server(
        str(tiny_dir),
        log_path=tmp_path / "s.log",
        extra_args=[
            "--dtype",
            "float32",
            "--served-model-name",
            "tiny",
            "--max-model-len",
            "300000",
        ],
    ) as served:
        huge = {"model": "tiny", "prompt": "lorem ipsum dolor " * 110_000, "max_tokens": 1}
        waits: list[float] = []
        big_done = threading.Event()

        def others() -> None:  # small requests, one after another, until the big one is answered
            while not big_done.is_set():
                started = time.monotonic()
                health = httpx.get(f"{served.base_url.removesuffix('/v1')}/health", timeout=30)
                assert health.status_code == 200
                assert chat(served, max_tokens=2).status_code == 200
                if not big_done.is_set():  # answered while the big prompt was in the server
                    waits.append(time.monotonic() - started)

        thread = threading.Thread(target=others)
        thread.start()
        started = time.monotonic()
        big = httpx.post(f"{served.base_url}/completions", json=huge, timeout=300)
        big_took = time.monotonic() - started
        big_done.set()
        thread.join()
        assert big.status_code == 400 and "context length" in big.json()["error"]["message"]
        # a small request stalled behind the tokenizing would wait most of it
        assert big_took > 0.4 and len(waits) >= 2, "nothing overlapped: make the prompt larger"
        assert max(waits) < max(0.3, big_took / 2), (waits, big_took)


@pytest.mark.slow
def test_an_anonymous_client_is_held_to_a_budget(keyed, tiny_dir, tmp_path):
    """Without --api-key anyone local is a client: 16 x 200 tokens, or more requests at once
    than the budget allows, get a 429 saying what to do; a request within it is served; a
    server with --api-key (trusted clients) keeps no budget."""

    def body(**extra):
        return {
            "model": "tiny",
            "messages": [{"role": "user", "content": "hi"}],
            "temperature": 0,
            **extra,
        }

    with start_server(
        str(tiny_dir),
        log_path=tmp_path / "s.log",
        extra_args=[
            "--dtype",
            "float32",
            "--served-model-name",
            "tiny",
            "--client-max-tokens",
            "600",
            "--client-max-requests",
            "2",
        ],
    ) as server:
        url = f"{server.base_url}/chat/completions"
        greedy = httpx.post(url, json=body(n=16, max_tokens=200), timeout=60)
        assert (
            greedy.status_code == 429
            and "lower n or max_tokens" in greedy.json()["error"]["message"]
        )

        async def flood() -> list[int]:
            async with httpx.AsyncClient(timeout=120) as client:
                sent = [
                    client.post(url, json=body(max_tokens=200, ignore_eos=True)) for _ in range(6)
                ]
                return [r.status_code for r in await asyncio.gather(*sent)]

        codes = asyncio.run(flood())
        assert 429 in codes and 200 in codes, codes
        assert httpx.post(url, json=body(max_tokens=8), timeout=60).status_code == 200
    trusted = httpx.post(  # the same token budget, on a server whose clients hold its key
        f"{keyed.base_url}/chat/completions",
        json=body(n=16, max_tokens=200),
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=120,
    )
    assert trusted.status_code == 200 and len(trusted.json()["choices"]) == 16


def test_a_prompt_that_cannot_fit_is_refused_before_it_is_tokenized(served):
    import time

    started = time.monotonic()
    resp = httpx.post(
        f"{served.base_url}/completions",
        json={"model": "tiny", "prompt": "x" * (30 * 1024 * 1024), "max_tokens": 1},
        timeout=120,
    )
    assert resp.status_code == 400 and "holds at most" in resp.json()["error"]["message"]
    assert time.monotonic() - started < 10  # tokenizing it would take minutes
    assert chat(served).status_code == 200


def test_a_conversion_killed_outright_leaves_nothing_once_the_model_is_next_used(
    embedded_dir, left_by_the_dead
):
    """The first use converts the embedded model in a staging directory (hundreds of MB); one
    that was SIGKILLed mid-way is removed the next time the model is resolved, and another pid
    namespace's (a container sharing the cache) is left alone."""
    from verifiers.local_model.models import DEFAULT_MODEL, EMBEDDED, convert_embedded

    killed = embedded_dir.parent / left_by_the_dead(f".{embedded_dir.name}-")
    elsewhere = embedded_dir.parent / left_by_the_dead(f".{embedded_dir.name}-", elsewhere=True)
    for staging in (killed, elsewhere):
        staging.mkdir()
        (staging / "model.safetensors").write_bytes(b"partial")
    try:
        assert convert_embedded(EMBEDDED[DEFAULT_MODEL.lower()]) == embedded_dir
        assert not killed.exists() and elsewhere.exists()
    finally:
        shutil.rmtree(killed, ignore_errors=True)
        shutil.rmtree(elsewhere, ignore_errors=True)


def test_a_client_that_stalls_its_headers_or_body_holds_nothing_for_long(tiny_dir, tmp_path):
    """Connections that never finished their headers made vf-serve unreachable, and stalled
    bodies held the client's shared budget (others got 429) for as long as the sender liked."""
    import socket as sockets
    import time as clock
    from urllib.parse import urlsplit

    with start_server(
        str(tiny_dir),
        log_path=tmp_path / "serve.log",
        extra_args=["--dtype", "float32", "--served-model-name", "tiny", "--read-timeout", "1"],
    ) as server:
        where = urlsplit(server.base_url)
        address = (where.hostname, where.port)
        half = sockets.create_connection(address)
        half.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")  # never finishes
        stalls = []
        for _ in range(64):  # the whole of an anonymous client's --client-max-requests
            stalled = sockets.create_connection(address)
            stalled.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"model\": "
            )
            stalls.append(stalled)
        started = clock.monotonic()
        half.settimeout(10)
        assert half.recv(1024) == b""  # closed by the server
        for stalled in stalls:
            stalled.settimeout(10)
            answer = stalled.recv(4096)
            assert b" 408 " in answer.split(b"\r\n", 1)[0], answer[:200]
            stalled.close()
        assert clock.monotonic() - started < 8
        # answered, its body still trickling (a 408, or a route that reads none): it was held
        # for as long as the bytes came; now the rest has the read timeout to arrive
        for head in (
            b"GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000000\r\n\r\n",
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n",
        ):
            trickled = sockets.create_connection(address, timeout=0.2)
            trickled.sendall(head)
            started, closed = clock.monotonic(), False
            while clock.monotonic() - started < 15 and not closed:
                try:
                    trickled.sendall(b" ")
                    closed = trickled.recv(4096) == b""
                except TimeoutError:
                    pass
                except OSError:
                    closed = True
                clock.sleep(0.3)
            trickled.close()
            assert closed and clock.monotonic() - started < 8, head
        ok = httpx.post(
            f"{server.base_url}/chat/completions",
            json={"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2},
            timeout=30,
        )
        assert ok.status_code == 200
        half.close()
