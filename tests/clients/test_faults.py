"""Injected endpoint faults: each is retried or recorded on the rollout, and the run goes on."""

import socket
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

import verifiers as vf
from verifiers.clients import OpenAICompatibleClient, RetryPolicy
from verifiers.clients.retry import parse_retry_after
from verifiers.testing import STALL_TIMEOUT_S, STALLED_S, Reply


def exact(completion, answer):
    return float(completion[-1]["content"] == answer)


def env(n=1):
    return vf.SingleTurnEnv(
        dataset=[{"question": f"q{i}", "answer": f"q{i}"} for i in range(n)],
        rubric=vf.Rubric(funcs=[exact]),
    )


@pytest.mark.parametrize(
    "fault",
    [
        Reply(status=429, headers={"Retry-After": "0"}),
        Reply(status=500),
        Reply(status=503),
        Reply(drop_connection=True),
        Reply(raw_body=b'{"choices": [trunc'),
        Reply(raw_body=b'{"no_choices": true}'),
    ],
    ids=["429", "500", "503", "dropped-connection", "malformed-json", "no-choices"],
)
async def test_transient_faults_are_retried_and_the_rollout_succeeds(server, client, fault):
    server.enqueue(fault, fault)
    out = await env().evaluate(client, "m")
    assert out.reward == [1.0] and out.state[0]["error"] is None
    assert len(server.requests) == 3


@pytest.mark.parametrize(
    ("fault", "error_type", "status"),
    [
        (Reply(status=500, error="overloaded"), "ServerError", 500),
        (Reply(status=429), "RateLimitError", 429),
        (Reply(drop_connection=True), "ModelConnectionError", None),
        (Reply(raw_body=b"<html>oops"), "MalformedResponseError", 200),
    ],
)
async def test_exhausted_retries_are_recorded_and_other_rollouts_finish(
    server, client, fault, error_type, status
):
    server.enqueue(*[fault] * 4)  # first rollout: 1 try + 3 retries, all failing
    out = await env(3).evaluate(client, "m", max_concurrent=1)
    failed = [s for s in out.state if s["error"]]
    assert len(failed) == 1
    error = failed[0]["error"]
    assert error["type"] == error_type and error["phase"] == "model"
    assert error["retries"] == 3 and error["status_code"] == status
    assert failed[0]["reward"] == 0.0 and failed[0]["stop_condition"] == "has_error"
    assert sorted(out.reward) == [0.0, 1.0, 1.0]


async def test_retry_after_is_honoured(server):
    client = OpenAICompatibleClient(
        server.base_url, retry=RetryPolicy(max_retries=2, initial_delay=0.001, max_delay=5)
    )
    server.enqueue(Reply(status=429, headers={"Retry-After": "0.3"}))
    start = time.perf_counter()
    out = await env().evaluate(client, "m")
    assert time.perf_counter() - start >= 0.3
    assert out.reward == [1.0]
    await client.aclose()


def test_retry_after_parses_seconds_and_http_dates():
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert 25 < parse_retry_after(later) <= 30


def test_the_first_retry_comes_soon_and_later_ones_back_off_exponentially_with_bounded_jitter():
    """A one-off blip is over at once: the first retry waits ``first_delay``; a server that
    stays down is given the exponential backoff from the second retry on."""
    policy = RetryPolicy(initial_delay=1.0, multiplier=2.0, max_delay=10.0, jitter=0.25)
    for attempt, base in [(0, 0.05), (1, 2.0), (2, 4.0), (5, 10.0)]:
        delay = policy.delay(attempt)
        assert base <= delay <= base * 1.25
    assert policy.delay(0, retry_after=60) == 10.0  # capped
    assert policy.delay(0, retry_after=0.3) == 0.3  # the server's word wins
    assert RetryPolicy(initial_delay=0.01).delay(0) <= 0.0125  # never later than initial_delay


async def test_empty_reply_is_an_error_and_not_retried(server, client):
    server.enqueue(Reply(content=""))
    out = await env().evaluate(client, "m")
    assert out.state[0]["error"]["type"] == "EmptyModelResponseError"
    assert len(server.requests) == 1


async def test_bad_request_is_not_retried(server, client):
    server.enqueue(Reply(status=400, error="unknown parameter 'foo'"))
    out = await env().evaluate(client, "m")
    error = out.state[0]["error"]
    assert error["type"] == "BadRequestError" and "unknown parameter 'foo'" in error["message"]
    assert len(server.requests) == 1


async def test_authentication_error_says_to_check_the_key(server, client):
    server.enqueue(Reply(status=401, error="invalid key"))
    out = await env().evaluate(client, "m")
    assert out.state[0]["error"]["type"] == "AuthenticationError"
    assert "check the API key" in out.state[0]["error"]["message"]


async def test_a_refusal_of_a_request_sent_without_a_key_says_no_key_was_sent(server):
    """A 401 to a call that carried no key (no key variable set, or an env server run with
    --no-auth) says so, instead of "check the API key" the user never gave."""
    server.enqueue(Reply(status=401, error="missing key"))
    keyless = OpenAICompatibleClient(server.base_url, None)
    try:
        out = await env().evaluate(keyless, "m")
    finally:
        await keyless.aclose()
    message = out.state[0]["error"]["message"]
    assert "sent with no API key" in message and "check the API key" not in message


async def test_context_overflow_ends_the_rollout_without_error(server, client):
    class Chat(vf.MultiTurnEnv):
        async def env_response(self, messages, state, **kwargs):
            return [{"role": "user", "content": "more"}]

    server.enqueue(
        "first", Reply(status=400, error="This model's maximum context length is 8 tokens")
    )
    out = await Chat(dataset=[{"question": "q"}], max_turns=5).evaluate(client, "m")
    state = out.state[0]
    assert state["error"] is None and state["prompt_too_long"] is True
    assert state["stop_condition"] == "prompt_too_long" and len(state["trajectory"]) == 1


async def test_timeout_is_recorded(server):
    client = OpenAICompatibleClient(
        server.base_url,
        timeout=STALL_TIMEOUT_S,
        retry=RetryPolicy(max_retries=1, initial_delay=0.01),
    )
    server.enqueue(Reply(content="late", delay=STALLED_S), Reply(content="late", delay=STALLED_S))
    out = await env().evaluate(client, "m")
    assert out.state[0]["error"]["type"] == "ModelTimeoutError"
    assert out.state[0]["error"]["retries"] == 1
    await client.aclose()


async def test_endpoint_down_is_recorded_for_every_rollout():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens here
    client = OpenAICompatibleClient(
        f"http://127.0.0.1:{port}/v1", retry=RetryPolicy(max_retries=1, initial_delay=0.01)
    )
    out = await env(3).evaluate(client, "m")
    assert len(out) == 3
    for state in out.state:
        assert state["error"]["type"] == "ModelConnectionError"
        assert "is the server running?" in state["error"]["message"]
    await client.aclose()


async def test_rollout_override_that_raises_is_recorded(server, client):
    class Raises(vf.SingleTurnEnv):
        async def rollout(self, input, client, model, sampling_args=None):
            raise ValueError("custom rollout bug")

    out = await Raises(dataset=[{"question": "q"}]).evaluate(client, "m")
    assert (
        out.state[0]["error"]["phase"] == "rollout"
        and "custom rollout bug" in out.state[0]["error"]["message"]
    )
