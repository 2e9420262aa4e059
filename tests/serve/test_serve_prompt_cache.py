"""vf-serve keeps each prompt's prefill for the next request of the same prompt (GRPO asks for
every prompt several times): the tokens and logprobs are those of a prefill computed again, and
new weights drop what was kept."""

from __future__ import annotations

import threading

import pytest

torch = pytest.importorskip("torch", reason="vf-serve needs the local extra (torch, transformers)")
pytest.importorskip("transformers")

from verifiers.serve.engine import Engine, SamplingParams, Sequence  # noqa: E402


def generate(engine, prompts, seeds, one_at_a_time):
    done = threading.Semaphore(0)
    seqs = []
    for prompt, seed in zip(prompts, seeds, strict=True):
        params = SamplingParams(max_tokens=6, temperature=1.0, seed=seed, ignore_eos=True)
        seqs.append(engine.submit(Sequence(prompt, params, lambda kind, _: _end(kind, done))))
        if one_at_a_time:
            assert done.acquire(timeout=60)
    if not one_at_a_time:
        for _ in seqs:
            assert done.acquire(timeout=60)
    return [(s.out_ids, s.out_logprobs) for s in seqs]


def _end(kind, done):
    if kind in ("done", "error"):
        done.release()


@pytest.mark.parametrize("one_at_a_time", [True, False])
def test_a_kept_prefill_samples_what_a_new_one_samples(tiny_dir, one_at_a_time):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_dir)
    first = tokenizer("say it in capitals")["input_ids"]
    other = tokenizer("a longer prompt, and not the same one at all")["input_ids"]
    prompts, seeds = [first, first, other, first, other], [1, 2, 3, 4, 5]
    uncached = Engine(model, tokenizer, prompt_cache_bytes=0)  # keeps nothing: prefills anew
    expected = [generate(uncached, [p], [s], True)[0] for p, s in zip(prompts, seeds, strict=True)]
    uncached.shutdown()
    assert len(uncached.prompts) == 0
    engine = Engine(model, tokenizer)
    got = generate(engine, prompts, seeds, one_at_a_time)
    assert len(engine.prompts) == 2  # each prompt prefilled once
    assert [ids for ids, _ in got] == [ids for ids, _ in expected]
    for (_, a), (_, b) in zip(got, expected, strict=True):
        assert a == pytest.approx(b, abs=1e-5)
    engine.swap_weights({k: v * 1.01 for k, v in model.state_dict().items()})
    assert len(engine.prompts) == 0  # the old weights' prefills are gone
    assert generate(engine, [first], [1], True) != [expected[0]]
    engine.shutdown()


def test_the_budget_keeps_the_most_recent_prompts():
    from verifiers.serve.prompt_cache import PromptCache

    def prefill(n):
        return ([(torch.zeros(1, 1, n, 4), torch.zeros(1, 1, n, 4))], torch.zeros(8))

    size = 2 * 4 * 4 * 4 + 8 * 4  # one 4-token prompt: keys, values and logits in bytes
    cache = PromptCache(max_bytes=2 * size)
    for prompt in ((1,), (2,), (3,)):
        cache.put(prompt, prefill(4))
        cache.get((1,))  # used again: the least recently used is (2,)
    assert cache.get((2,)) is None and cache.get((1,)) is not None and cache.get((3,)) is not None
    assert cache.bytes == 2 * size
    cache.put((4,), prefill(400))  # larger than the whole budget: not kept, nothing dropped
    assert len(cache) == 2


NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]  # another local user
ASK = """
import json, sys, urllib.request
body = json.dumps({"model": "tiny", "prompt": sys.argv[2], "max_tokens": 2}).encode()
req = urllib.request.Request(sys.argv[1], body, {"Content-Type": "application/json"})
print(urllib.request.urlopen(req, timeout=60).status)
"""


@pytest.mark.skipif(
    not hasattr(__import__("os"), "geteuid") or __import__("os").geteuid() != 0,
    reason="another local user (uid 65534) needs root to become",
)
def test_another_local_user_never_gets_a_prefill_kept_for_someone_else(tiny_dir):
    """A kept prefill answers faster than a new one, so a cache shared by every anonymous client
    told another local user (uid 65534, reaching vf-serve's port) whether the user had sent a
    prompt it guessed: an outside attack's membership oracle. Each client keeps its own now;
    one client's second request of a prompt still uses its kept prefill."""
    import shutil
    import socket
    import subprocess
    import sys

    import uvicorn
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from verifiers.serve.app import build_app
    from verifiers.serve.service import ModelService

    if not shutil.which("setpriv"):
        pytest.skip("setpriv is needed to act as another local user")
    model = AutoModelForCausalLM.from_pretrained(tiny_dir)
    engine = Engine(model, AutoTokenizer.from_pretrained(tiny_dir))
    service = ModelService(engine, "tiny")
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1/completions"
    server = uvicorn.Server(uvicorn.Config(build_app(service), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    prompt = "the user's secret prompt, which nobody else should learn was asked"

    def ask(*user: str) -> None:
        out = subprocess.run(
            [*user, sys.executable if not user else "/usr/bin/python3", "-c", ASK, url, prompt],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.stdout.strip() == "200", out.stderr

    try:
        while not server.started:
            thread.join(0.05)
        ask()
        assert len(engine.prompts) == 1
        ask()  # the same client again: its kept prefill, nothing new
        assert len(engine.prompts) == 1
        ask(*NOBODY)  # another local user asking the same prompt: computed for it alone
        assert len(engine.prompts) == 2
        scopes = {scope for scope, _ in engine.prompts._entries}
        assert len(scopes) == 2 and None not in scopes
    finally:
        server.should_exit = True
        thread.join(10)
        engine.shutdown()
