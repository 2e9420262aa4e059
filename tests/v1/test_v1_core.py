"""verifiers.v1's task-centric core, as a taskset author and a trainer use it: a taskset
with a reward and a metric scored end to end on a trace, its views, the trace graph, and an
episode's round trip through JSON read back with no taskset importable (WireEpisode)."""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import sys
from typing import Literal

import pytest
from pydantic import BaseModel

import verifiers.v1 as vf
from verifiers.messages.convert import wire_tool
from verifiers.tools import tool_spec
from verifiers.v1 import graph
from verifiers.v1.chat import tool_to_wire


class QAData(vf.TaskData):
    answer: str


class QATask(vf.Task[QAData, vf.State, vf.TaskConfig]):
    @vf.reward(weight=2.0)
    async def correct(self, trace: vf.Trace) -> float:
        return float(trace.last_reply == self.data.answer)

    @vf.metric
    def reply_length(self, trace: vf.Trace, task: QAData) -> float:  # a sync hook, by name
        return float(len(trace.last_reply))

    @vf.reward
    async def needs_a_box(self, trace: vf.Trace, runtime) -> float:  # skipped offline
        return 1.0


class QATaskset(vf.Taskset[QATask, vf.TasksetConfig]):
    def load(self):
        for i in range(4):
            yield QATask(QAData(idx=i, prompt=f"What is {i} + {i}?", answer=str(2 * i)))


class Endless(vf.Taskset[QATask, vf.TasksetConfig]):
    INFINITE = True

    def load(self):
        for i in itertools.count():
            yield QATask(QAData(idx=i, prompt="?", answer=""))


def rollout(task: QATask, reply: str) -> vf.Trace:
    """A one-turn rollout recorded as the runtime would: prompt, sampled reply, tokens."""
    trace = vf.Trace(
        agent=vf.AgentInfo(config=vf.AgentConfig()),
        task=vf.TraceTask(type=type(task).__name__, data=task.data),
    )
    turn = graph.prepare_turn(trace, [vf.UserMessage(content=task.data.prompt_text)])
    node = turn.commit(
        vf.Response(
            id="r",
            created=0,
            model="m",
            message=vf.AssistantMessage(content=reply),
            finish_reason="stop",
            tokens=vf.TurnTokens(
                prompt_ids=[1, 2, 3], completion_ids=[7], completion_logprobs=[-0.5]
            ),
        )
    )
    trace.calls.append(vf.ModelCall(node=node, model="m", finish_reason="stop"))
    trace.ok = True
    trace.stop("done")
    return trace


async def test_a_taskset_scores_its_rollouts_with_reward_and_metric():
    tasks = list(QATaskset(vf.TasksetConfig()))
    assert QATaskset.task_type() is QATask and QATask.data_type() is QAData
    right, wrong = rollout(tasks[2], "4"), rollout(tasks[3], "5")
    for task, trace in ((tasks[2], right), (tasks[3], wrong)):
        await task.score(trace)
    assert right.reward == 2.0 and right.rewards["correct"] == vf.Reward(score=1.0, weight=2.0)
    assert wrong.reward == 0.0
    assert right.metrics == {"reply_length": 1.0}
    assert "needs_a_box" not in right.rewards  # it needs a runtime; scoring offline skips it
    branch = right.branches[0]
    assert branch.token_ids == [1, 2, 3, 7] and branch.sampled_mask == [False] * 3 + [True]
    assert branch.logprobs == [0.0, 0.0, 0.0, -0.5]


async def test_a_failing_reward_is_a_task_error_and_leaves_its_score_unset():
    class Broken(QATask):
        @vf.reward
        async def correct(self, trace: vf.Trace) -> float:
            raise KeyError("answer")

    task = Broken(QAData(idx=0, prompt="q", answer="a"))
    trace = rollout(task, "a")
    with pytest.raises(vf.TaskError, match="KeyError"):
        await task.score(trace)
    assert trace.rewards["correct"] is None and trace.reward == 0.0


