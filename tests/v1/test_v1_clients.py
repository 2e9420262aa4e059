"""The model clients of a v1 run: inside ``pooled_clients()`` (what ``vf-eval`` on a v1 taskset
runs its episodes in) episodes share one client per endpoint, and its calls send the body
``AsyncOpenAI`` sends and give back the ``ChatCompletion`` it gives; elsewhere each episode
opens and closes its own ``AsyncOpenAI``, as before. Against the scripted server on loopback."""

from __future__ import annotations

from typing import Any

import pytest
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletion

from verifiers.testing import Reply
from verifiers.v1.chat import model_client, pooled_clients
from verifiers.v1.configs.client import EvalClientConfig

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}},
        },
    }
]


def request(content: str) -> dict[str, Any]:
    return {
        "model": "test-model",
        "messages": [{"role": "user", "content": content}],
        "tools": TOOLS,
        "temperature": 0.5,
        "max_tokens": 32,
        "extra_body": {"top_k": 4},
    }


def comparable(completion: ChatCompletion) -> dict[str, Any]:
    return completion.model_dump(exclude={"id", "created"})


async def test_a_pooled_run_shares_one_client_per_endpoint_and_closes_them(server):
    config = EvalClientConfig()
    async with pooled_clients():
        async with model_client(config, server.base_url, "k") as first:
            pass
        async with model_client(config, server.base_url, "k") as second:
            pass
        async with model_client(config, server.base_url, "other-key") as third:
            pass
        assert first is second and third is not first
        await first.chat.completions.create(**request("hello"))
        assert not first._http._session.closed  # a call between episodes keeps the connection
    assert first._http._session is None  # the block's end closed it
    async with model_client(config, server.base_url, "k") as own:
        assert isinstance(own, AsyncOpenAI)  # outside a pooled run: a client of its own
    assert own.is_closed()


async def test_a_pooled_call_sends_and_returns_what_asyncopenai_does(server):
    server.set_handler(
        lambda req: Reply(
            content=None, tool_calls=[Reply.tool_call("add", {"a": 2}, call_id="call_7")]
        )
    )
    config = EvalClientConfig()
    async with model_client(config, server.base_url, "k") as plain:
        expected = await plain.chat.completions.create(**request("same"))
    async with pooled_clients():
        async with model_client(config, server.base_url, "k") as pooled:
            got = await pooled.chat.completions.create(**request("same"))
    assert isinstance(got, ChatCompletion)
    assert comparable(got) == comparable(expected)
    assert got.choices[0].message.tool_calls[0].function.name == "add"
    sent_plain, sent_pooled = server.requests
    assert sent_pooled["top_k"] == 4 and sent_pooled["tools"] == TOOLS
    for body in (sent_plain, sent_pooled):
        body.pop("_headers", None)
    assert sent_pooled == sent_plain


async def test_a_pooled_call_that_fails_raises_with_its_status_and_is_not_retried(server):
    server.enqueue(Reply(status=400, error="maximum context length exceeded"))
    async with pooled_clients():
        async with model_client(EvalClientConfig(), server.base_url, "k") as pooled:
            with pytest.raises(Exception) as failed:
                await pooled.chat.completions.create(**request("too long"))
    assert failed.value.status_code == 400  # type: ignore[attr-defined]
    assert "context length" in str(failed.value)
    assert len(server.requests) == 1  # max_retries=0, as open_client's AsyncOpenAI


@pytest.fixture
def calc_env(tmp_path, monkeypatch):
    from support.v1_calc import install_calc

    import verifiers as vf_classic

    for _ in install_calc(tmp_path / "pkgs", monkeypatch):
        yield vf_classic.load_environment("calc-v1")


def test_a_taskset_environments_runs_share_clients_that_end_with_each_run(server, calc_env):
    """``TasksetEnvironment`` keeps its episodes' clients for the run (in env workers, for
    the worker's life) and closes them at the run's end; a run on a new event loop (a second
    ``asyncio.run``) gets clients of its own instead of the last loop's closed ones."""
    import asyncio

    from support.v1_calc import calc_policy

    server.set_handler(calc_policy)
    for _ in range(2):
        out = asyncio.run(
            calc_env.evaluate(server.base_url, "test-model", num_examples=1, rollouts_per_example=2)
        )
        assert out.reward == [1.0, 1.0]
        assert calc_env._client_pool is None  # closed by end_run


def test_a_v1_state_scored_again_reads_its_scores_back_from_its_trace_line(server, calc_env):
    """A scored state holds its episode only as its ``traces.jsonl`` line (the live episode is
    dropped once scored, so a run does not keep every one to its end); scoring it again gives
    the same reward and metrics, read back from that line."""
    import asyncio

    from support.v1_calc import calc_policy

    from verifiers.v1.eval_env import EPISODE_KEY, TRACE_KEY

    server.set_handler(calc_policy)
    out = asyncio.run(
        calc_env.evaluate(server.base_url, "test-model", num_examples=2, rollouts_per_example=1)
    )
    states = list(out.state)
    first = [(s["reward"], dict(s["metrics"])) for s in states]
    assert first == [(1.0, {"tool_calls": 1.0, "correct": 1.0})] * 2
    assert all(EPISODE_KEY not in s and isinstance(s[TRACE_KEY], str) for s in states)
    asyncio.run(calc_env.rubric.score_group(states))
    assert [(s["reward"], dict(s["metrics"])) for s in states] == first


def test_a_v1_run_through_the_pooled_client_imports_neither_openai_nor_datasets(server, calc_env):
    """The null harness reads the lean client's JSON reply and the taskset's rows stay lists,
    so a v1 eval run loads neither ``openai`` nor ``datasets`` (with pandas and pyarrow): their
    objects tripled what each full garbage collection of a run walked. A fresh process, so
    nothing another test imported counts."""
    import subprocess
    import sys

    from support.v1_calc import calc_policy

    server.set_handler(calc_policy)
    script = (
        "import sys, verifiers as vf\n"
        "env = vf.load_environment('calc-v1')\n"
        f"out = env.evaluate_sync({server.base_url!r}, 'test-model', num_examples=2)\n"
        "assert out.reward == [1.0, 1.0], out.reward\n"
        "print(sorted(m for m in ('openai', 'datasets', 'pandas') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
