"""Behaviour that changed between classic releases without a change of name: each environment
gets its own release's (``verifiers/classic/releases.py`` has the table). Upstream's own tests
of each release check the same from the outside (``scripts/anchor_tests.sh``)."""

from __future__ import annotations

import asyncio
import dataclasses
import json

import pytest

import verifiers as vf
from verifiers.testing import Reply
from verifiers.utils.response_utils import parse_response_tokens
from verifiers.utils.save_utils import make_dataset


def rows(n=1):
    return [{"question": f"q{i}", "answer": f"q{i}"} for i in range(n)]


def completion_body(*contents: str | None) -> bytes:
    """A chat completion with one choice per content (None: no content, no tool calls)."""
    choices = [
        {
            "index": i,
            "message": {"role": "assistant", "content": content},
            "finish_reason": "stop",
        }
        for i, content in enumerate(contents)
    ]
    body = {"id": "c", "object": "chat.completion", "created": 0, "model": "m", "choices": choices}
    return json.dumps(body).encode()


def single_turn(release: str) -> vf.SingleTurnEnv:
    with vf.written_for(release):
        return vf.SingleTurnEnv(dataset=rows())


@pytest.mark.parametrize(
    ("release", "body", "refused_as"),
    [
        ("0.1.9", completion_body("a", "b"), None),  # 0.1.9 took the first of two choices
        ("0.1.10", completion_body("a", "b"), "InvalidModelResponseError"),
        ("0.1.9", completion_body(""), "EmptyModelResponseError"),  # the rollout's own check
        ("0.1.10", completion_body(None), "EmptyModelResponseError"),
    ],
    ids=["0.1.9-two-choices", "0.1.10-two-choices", "0.1.9-empty", "0.1.10-empty"],
)
async def test_dict_era_replies_are_refused_as_their_release_refused_them(
    server, client, release, body, refused_as
):
    server.set_handler(lambda request: Reply(raw_body=body))
    env = single_turn(release)
    state = (await env.evaluate(client, "m")).state[0]
    if refused_as is None:
        assert state["error"] is None and state["completion"][-1]["content"] == "a"
        return
    assert state["error"]["type"] == refused_as and state["stop_condition"] == "has_error"
    if refused_as == "EmptyModelResponseError":  # the turn the model took is still recorded
        assert len(state["trajectory"]) == 1


async def test_get_model_response_itself_raises_from_0_1_10(server, client):
    """Code that calls ``get_model_response(state, prompt)`` itself (a custom rollout) gets the
    error its release raised, with the reply on it."""
    prompt = [{"role": "user", "content": "hi"}]
    server.set_handler(lambda request: Reply(raw_body=completion_body(None)))
    new, old = single_turn("0.1.10"), single_turn("0.1.9")
    state = await new.init_state({"prompt": prompt, "example_id": 0}, client, "m")
    with pytest.raises(vf.EmptyModelResponseError) as raised:
        await new.get_model_response(state, prompt)
    assert raised.value.response["choices"][0]["message"]["content"] is None
    state = await old.init_state({"prompt": prompt, "example_id": 0}, client, "m")
    reply = await old.get_model_response(state, prompt)  # 0.1.9 left this to the rollout
    assert reply["choices"][0]["message"]["content"] is None


class MissingReplies:
    """A client object whose ``create`` returns what some providers do: nothing, or no choices."""

    def __init__(self, reply):
        self.reply = reply
        self.chat = self
        self.completions = self

    async def create(self, **kwargs):
        return self.reply


@pytest.mark.parametrize("reply", [None, {"id": "c", "choices": None}], ids=["none", "no-choices"])
async def test_a_missing_reply_is_an_empty_response_error_from_0_1_9(reply):
    env = single_turn("0.1.9")
    state = (await env.evaluate(MissingReplies(reply), "m")).state[0]
    assert state["error"]["type"] == "EmptyModelResponseError"
    assert state["trajectory"] == []  # nothing the model did to record


def tool_env(release: str) -> vf.ToolEnv:
    def echo(text: str) -> str:
        """Say it back.

        Args:
            text: what to say
        """
        return text

    with vf.written_for(release):
        return vf.ToolEnv(tools=[echo], dataset=rows(), max_turns=1)


async def test_output_rows_take_the_shape_of_the_environments_release(server, client):
    """Rows carry the string ``task`` until 0.1.14 and ``oai_tools`` until 0.1.11, whichever
    release is current where the rows are read."""
    shapes = {}
    for release in ("0.1.10", "0.1.12", "0.1.14"):
        out = await tool_env(release).evaluate(client, "m")
        row = out["outputs"][0]
        shapes[release] = ("task" in row, "oai_tools" in row, "tool_defs" in row)
        assert json.dumps(row)
    assert shapes == {
        "0.1.10": (True, True, False),
        "0.1.12": (True, False, True),
        "0.1.14": (False, False, True),
    }
    dataset = make_dataset(await tool_env("0.1.10").evaluate(client, "m"))
    assert {"task", "example_id", "prompt", "completion", "reward"} <= set(dataset.column_names)