def test_views_are_lazy_and_leave_the_taskset_alone():
    endless = Endless(vf.TasksetConfig())
    with pytest.raises(ValueError, match="infinite"):
        endless.shuffle()
    head = endless.head(5).shuffle(seed=3)
    assert sorted(t.data.idx for t in head) == [0, 1, 2, 3, 4]
    assert endless.INFINITE and not head.INFINITE
    assert [t.data.idx for t in endless.head(2)] == [0, 1]


def test_task_keys_are_stable_content_hashes():
    a = QAData(idx=0, prompt="q", answer="a")
    assert vf.task_key(a) == vf.task_key(QAData(answer="a", prompt="q", idx=0))
    assert vf.task_key(a) == vf.task_key(json.loads(a.model_dump_json(exclude_none=True)))
    assert vf.task_key(a) != vf.task_key(QAData(idx=0, prompt="q", answer="b"))


def test_an_episode_round_trips_as_wire_episode_without_the_taskset(tmp_path):
    task = next(iter(QATaskset(vf.TasksetConfig())))
    trace = rollout(task, "0")
    asyncio.run(task.score(trace))
    trace.metrics.setdefault("unscored", None)
    episode = vf.Episode.of(trace, env="qa")
    record = tmp_path / "episode.json"
    record.write_text(episode.model_dump_json(exclude_none=True))

    # A trainer's process: neither this test module nor QAData can be imported there.
    script = (
        "import json, sys\n"
        "import verifiers.v1 as vf\n"
        "ep = vf.WireEpisode.model_validate_json(open(sys.argv[1]).read())\n"
        "t = ep.traces[0]\n"
        "print(json.dumps({'reward': t.reward, 'answer': t.task.data.model_extra['answer'],"
        " 'type': t.task.type, 'turns': t.num_turns, 'tokens': t.branches[0].token_ids,"
        " 'metrics': t.metrics, 'env': ep.env.id, 'ok': ep.ok}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(record)], capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout) == {
        "reward": 2.0,
        "answer": "0",
        "type": "QATask",
        "turns": 1,
        "tokens": [1, 2, 3, 7],
        "metrics": {"reply_length": 1.0, "unscored": None},
        "env": "qa",
        "ok": True,
    }
    # and back into the typed episode where the taskset is importable
    typed = vf.Episode[QAData, vf.State, vf.AgentConfig].model_validate_json(record.read_text())
    assert isinstance(typed.traces[0].task.data, QAData) and typed.traces[0].reward == 2.0


def test_an_eval_config_naming_an_uninstalled_taskset_reads_loose_and_fails_to_load():
    from verifiers.v1.configs.cli.eval import EvalConfig

    config = EvalConfig.model_validate(
        {
            "env": {
                "taskset": {"id": "no-such-taskset-v1", "difficulty": 3},
                "agent": {"max_turns": 2},
            }
        }
    )
    assert config.env.taskset.model_extra == {"difficulty": 3}
    with pytest.raises(ModuleNotFoundError, match="not installed"):
        vf.load_environment(config.env)
    with pytest.raises(ValueError, match="not an environment id"):
        EvalConfig.model_validate({"env": {"taskset": {"id": "bad id!"}}})


class Paint(BaseModel):
    shade: int


class PaintToolset(vf.Toolset[vf.ToolsetConfig, vf.State]):
    """Tools whose hints are strings at run time (this module has ``from __future__ import
    annotations``) and name types only this module imports."""

    TOOL_PREFIX = "paint"

    @vf.tool
    def pick(self, color: Literal["red", "blue"], paint: Paint, coats: int = 2) -> str:
        """Pick a colour."""
        return f"{color}:{paint.shade}:{coats}"


def test_a_toolset_under_future_annotations_offers_its_real_types_as_the_classic_tool_spec_does():
    [bound] = PaintToolset().tools()
    props = bound.spec.parameters["properties"]
    assert props["color"]["enum"] == ["red", "blue"]
    assert bound.spec.parameters["$defs"]["Paint"]["properties"]["shade"]["type"] == "integer"
    assert (
        bound.spec.parameters["required"] == ["color", "paint"] and props["coats"]["default"] == 2
    )
    result = asyncio.run(bound.call({"color": "red", "paint": {"shade": 3}}, vf.State()))
    assert result == "red:3:2"
    with pytest.raises(ValueError, match="color"):
        asyncio.run(bound.call({"color": "green", "paint": {"shade": 3}}, vf.State()))
    # the classic entry point reads the same signature the same way (its schema is the strict form)
    classic = tool_spec(PaintToolset().pick).schema["function"]["parameters"]
    assert classic["properties"]["color"]["enum"] == ["red", "blue"]
    assert classic["required"] == ["color", "paint", "coats"]
    assert classic["$defs"]["Paint"]["properties"]["shade"]["type"] == "integer"


