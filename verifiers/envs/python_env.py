"""PythonEnv: a persistent Python REPL per rollout, in a sandbox.

Variables, imports and functions defined in one call are there in the next call of the same
rollout, never in another rollout's (each has its own sandbox). A snippet that runs past the
time limit is killed and the REPL restarts empty, which the model is told.
"""

from __future__ import annotations

from typing import Any

from verifiers.envs.sandbox_env import SandboxEnv

DEFAULT_PYTHON_PROMPT = """You have a `python` tool: a persistent Python REPL. Variables and imports are kept between calls.
Print what you want to see. When you know the final answer, reply without calling a tool."""


class PythonEnv(SandboxEnv):
    def __init__(self, system_prompt: str | None = DEFAULT_PYTHON_PROMPT, **kwargs: Any) -> None:
        super().__init__(system_prompt=system_prompt, **kwargs)
        self.remove_tool("bash")
        self.add_tool(self.python, args_to_skip=["sandbox_id"])

    async def python(self, code: str, sandbox_id: str) -> str:
        """Run Python code in a persistent REPL and return what it printed.

        Args:
            code: Python source to execute; state persists between calls.
        """
        result = await self.in_sandbox(sandbox_id, lambda box: box.run_repl(code))
        return result.output