@pytest.mark.parametrize(
    ("release", "unboxed", "long_answer"),
    [("0.1.11", 1.0, 1.0), ("0.1.12", 0.0, 0.0)],
)
async def test_math_rubric_reads_answers_as_its_release_did(release, unboxed, long_answer):
    """Before 0.1.12 a reply without ``\\boxed{}`` is the answer itself, and answers up to
    100,000 characters are verified (those releases set no limit); from 0.1.12 only a boxed
    answer counts and answers over 50,000 characters score 0."""
    with vf.written_for(release):
        rubric = vf.MathRubric()
    assert await rubric.correct_answer(completion="x + 1", answer="1 + x") == unboxed
    assert await rubric.correct_answer(completion=r"\boxed{x + 1}", answer="1 + x") == 1.0
    digits = "1" * 60_000
    assert await rubric.correct_answer(completion=rf"\boxed{{{digits}}}", answer=digits) == (
        long_answer
    )
    huge = "1" * 1_000_000  # a reply that would hold the verifier for seconds: never parsed
    assert await rubric.correct_answer(completion=huge, answer=huge) == 0.0


@dataclasses.dataclass
class Attribution:
    """The shape of a renderer's ``RenderedTokens`` (which prompt message each token is from)."""

    token_ids: list[int]
    message_indices: list[int]
    sampled_mask: list[bool]
    is_content: list[bool]
    message_roles: list[str]
    multi_modal_data: object = None


def response_with(attribution: Attribution, prompt_ids: list[int]) -> vf.Response:
    tokens = vf.ResponseTokens(
        prompt_ids=prompt_ids,
        prompt_mask=[0] * len(prompt_ids),
        completion_ids=[20, 21],
        completion_mask=[1, 1],
        completion_logprobs=[-0.1, -0.2],
        prompt_attribution=attribution,
    )
    message = vf.ResponseMessage(
        content="hi", finish_reason="stop", is_truncated=False, tokens=tokens
    )
    return vf.Response(id="r", created=0, model="m", message=message)


async def test_a_prompt_attribution_moves_to_the_step_cut_with_the_prompt():
    attribution = Attribution(
        [10, 11, 12, 13], [0, 0, 1, 1], [False] * 4, [False, True] * 2, ["user", "tool"]
    )
    response = response_with(attribution, [10, 11, 12, 13])
    tokens = await parse_response_tokens(response, max_seq_len=3)
    assert tokens["overlong_prompt"] and tokens["prompt_ids"] == [10, 11, 12]
    assert tokens["prompt_attribution"] == {
        "token_ids": [10, 11, 12],
        "message_indices": [0, 0, 1],
        "sampled_mask": [False] * 3,
        "is_content": [False, True, False],
        "message_roles": ["user", "tool"],  # one per message: never cut
        "multi_modal_data": None,
    }
    assert response.message.tokens.prompt_attribution is None  # moved, not copied
    whole = await parse_response_tokens(response_with(attribution, [10, 11, 12, 13]))
    assert whole["prompt_attribution"] == dataclasses.asdict(attribution)


# --- what later releases refused, accepted in every release ---------------------------------------
# 0.1.11 refused ``oai_tools`` (the constructor's and ``info["oai_tools"]``) and 0.1.14 a plain-string
# ``task``; every environment written before used them and nobody gains from the refusal. The
# other changes of 0.1.9-0.3.x are behaviour, kept per release: a malformed reply is an error
# (0.1.9/0.1.10), MathRubric needs ``\boxed{}`` (0.1.12), tool definitions are ``strict`` (0.2.0).
ECHO_TOOL = {
    "type": "function",
    "function": {
        "name": "echo",
        "description": "Echo text",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
    },
}
RELEASES = ["0.1.8", "0.1.11", "0.1.14", "0.3.1"]


def task_name(task, **_) -> float:
    return float(task == "reverse")


@pytest.mark.parametrize("release", RELEASES)
async def test_a_plain_string_task_is_a_task_name_in_every_release(server, client, release):
    with vf.written_for(release):
        env = vf.SingleTurnEnv(
            dataset=[{"question": "q0", "answer": "q0", "task": "reverse"}],
            rubric=vf.Rubric(funcs=[task_name]),
        )
    out = await env.evaluate(client, "m")
    state = out.state[0]
    assert state["error"] is None and state["task"] == "reverse"
    assert out.metrics["task_name"] == [1.0]  # a reward function gets the name
    assert out["outputs"][0]["task"] == "reverse"  # and the row keeps it


