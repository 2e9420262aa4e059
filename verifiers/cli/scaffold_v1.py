"""The ``verifiers.v1`` taskset package ``vf-init --v1`` writes: no entry point (loaded by id, as
upstream 0.3 loads one: the module's ``__all__`` names its ``Taskset``), a ``Taskset``, a ``Task``
with a reward and a metric, a ``Toolset`` with one tool; the classic scaffold's pyproject metadata
and eval defaults otherwise (``verifiers.cli.scaffold`` writes it)."""

from __future__ import annotations

V1_PYPROJECT = """[project]
name = "{env_id}"
version = "0.1.0"
description = "{env_id}: a verifiers v1 taskset"
readme = "README.md"
requires-python = ">=3.11"
dependencies = ["verifiers>=0.3.1"]

# No entry point: a v1 taskset is loaded by its id, as the module {module}, whose
# __all__ names its one verifiers.v1 Taskset.

[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[tool.hatch.build.targets.wheel]
packages = ["{module}"]

# Ships this file in the wheel's metadata, where vf-eval reads [tool.verifiers.eval].
[tool.hatch.build.targets.wheel.extra-metadata]
"pyproject.toml" = "pyproject.toml"

[tool.verifiers.eval]
num_examples = 5
rollouts_per_example = 3
max_tokens = 256
"""

V1_README = """# {env_id}

## Overview
What this environment teaches or measures, in one paragraph.

## Task
- **Dataset**: the tasks `{prefix}Taskset.load` builds, each with its `{prefix}Data`.
- **Tools**: `calc_add` (`{prefix}Toolset`), offered to the model on every task.
- **Rewards**: `correct` (weight 1.0): the reply's last number is the sum; metric `used_tool`.

## Arguments
| arg | default | meaning |
| --- | --- | --- |
| `taskset.num_tasks` | 20 | tasks generated |
| `taskset.seed` | 0 | the generator's seed |
| `agent.max_turns` | 10 (vf-eval's) | model calls per rollout |

## Metrics
`reward` (weighted sum), `correct`, `used_tool`.

## Run it
```bash
vf-install {env_id}
vf-eval {env_id} -n 5 -r 3
vf-eval {env_id} -a '{{"env": {{"taskset": {{"num_tasks": 50}}, "agent": {{"max_turns": 4}}}}}}'
```
"""

V1_INIT = '''"""{env_id}: a v1 taskset (``verifiers.v1``). vf-eval loads it by its id: this module's
``__all__`` names its one Taskset."""

from {module}.taskset import {prefix}Taskset

__all__ = ["{prefix}Taskset"]
'''

V1_TOOLSET = '''"""The tools the model may call on every task of the taskset."""

from __future__ import annotations

import verifiers.v1 as vf


class {prefix}Toolset(vf.Toolset[vf.ToolsetConfig]):
    TOOL_PREFIX = "calc"  # the model sees `calc_add`

    @vf.tool
    def add(self, a: int, b: int) -> str:
        """Add two integers and return their sum."""
        return str(a + b)
'''

V1_TASKSET = '''"""{env_id}: add two numbers with a tool (replace with your task).

A task is its data (``{prefix}Data``: the prompt and the answer) and its hooks (rewards,
metrics); the taskset builds the tasks from its config, which ``vf-eval -a`` sets:
``-a '{{"env": {{"taskset": {{"num_tasks": 50}}}}}}'``."""

from __future__ import annotations

import random
import re

import verifiers.v1 as vf

from {module}.toolset import {prefix}Toolset


class {prefix}Data(vf.TaskData):
    """One task's data: the prompt (``vf.TaskData``) and what a right reply holds."""

    answer: str


class {prefix}TaskConfig(vf.TaskConfig):
    # colocated: the tools run beside the harness, in the rollout's env worker; false gives each
    # rollout an MCP server process of its own (upstream's default; ~1.5 s of CPU a rollout)
    tools: vf.ToolsetConfig = vf.ToolsetConfig(colocated=True)


class {prefix}Task(vf.Task[{prefix}Data, vf.State, {prefix}TaskConfig]):
    @classmethod
    def toolsets(cls, config: {prefix}TaskConfig) -> list[vf.Toolset]:
        return [{prefix}Toolset(config.tools)]

    @vf.reward(weight=1.0)
    def correct(self, trace: vf.Trace) -> float:
        numbers = re.findall(r"-?\\d+", trace.last_reply)
        return 1.0 if numbers and numbers[-1] == self.data.answer else 0.0

    @vf.metric
    def used_tool(self, trace: vf.Trace) -> float:
        return 1.0 if trace.tool_messages else 0.0


class {prefix}Config(vf.TasksetConfig):
    num_tasks: int = 20
    """How many tasks to build."""
    seed: int = 0
    """The generator's seed."""
    task: {prefix}TaskConfig = {prefix}TaskConfig()


class {prefix}Taskset(vf.Taskset[{prefix}Task, {prefix}Config]):
    def load(self) -> list[{prefix}Task]:
        rng = random.Random(self.config.seed)
        tasks = []
        for i in range(self.config.num_tasks):
            a, b = rng.randint(1, 500), rng.randint(1, 500)
            prompt = f"What is {{a}} + {{b}}? Use the calc_add tool, then answer with the number."
            data = {prefix}Data(idx=i, prompt=prompt, answer=str(a + b))
            tasks.append({prefix}Task(data, self.config.task))
        return tasks
'''


def v1_files(fields: dict[str, str]) -> dict[str, str]:
    module = fields["module"]
    return {
        f"{module}/__init__.py": V1_INIT.format(**fields),
        f"{module}/taskset.py": V1_TASKSET.format(**fields),
        f"{module}/toolset.py": V1_TOOLSET.format(**fields),
        "pyproject.toml": V1_PYPROJECT.format(**fields),
        "README.md": V1_README.format(**fields),
    }
