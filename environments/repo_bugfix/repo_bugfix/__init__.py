"""repo-bugfix: fix a bug in a tiny repository with bash and file-editing tools, over several turns.

Each rollout gets a sandbox holding one repository (``tasks.py``): a package with a bug and a
unittest file whose test fails because of it. The model explores and edits with ``bash``,
``read_file``, ``write_file`` and ``replace_in_file``, runs the tests itself, and says when it is
done. After the episode the package's module is copied out of the sandbox (only it: not the
tests, not anything else the model wrote), and graded in a fresh sandbox by checks whose
expected values come from the fixed module, held here (``verifiers.rubrics.sandbox_checks``).
Editing or deleting the tests, writing a report, patching unittest, or anything else done
inside the episode's sandbox therefore cannot change the reward: the grader never reads it.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import verifiers as vf
from repo_bugfix.tasks import TASKS, Task
from verifiers.rubrics.sandbox_checks import SandboxChecks

BY_ID: dict[str, Task] = {t.id: t for t in TASKS}
MAX_SOURCE_BYTES = 200_000

SYSTEM_PROMPT = """You are fixing a bug in a small Python repository, which is in your current directory.
Use the tools to look around, edit files and run the tests (`python3 -m unittest -v`).
Change the package's code, not the tests. When the tests pass, reply with a short summary and no tool call."""


def expected_values(task: Task) -> list[Any]:
    """The checks evaluated against the fixed module, on the host (trusted code)."""
    namespace: dict[str, Any] = {"__name__": f"{task.package}.core"}
    exec(compile(task.fixed, task.module_path, "exec"), namespace)
    return [json.loads(json.dumps(eval(check, namespace))) for check in task.checks]


def make_rows() -> list[dict[str, Any]]:
    return [
        {
            "question": f"Issue: {task.issue}\nThe failing test is in {task.test_path}. Fix the bug.",
            "answer": task.id,
            "info": {"repo": task.id},
        }
        for task in TASKS
    ]


