"""verifiers.v1's judges against a real OpenAI-compatible endpoint (the scripted server on
loopback): the reference and rubric judges plugged into a task config by id, their calls
recorded on the trace, and a judge's unreadable reply an error of the rollout, not a zero."""

from __future__ import annotations

import json

import pytest

import verifiers.v1 as vf
from verifiers.testing import ModelServer
from verifiers.testing.server import last_user_text
from verifiers.v1.graph import MessageNode
from verifiers.v1.types import AssistantMessage, UserMessage

RUBRIC = """
[[criteria]]
name = "names_the_city"
text = "The response names Paris."
weight = 3.0

[[criteria]]
name = "cites_a_source"
text = "The response cites a source."
"""


class QAData(vf.TaskData):
    answer: str = ""


class QATask(vf.Task[QAData]):
    @vf.reward
    def nonempty(self, trace: vf.Trace) -> float:
        return float(bool(trace.last_reply))


def trace_of(reply: str) -> vf.Trace:
    return vf.Trace(
        agent=vf.AgentInfo(config=vf.AgentConfig()),
        task=vf.TraceTask(
            type="QATask", data=QAData(idx=0, prompt="Capital of France?", answer="Paris")
        ),
        nodes=[
            MessageNode(
                parent=None, message=UserMessage(content="Capital of France?"), sampled=False
            ),
            MessageNode(parent=0, message=AssistantMessage(content=reply), sampled=True),
        ],
    )


def grader(request: dict) -> str:
    """Yes when the response block names Paris; a rubric prompt gets one verdict a criterion."""
    prompt = last_user_text(request)
    response = prompt.split("Response:", 1)[1].split("Criteria:")[0]
    if '"verdicts"' in prompt:
        verdicts = [
            {"name": name, "reason": "read it", "verdict": "yes" if "Paris" in response else "no"}
            for name in ("names_the_city", "cites_a_source")
        ]
        verdicts[1]["verdict"] = "no"
        return "Here you go: " + json.dumps({"verdicts": verdicts})
    return "Final verdict: yes" if "Paris" in response.split("Respond")[0] else "no"


def task_config(server: ModelServer, tmp_path, **extra) -> vf.TaskConfig:
    rubric = tmp_path / "rubric.toml"
    rubric.write_text(RUBRIC)
    endpoint = {"base_url": server.base_url, "model": server.model_name}
    return vf.TaskConfig.model_validate(
        {
            "judges": [
                {"id": "reference", "weight": 0.5, **endpoint},
                {"id": "rubric", "path": str(rubric), "name": "quality", **endpoint},
            ],
            **extra,
        }
    )


async def test_plugged_judges_score_against_an_endpoint(server: ModelServer, tmp_path):
    server.set_handler(grader)
    config = task_config(server, tmp_path)
    trace = trace_of("It is Paris.")
    await QATask(trace.task.data, config).score(trace)
    assert trace.rewards["nonempty"] == vf.Reward(score=1.0)
    assert trace.rewards["reference"] == vf.Reward(score=1.0, weight=0.5)
    assert trace.rewards["quality"].score == pytest.approx(0.75)
    assert trace.metrics == {"quality/names_the_city": 1.0, "quality/cites_a_source": 0.0}
    assert len(trace.info["judge"]) == 2 and len(trace.extra_usage) == 2
    assert [r["model"] for r in server.requests] == [server.model_name] * 2
    assert trace.reward == pytest.approx(1.0 + 0.5 * 1.0 + 0.75)

    wrong = trace_of("It is Rome.")
    await QATask(wrong.task.data, config).score(wrong)
    assert wrong.rewards["reference"].score == 0.0
    assert wrong.rewards["quality"].score == 0.0


async def test_an_unreadable_verdict_errors_the_rollout(server: ModelServer, tmp_path):
    server.set_handler(lambda request: "I would rather not say.")
    trace = trace_of("It is Paris.")
    with pytest.raises(vf.TaskError, match="verdict"):
        await QATask(trace.task.data, task_config(server, tmp_path)).score(trace)
    assert trace.rewards["reference"] is None or trace.rewards["quality"] is None
    assert trace.info["judge"]  # the calls were paid for: recorded all the same


async def test_a_failing_endpoint_errors_the_rollout(tmp_path):
    config = vf.TaskConfig.model_validate(
        {"judges": [{"id": "reference", "base_url": "http://127.0.0.1:9/v1"}]}
    )
    trace = trace_of("It is Paris.")
    with pytest.raises(vf.TaskError, match="scoring"):
        await QATask(trace.task.data, config).score(trace)
    assert trace.rewards["reference"] is None


def test_an_unknown_judge_id_names_what_to_install():
    with pytest.raises(ValueError, match="no_such_judge"):
        vf.TaskConfig.model_validate({"judges": [{"id": "no-such-judge"}]})
