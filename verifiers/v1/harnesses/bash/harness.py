"""The ``bash`` harness: upstream's coding-agent loop, the ``null`` harness's chat loop plus a
``bash`` tool (and, unless ``edit = false``, an ``edit`` tool) offered as upstream offers them,
beside the taskset's own tools, under the same system prompt.

Upstream runs that loop as a program inside the runtime; here the loop stays in-process and
only the commands cross into the box: the rollout's ``subprocess`` runtime, a sandbox of
``verifiers.sandbox`` (bwrap or Landlock, no network, its own uid, disk and process budget),
started before the task's setup and destroyed when the rollout ends. Each command runs under
``bash -c`` in the sandbox's work dir (files persist, the shell does not). Its stdout and
stderr come back as upstream returns them, combined; a non-zero exit adds ``[exit code N]``, a
command past ``tool_timeout`` is killed with everything it started and says so, and what the
model sees is cut to ``max_output_chars``. A sandbox that crashes or stops answering raises
``SandboxError``: that rollout ends with the error on its trace, the run goes on."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

from verifiers.sandbox import SandboxLimits
from verifiers.v1.configs.harness import BashHarnessConfig, HarnessConfig
from verifiers.v1.errors import HarnessError, SandboxError
from verifiers.v1.harnesses.null.harness import NullHarness
from verifiers.v1.runtimes.subprocess import SubprocessRuntime
from verifiers.v1.types import Message, SystemMessage, Tool, ToolMessage

if TYPE_CHECKING:
    from verifiers.v1.runtimes import Runtime
    from verifiers.v1.toolset import BoundTool
    from verifiers.v1.trace import Trace

BASH_SYSTEM_PROMPT = (
    "You are a coding agent. You have access to a bash tool for running shell commands."
)
EDIT_SYSTEM_PROMPT = (
    "You also have an edit tool for single-occurrence string replacement in a file."
)

BASH_TOOL = Tool(
    name="bash",
    description="Run a bash command and return its combined stdout and stderr.",
    parameters={
        "type": "object",
        "properties": {"command": {"type": "string", "description": "The bash command to run."}},
        "required": ["command"],
    },
)
EDIT_TOOL = Tool(
    name="edit",
    description="Replace a unique string in a file. old_str must appear exactly once in the file.",
    parameters={
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path (relative to cwd or absolute)."},
            "old_str": {
                "type": "string",
                "description": "Exact string to find (must appear exactly once).",
            },
            "new_str": {"type": "string", "description": "Replacement string."},
        },
        "required": ["path", "old_str", "new_str"],
    },
)


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, keeping its head and tail, saying how much went."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"


class BashHarness(NullHarness):
    config: BashHarnessConfig

    def __init__(self, config: HarnessConfig | None = None) -> None:
        if config is None or not isinstance(config, BashHarnessConfig):
            config = BashHarnessConfig.model_validate(config.model_dump() if config else {})
        if config.search:
            raise HarnessError(
                "the bash harness's search tool needs network access (serper.dev), which this "
                "SDK's sandbox does not give: set --env.agent.harness.search false"
            )
        super().__init__(config)

    def sandbox_limits(self) -> SandboxLimits:
        timeout = self.config.tool_timeout
        return SandboxLimits(
            wall_time_s=timeout,
            cpu_time_s=max(10, math.ceil(timeout)),
            memory_mb=self.config.memory_mb,
            disk_mb=self.config.disk_mb,
        )

    def specs(self, tools: list[BoundTool]) -> list[Tool]:
        own = [BASH_TOOL, EDIT_TOOL] if self.config.edit else [BASH_TOOL]
        return [*own, *super().specs(tools)]

    def opening(self, messages: list[Message]) -> list[Message]:
        """Upstream's coding-agent prompt before the task's own system prompt."""
        intro = BASH_SYSTEM_PROMPT + (f" {EDIT_SYSTEM_PROMPT}" if self.config.edit else "")
        if messages and isinstance(messages[0], SystemMessage):
            first = messages[0]
            if isinstance(first.content, str):
                content = f"{intro}\n\n{first.content}" if first.content else intro
                return [first.model_copy(update={"content": content}), *messages[1:]]
        return [SystemMessage(content=intro), *messages]

    async def run_tool(
        self,
        tools: dict[str, BoundTool],
        call: Any,
        trace: Trace,
        runtime: Runtime | None = None,
    ) -> ToolMessage:
        if call.name not in ("bash", "edit") or (call.name == "edit" and not self.config.edit):
            return await super().run_tool(tools, call, trace, runtime)
        if not isinstance(runtime, SubprocessRuntime):
            raise HarnessError("the bash harness ran without its sandbox")
        try:
            arguments = json.loads(call.arguments or "{}")
        except json.JSONDecodeError as e:
            text = f"error: invalid JSON in tool arguments ({e}); resend the call with valid JSON"
        else:
            if not isinstance(arguments, dict):
                text = (
                    "error: tool arguments must be a JSON object, got "
                    f"{type(arguments).__name__}; resend as an object"
                )
            elif call.name == "bash":
                text = await self.bash(runtime, arguments.get("command"))
            else:
                text = await self.edit(runtime, arguments)
        return ToolMessage(tool_call_id=call.id, name=call.name, content=text)

    async def bash(self, runtime: SubprocessRuntime, command: Any) -> str:
        if not isinstance(command, str) or not command.strip():
            return "error: 'command' must be a non-empty string"
        timeout = self.config.tool_timeout
        result = await runtime.shell(command, timeout)
        text = result.stdout + result.stderr
        if result.timed_out:
            text += f"\n[timed out after {timeout:g} s: the command was killed]"
        elif result.exit_code:
            text += f"\n[exit code {result.exit_code}]"
        return clip(text, self.config.max_output_chars)

    async def edit(self, runtime: SubprocessRuntime, arguments: dict[str, Any]) -> str:
        """Upstream's ``edit``, done through the sandbox's own file reads and writes (so a path
        outside its work dir is refused there)."""
        path, old, new = (arguments.get(k) for k in ("path", "old_str", "new_str"))
        if not isinstance(path, str) or not path:
            return "error: 'path' is required"
        if not isinstance(old, str) or not isinstance(new, str):
            return "error: 'old_str' and 'new_str' must be strings"
        if not old:
            return "error: 'old_str' must be a non-empty string"
        if path.startswith("/workspace/"):
            path = path.removeprefix("/workspace/")
        try:
            content = (await runtime.read(path)).decode()
        except (SandboxError, UnicodeDecodeError) as e:
            return f"error: could not read {path}: {e}"
        count = content.count(old)
        if count != 1:
            return f"error: old_str must appear exactly once in {path} (found {count})"
        try:
            await runtime.write(path, content.replace(old, new, 1).encode())
        except SandboxError as e:
            return f"error: could not write {path}: {e}"
        return f"Edited {path}"