class RepoBugfixEnv(vf.SandboxEnv):
    """SandboxEnv with file tools; the repository is written in at setup and its module copied
    out at cleanup, before the sandbox is destroyed."""

    def __init__(self, checks: SandboxChecks, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.checks = checks
        for tool in (self.read_file, self.write_file, self.replace_in_file):
            self.add_tool(tool, args_to_skip=["sandbox_id"])

    def update_tool_args(self, tool_name, tool_args, messages, state, **kwargs) -> dict[str, Any]:
        return {**tool_args, "sandbox_id": state["sandbox_id"]}

    async def setup_state(self, state: vf.State, **kwargs: Any) -> vf.State:
        state = await super().setup_state(state, **kwargs)
        task = BY_ID[state["info"]["repo"]]
        box = await self.sandbox(state["sandbox_id"])
        for path, text in task.files().items():
            await box.upload(path, text.encode())
        return state

    async def read_file(self, path: str, sandbox_id: str) -> str:
        """Read a text file of the repository.

        Args:
            path: The file's path, relative to the repository root.
        """
        data = await self.in_sandbox(sandbox_id, lambda box: box.download(path))
        return data.decode(errors="replace")

    async def write_file(self, path: str, content: str, sandbox_id: str) -> str:
        """Create or overwrite a file with the given content.

        Args:
            path: The file's path, relative to the repository root.
            content: The whole new content of the file.
        """
        await self._write(sandbox_id, path, content)
        return f"wrote {len(content)} characters to {path}"

    async def replace_in_file(self, path: str, old: str, new: str, sandbox_id: str) -> str:
        """Replace one exact occurrence of a piece of text in a file.

        Args:
            path: The file's path, relative to the repository root.
            old: The exact text to replace; it must occur exactly once.
            new: The text to put in its place.
        """
        text = (await self.in_sandbox(sandbox_id, lambda box: box.download(path))).decode()
        count = text.count(old)
        if count != 1:
            return f"Error: the text occurs {count} times in {path}; give a piece that occurs once"
        await self._write(sandbox_id, path, text.replace(old, new))
        return f"replaced 1 occurrence in {path}"

    async def _write(self, sandbox_id: str, path: str, content: str) -> None:
        """Write a file, then drop bytecode caches: Python trusts a .pyc whose source kept its
        size and mtime second, so a one-character fix made within a second of the last test run
        would otherwise not be seen."""

        async def write(box: Any) -> None:
            await box.upload(path, content.encode())
            await box.run_shell("find . -name __pycache__ -prune -exec rm -rf {} +")

        await self.in_sandbox(sandbox_id, write)

    @vf.cleanup(priority=50)
    async def collect_module(self, state: vf.State) -> None:
        """Copy the package's module out as plain data (the grader's only input from the episode),
        and note whether the tests were changed (a metric, not a reward)."""
        task = BY_ID[state["info"]["repo"]]
        if "sandbox_id" not in state:
            return
        try:
            box = await self.sandbox(state["sandbox_id"])
            module = await box.download(task.module_path)
            test = await box.download(task.test_path)
        except (vf.SandboxError, OSError, KeyError) as exc:
            state["final_module"] = None
            state["collect_error"] = f"{type(exc).__name__}: {exc}"
            return
        state["final_module"] = module[:MAX_SOURCE_BYTES].decode(errors="replace")
        state["tests_edited"] = test.decode(errors="replace") != task.test

    async def end_run(self) -> None:
        await self.checks.close()
        await super().end_run()


async def grade(checks: SandboxChecks, task: Task, module: str | None) -> dict[str, Any]:
    """The task's checks against the model's module, in a fresh sandbox with the pristine package."""
    expected = expected_values(task)
    if module is None:
        return {"passed": [False] * len(expected), "errors": ["the module could not be read"], "timed_out": False}
    files = {f"{task.package}/__init__.py": task.files()[f"{task.package}/__init__.py"], task.module_path: module}
    setup = f"import sys\nsys.path.insert(0, '.')\nfrom {task.package}.core import *\n"
    run = await checks.run(setup=setup, expressions=list(task.checks), files=files)
    return run.judge(expected)


def load_environment(max_turns: int = 8, sandbox_mode: str = "auto") -> vf.Environment:
    """
    Args:
        max_turns: model turns per rollout (tool calls included).
        sandbox_mode: isolation for the episode and the grader: auto, bwrap or landlock.
    """
    checks = SandboxChecks(sandbox_mode)  # refuses "unsafe": the model's code is untrusted

    async def checks_passed(states) -> list[float]:
        """Grade a group at once; each rollout's report is kept in its state."""

        async def one(state) -> float:
            task = BY_ID[state["info"]["repo"]]
            try:
                report = await grade(checks, task, state.get("final_module"))
            except vf.SandboxError as exc:  # the grader's own failure, kept apart from the model's
                report = {"passed": [False], "errors": [], "grader_error": str(exc)}
            state["check_report"] = report
            return sum(report["passed"]) / len(report["passed"])

        return list(await asyncio.gather(*(one(s) for s in states)))

    def fixed(state) -> float:
        """1 when every check passes."""
        report = state.get("check_report") or {}
        return float(bool(report.get("passed")) and all(report["passed"]))

    def tests_edited(state) -> float:
        return float(bool(state.get("tests_edited")))

    rubric = vf.Rubric(funcs=[checks_passed, fixed, tests_edited], weights=[0.5, 0.5, 0.0])
    rows = make_rows()
    return RepoBugfixEnv(
        checks=checks,
        dataset=rows,
        eval_dataset=rows,
        system_prompt=SYSTEM_PROMPT,
        rubric=rubric,
        max_turns=max_turns,
        sandbox_mode=sandbox_mode,
        pool_size=2,
    )