def test_each_rollouts_toolset_gets_its_own_tool_specs_and_calls_its_own_instance():
    """The schema and validator are built once per tool function; each rollout's toolset still
    gets specs of its own (changing one leaves the next as it was) bound to itself."""
    first, second = PaintToolset(), PaintToolset()
    [a], [b] = first.tools(), second.tools()
    assert a.spec == b.spec and a.spec.parameters is not b.spec.parameters
    a.spec.parameters["properties"]["color"]["enum"].append("green")
    [c] = PaintToolset().tools()
    assert c.spec.parameters["properties"]["color"]["enum"] == ["red", "blue"]
    assert a.toolset is first and b.toolset is second and b.fn.__self__ is second
    assert asyncio.run(b.call({"color": "blue", "paint": {"shade": 1}}, vf.State())) == "blue:1:2"


def test_a_v1_tool_goes_on_the_wire_as_the_classic_clients_send_a_tool():
    spec = vf.Tool(name="t", description="d", parameters={"type": "object"}, strict=True)
    wire = {
        "type": "function",
        "function": {
            "name": "t",
            "description": "d",
            "parameters": {"type": "object"},
            "strict": True,
        },
    }
    assert tool_to_wire(spec) == wire == wire_tool(spec.model_dump())
    loose = spec.model_copy(update={"strict": None})
    assert "strict" not in tool_to_wire(loose)["function"]


def test_import_verifiers_does_not_load_v1():
    code = "import sys, verifiers as vf; vf.Rubric; print(any(m.startswith('verifiers.v1') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_record_shaped_as_upstream_writes_it_reads_back():
    """A trace record with what upstream 0.3 runs write (a remote runtime, a train client,
    a harness's own knobs, a taskset's own fields) loads as a WireEpisode here."""
    record = {
        "id": "e1",
        "env": {"id": "gsm8k-v1"},
        "ok": True,
        "traces": [
            {
                "version": 1,
                "verifiers": {"version": "0.3.0", "commit": "abc"},
                "run": {"type": "train", "id": "r", "step": 3},
                "task": {"type": "GSM8KTask", "data": {"idx": 0, "prompt": "q", "answer": "4"}},
                "agent": {
                    "config": {
                        "harness": {"id": "rlm", "version": "main"},
                        "runtime": {"type": "modal", "gpu": "A100"},
                        "client": {"type": "train", "base_url": "http://x", "multiplex": 8},
                    },
                    "runtime": {"type": "docker", "image": "python:3.11", "id": "c1"},
                    "name": "solver",
                },
                "nodes": [
                    {"parent": None, "message": {"role": "user", "content": "q"}},
                    {
                        "parent": 0,
                        "message": {"role": "assistant", "content": "4"},
                        "sampled": True,
                        "token_ids": [5, 6],
                        "mask": [False, True],
                        "logprobs": [-0.1],
                    },
                ],
                "calls": [{"node": 1, "usage": {"prompt_tokens": 3, "completion_tokens": 1}}],
                "rewards": {"correct": {"score": 1.0, "weight": 1.0}, "judge": None},
                "metrics": {},
                "stop_condition": "done",
                "is_completed": True,
                "ok": True,
            }
        ],
    }
    episode = vf.WireEpisode.model_validate(record)
    trace = episode.traces[0]
    assert trace.reward == 1.0 and trace.num_turns == 1 and episode.num_total_tokens == 4
    assert trace.agent.config.harness is not None
    assert trace.agent.config.harness.model_extra == {"version": "main"}
    assert trace.branches[0].logprobs == [0.0, -0.1]
