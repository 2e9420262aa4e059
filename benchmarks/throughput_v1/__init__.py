"""The v1 taskset ``eval_throughput.py`` runs beside its classic workloads (id
``throughput-v1``, importable because the benchmark's folder is first on ``sys.path``): the
same prompts and answers as the classic rows, the same reward (exact match, weight 1) and
async length metric, and for the tool workload the same ``add`` tool offered bare, so both
paths send the same requests and make the same model and tool calls per rollout.

A package folder rather than a ``benchmarks/*.py`` file: every such file is a benchmark that
the stop-cleanly test runs."""

from __future__ import annotations

from collections.abc import Iterator

import verifiers.v1 as vf


class AddToolset(vf.Toolset[vf.ToolsetConfig, vf.State]):
    TOOL_PREFIX = None  # offered as ``add``, as the classic ``ToolEnv`` names the function

    @vf.tool
    def add(self, a: int, b: int) -> str:
        """Add two integers."""
        return str(a + b)


class BenchData(vf.TaskData):
    answer: str


class BenchTaskConfig(vf.TaskConfig):
    tools: bool = False
    """Offer the ``add`` tool (the tool workload)."""


class BenchTask(vf.Task[BenchData, vf.State, BenchTaskConfig]):
    @classmethod
    def toolsets(cls, config: BenchTaskConfig) -> list[AddToolset]:
        # colocated: in the rollout's process, as classic ToolEnv calls its function (a
        # served toolset would add an MCP server process per rollout to the v1 side)
        return [AddToolset(vf.ToolsetConfig(colocated=True))] if config.tools else []

    @vf.reward
    def exact(self, trace: vf.Trace) -> float:
        return float(trace.last_reply == self.data.answer)

    @vf.metric
    async def length(self, trace: vf.Trace) -> float:
        return float(len(trace.last_reply or ""))


class BenchConfig(vf.TasksetConfig):
    task: BenchTaskConfig = BenchTaskConfig()
    kind: str = "single"
    """The workload whose prompts to make (``rows`` in ``eval_throughput.py``)."""
    n: int = 100


class BenchTaskset(vf.Taskset[BenchTask, BenchConfig]):
    def load(self) -> Iterator[BenchTask]:
        from eval_throughput import rows  # the classic workload's rows, one definition

        for i, row in enumerate(rows(self.config.kind, self.config.n)):
            data = BenchData(idx=i, prompt=row["question"], answer=row["answer"])
            yield BenchTask(data, self.config.task)


__all__ = ["BenchTaskset"]