async def test_a_json_task_payload_is_still_the_rows_payload(server, client):
    payload = {"prompt": [{"role": "user", "content": "q7"}], "answer": "q7", "example_id": 7}
    env = vf.SingleTurnEnv(dataset=rows())
    state = await env.init_state(
        {"prompt": [{"role": "user", "content": "ignored"}], "task": json.dumps(payload)},
        client,
        "m",
    )
    assert state["task"] == payload and state["prompt"][0].content == "q7"
    assert state["example_id"] == 7


@pytest.mark.parametrize("release", RELEASES)
async def test_oai_tools_given_to_the_constructor_are_the_environments_tools(
    server, client, release
):
    with vf.written_for(release):
        env = vf.SingleTurnEnv(dataset=rows(), oai_tools=[ECHO_TOOL])
    state = await env.init_state(env.get_eval_dataset()[0], client, "m")
    if env.release.typed_messages:
        assert [t.name for t in state["tool_defs"]] == ["echo"]
        assert isinstance(state["tool_defs"][0], vf.Tool)
    else:
        assert state["oai_tools"] == [ECHO_TOOL]
    seen: list[dict] = []
    server.set_handler(lambda request: seen.append(request) or Reply(content="q0"))
    await env.evaluate(client, "m")
    assert [t["function"]["name"] for t in seen[0]["tools"]] == ["echo"]  # sent to the model


@pytest.mark.parametrize("release", RELEASES)
async def test_oai_tools_in_a_rows_info_are_that_rows_tools(server, client, release):
    with vf.written_for(release):
        env = vf.SingleTurnEnv(dataset=rows())
    row = {"prompt": [{"role": "user", "content": "hi"}], "info": {"oai_tools": [ECHO_TOOL]}}
    state = await env.init_state(row, client, "m")
    if env.release.typed_messages:
        assert [t.name for t in state["tool_defs"]] == ["echo"]
    else:
        assert state["oai_tools"] == [ECHO_TOOL]


async def test_an_unreadable_input_is_an_error_on_its_rollout_not_a_dead_run(server, client):
    env = vf.SingleTurnEnv(dataset=rows())
    bad = {"prompt": [{"role": "user", "content": "hi"}], "task": "[1, 2]", "example_id": 0}
    out = await env.generate([bad, dict(bad, task="fine", example_id=1)], client, "m")
    first, second = out.state
    assert first["error"] is not None and "task payload must be a JSON object" in str(
        first["error"]
    )
    assert second["error"] is None


def ambient_release(**_) -> float:
    """What code a reward function calls sees as the release (``vf.MathRubric()`` built
    lazily, a tool schema): the release of the environment being scored, as a number."""
    return float(str(vf.classic.current()).replace(".", ""))


async def test_two_environments_of_different_releases_in_one_process_keep_their_own(
    server, client
):
    with vf.written_for("0.1.8"):
        old = vf.SingleTurnEnv(dataset=rows(3), rubric=vf.Rubric(funcs=[ambient_release]))
    new = vf.SingleTurnEnv(dataset=rows(3), rubric=vf.Rubric(funcs=[ambient_release]))
    old_out, new_out = await asyncio.gather(
        old.evaluate(client, "m", rollouts_per_example=2),
        new.evaluate(client, "m", rollouts_per_example=2),
    )
    assert old_out.metrics["ambient_release"] == [18.0] * 6
    assert new_out.metrics["ambient_release"] == [31.0] * 6
    assert set(old_out.metrics) == {"ambient_release"}  # 0.1.8: no monitor metrics
    assert set(new_out.metrics) == {"ambient_release", "num_turns"}
    assert isinstance(old_out.state[0]["completion"][0], dict)
    assert isinstance(new_out.state[0]["completion"][0], vf.AssistantMessage)
    assert old_out["metadata"]["release"] == "0.1.8" and new_out["metadata"]["release"] == "0.3.1"


async def test_an_env_group_runs_each_member_as_its_own_release(server, client):
    with vf.written_for("0.1.8"):
        old = vf.SingleTurnEnv(dataset=rows(2), rubric=vf.Rubric(funcs=[ambient_release]))
        group = vf.EnvGroup(envs=[old, vf.SingleTurnEnv(dataset=rows(2))], env_names=["a", "b"])
    with vf.written_for("0.1.14"):
        newer = vf.SingleTurnEnv(dataset=rows(2), rubric=vf.Rubric(funcs=[ambient_release]))
        group_new = vf.EnvGroup(envs=[newer, old], env_names=["new", "old"])
    out = await group.evaluate(client, "m")
    assert out["metadata"]["member_releases"] == {"a": "0.1.8", "b": "0.1.8"}
    assert out.metrics["ambient_release"] == [18.0, 18.0, 0.0, 0.0]
    out = await group_new.evaluate(client, "m")  # 0.1.14 groups route by info: each member scores
    assert out["metadata"]["member_releases"] == {"new": "0.1.14", "old": "0.1.8"}
    by_member = {s["info"]["env_id"]: s["metrics"]["ambient_release"] for s in out.state}
    assert by_member == {"new": 114.0, "old": 18.0}
