"""A v1 taskset with a Python toolset (a tool that adds, one that raises) and the scripted
policy that drives it through a malformed call, the raising tool, the real call and the
answer: the multi-turn tool traces the v1 tests (tests/v1) run vf-eval, vf-data and vf-sft on."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from verifiers.testing import Reply

CALC = '''
import verifiers.v1 as vf


class CalcState(vf.State):
    calls: int = 0


class CalcToolset(vf.Toolset[vf.ToolsetConfig, CalcState]):
    TOOL_PREFIX = "calc"

    @vf.tool
    def add(self, a: int, b: int) -> str:
        """Add two integers."""
        self.state.calls += 1
        return str(a + b)

    @vf.tool
    def explode(self) -> str:
        """Always fails."""
        raise RuntimeError("kaboom")


class CalcData(vf.TaskData):
    answer: str


class CalcTaskConfig(vf.TaskConfig):
    tools: vf.ToolsetConfig = vf.ToolsetConfig()


class CalcTask(vf.Task[CalcData, CalcState, CalcTaskConfig]):
    @classmethod
    def toolsets(cls, config):
        return [CalcToolset(config.tools)]

    @vf.reward
    def correct(self, trace) -> float:
        return float(self.data.answer in trace.last_reply)

    @vf.metric
    def tool_calls(self, trace) -> float:
        return float(trace.state.calls)


class CalcConfig(vf.TasksetConfig):
    task: CalcTaskConfig = CalcTaskConfig()


class CalcTaskset(vf.Taskset[CalcTask, CalcConfig]):
    def load(self):
        for i, (a, b) in enumerate([(2, 3), (10, 20)]):
            yield CalcTask(CalcData(idx=i, prompt=f"What is {a} + {b}? Use the tool.", answer=str(a + b)), self.config.task)


__all__ = ["CalcTaskset"]
'''


def call(name: str, arguments: str, i: int = 0) -> dict:
    return {
        "id": f"call_{i}",
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def calc_policy(request: dict):
    """Malformed call, then a raising tool, then the real call, then the answer."""
    messages = request["messages"]
    tools = [m for m in messages if m["role"] == "tool"]
    prompt = messages[0]["content"]
    a, b = (int(x) for x in prompt.split("What is ")[1].split("?")[0].split(" + "))
    if len(tools) == 0:
        return Reply(tool_calls=[call("calc_add", "{not json", 0)])
    if len(tools) == 1:
        assert tools[0]["content"].startswith("Error: bad arguments")
        return Reply(tool_calls=[call("calc_explode", "{}", 1)])
    if len(tools) == 2:
        assert "kaboom" in tools[1]["content"]
        return Reply(tool_calls=[call("calc_add", json.dumps({"a": a, "b": b}), 2)])
    return f"The answer is {tools[-1]['content']}."


def uppercase_reply(request: dict) -> str:
    """The scripted model of the classic ``uppercase`` env: right on odd-length words."""
    text = request["messages"][-1]["content"].split(": ", 1)[1]
    return text.upper() if len(text) % 2 else "no idea"


def install_calc(root: Path, monkeypatch) -> Iterator[Path]:
    """``calc_v1`` importable by id from ``root`` in this process and in the commands it starts
    (the body of a test file's ``calc_package`` fixture)."""
    (root / "calc_v1").mkdir(parents=True)
    (root / "calc_v1" / "__init__.py").write_text(CALC)
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv("PYTHONPATH", f"{root}:{os.environ.get('PYTHONPATH', '')}")
    yield root
    sys.modules.pop("calc_v1", None)
