"""Multi-turn tool-use rollouts become training samples with exactly the model's tokens trained.

A real ``calculator`` ToolEnv rollout (three model turns: two calculator calls, then the answer)
against a loopback OpenAI-compatible server that renders each prompt with a real tokenizer and
a Hermes-style chat template and returns the token ids of what it "sampled", as vf-serve does.
The sample must be the whole conversation as the template renders it, with the loss mask 1 on
exactly the sampled tokens of each turn and 0 on every prompt, tool-result and template token.
"""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("torch")

from verifiers.testing import ModelServer, Reply

TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}"
    "{% for c in m.get('tool_calls') or [] %}<tool_call>{\"name\": \"{{ c['function']['name'] }}\", "
    "\"arguments\": {{ c['function']['arguments'] | tojson }}}</tool_call>{% endfor %}<eos>\n"
    "{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}"
)
CALL = '<tool_call>{{"name": "calculate", "arguments": {{"expression": "{}"}}}}</tool_call>'
TURNS = [CALL.format("37 * 41"), CALL.format("1517 + 12"), "The answer is 1529"]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from support.toy import make_tiny_policy
    from transformers import AutoTokenizer

    directory = make_tiny_policy(tmp_path_factory.mktemp("policy"))
    tok = AutoTokenizer.from_pretrained(directory)
    tok.chat_template = TEMPLATE
    return tok


def serving(tokenizer, sampled: list[list[int]]):
    """A handler that answers as an inference server would: the prompt rendered by the chat
    template, the next scripted reply as the sampled text (ending in <eos>), its token ids and
    logprobs, and the tool calls parsed out of it."""
    from verifiers.rl.algorithm.chat_tokens import template_messages
    from verifiers.serve.app import parse_tool_calls

    def handle(request):
        messages = template_messages(request["messages"])
        text = tokenizer.apply_chat_template(
            messages, tools=request.get("tools"), add_generation_prompt=True, tokenize=False
        )
        prompt_ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
        reply = TURNS[sum(m["role"] == "assistant" for m in messages[last_user:])]
        ids = tokenizer(reply + "<eos>", add_special_tokens=False)["input_ids"]
        sampled.append(ids)
        content, calls = parse_tool_calls(reply)
        message = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = calls
        body = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": "policy",
            "policy_version": 5,  # as vf-serve reports the weights it serves
            "prompt_token_ids": prompt_ids,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if calls else "stop",
                    "token_ids": ids,
                    "logprobs": {
                        "content": [
                            {
                                "token": f"token_id:{t}",
                                "logprob": -0.1 * (i + 1),
                                "top_logprobs": [],
                            }
                            for i, t in enumerate(ids)
                        ]
                    },
                }
            ],
            "usage": {"prompt_tokens": len(prompt_ids), "completion_tokens": len(ids)},
        }
        return Reply(raw_body=json.dumps(body).encode())

    return handle


def three_turn_rollout(env, rows, handler) -> dict:
    """One rollout of ``rows`` against the token-serving ``handler``: a tool call, another, then
    the answer, rewarded 1."""
    from verifiers.clients import OpenAICompatibleClient

    with ModelServer(handler) as server:
        client = OpenAICompatibleClient(server.base_url)

        async def rollout():
            try:
                return await env.generate(
                    rows,
                    client,
                    "policy",
                    sampling_args={"logprobs": True, "extra_body": {"return_token_ids": True}},
                    rollouts_per_example=1,
                )
            finally:
                await client.aclose()

        out = asyncio.run(rollout())
    (state,) = out.state
    assert state.get("error") is None and state["reward"] == pytest.approx(1.0)
    roles = [m["role"] for m in state["completion"]]
    assert roles == ["assistant", "tool", "assistant", "tool", "assistant"]
    return state


def test_a_three_turn_tool_rollout_trains_exactly_the_models_tokens(tokenizer):
    import verifiers as vf
    from verifiers.rl.algorithm.batching import samples_from_state
    from verifiers.rl.algorithm.chat_tokens import render_ids, template_messages

    env = vf.load_environment("calculator")
    row = {"question": "What is 37 * 41 + 12?", "answer": "1529"}
    sampled: list[list[int]] = []
    state = three_turn_rollout(env, [row], serving(tokenizer, sampled))
    assert [m["content"] for m in state["completion"] if m["role"] == "tool"] == ["1517", "1529"]
    (sample,) = samples_from_state(state, advantage=0.7, policy_version=3)

    # the whole conversation as the template renders it (the final "\n" follows the last <eos>)
    conversation = template_messages([*state["prompt"], *state["completion"]])
    assert sample.input_ids == render_ids(tokenizer, conversation, generation_prompt=False)[:-1]
    # mask 1 on exactly the sampled tokens, found in order in the conversation
    expected = [0] * len(sample.input_ids)
    logprobs = [0.0] * len(sample.input_ids)
    cursor = 0
    for ids in sampled:
        start = next(
            i
            for i in range(cursor, len(sample.input_ids))
            if sample.input_ids[i : i + len(ids)] == ids
        )
        expected[start : start + len(ids)] = [1] * len(ids)
        logprobs[start : start + len(ids)] = [-0.1 * (i + 1) for i in range(len(ids))]
        cursor = start + len(ids)
    assert len(sampled) == 3
    assert sample.loss_mask == expected
    assert sample.old_logprobs == pytest.approx(logprobs)
    # the tool results, the roles and the template's separators are context, never trained
    trained = [t for t, m in zip(sample.input_ids, sample.loss_mask, strict=True) if m]
    assert trained == [t for ids in sampled for t in ids]
    text = [tokenizer.decode([t]) for t in sample.input_ids]  # (the toy vocabulary has no {})
    context = "".join(t for t, m in zip(text, sample.loss_mask, strict=True) if not m)
    assert "tool: 1517<eos>" in context and "tool: 1529<eos>" in context
    assert sample.advantage == 0.7 and sample.policy_version == 3


CALCULATE_V1 = '''
import verifiers.v1 as vf


class Calculator(vf.Toolset):
    TOOL_PREFIX = None  # offered bare: ``calculate``

    @vf.tool
    def calculate(self, expression: str) -> str:
        """Evaluate an arithmetic expression."""
        a, op, b = expression.split()
        return str(int(a) * int(b) if op == "*" else int(a) + int(b))


class SumData(vf.TaskData):
    answer: str


class SumTask(vf.Task[SumData]):
    @classmethod
    def toolsets(cls, config):
        return [Calculator()]

    @vf.reward
    def correct(self, trace) -> float:
        return float(self.data.answer in trace.last_reply)


class SumTaskset(vf.Taskset[SumTask, vf.TasksetConfig]):
    def load(self):
        yield SumTask(SumData(idx=0, prompt="What is 37 * 41 + 12?", answer="1529"), self.config.task)


__all__ = ["SumTaskset"]
'''


def test_a_v1_tool_rollout_trains_exactly_the_models_tokens(tokenizer, tmp_path, monkeypatch):
    """The same three-turn rollout played by a v1 taskset (its Python toolset, the ``null``
    harness): the token ids, logprobs and policy version the server sent for each model call
    come back off the trace as the rollout's trajectory, one sample whose loss mask is 1 on
    exactly the sampled tokens of each turn, as for the classic environment above."""
    import os
    import sys

    import verifiers as vf
    from verifiers.rl.algorithm.batching import samples_from_state
    from verifiers.rl.algorithm.chat_tokens import render_ids, template_messages

    (tmp_path / "calculate_v1").mkdir()
    (tmp_path / "calculate_v1" / "__init__.py").write_text(CALCULATE_V1)
    monkeypatch.syspath_prepend(str(tmp_path))  # and for the toolset's server process:
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}:{os.environ.get('PYTHONPATH', '')}")
    env = vf.load_environment("calculate-v1")
    sys.modules.pop("calculate_v1", None)
    sampled: list[list[int]] = []
    state = three_turn_rollout(env, env.dataset_rows("train"), serving(tokenizer, sampled))
    assert len(state["trajectory"]) == 3 and len(sampled) == 3
    # each call's policy version, what the trainer counts staleness by
    assert [step["response"]["policy_version"] for step in state["trajectory"]] == [5, 5, 5]
    (sample,) = samples_from_state(state, advantage=0.7, policy_version=3)

    conversation = template_messages([*state["prompt"], *state["completion"]])
    assert sample.input_ids == render_ids(tokenizer, conversation, generation_prompt=False)[:-1]
    trained = [t for t, m in zip(sample.input_ids, sample.loss_mask, strict=True) if m]
    assert trained == [t for ids in sampled for t in ids]
    logprobs = [lp for lp, m in zip(sample.old_logprobs, sample.loss_mask, strict=True) if m]
    assert logprobs == pytest.approx([-0.1 * (i + 1) for ids in sampled for i in range(len(ids))])
    text = [tokenizer.decode([t]) for t in sample.input_ids]
    context = "".join(t for t, m in zip(text, sample.loss_mask, strict=True) if not m)
    assert "tool: 1517<eos>" in context and "tool: 1529<eos>" in context
    assert sample.advantage == 0.7 and sample.policy_version == 3
