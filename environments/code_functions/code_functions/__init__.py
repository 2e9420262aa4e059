"""code-functions: write a Python function from its spec; hidden unit tests decide the reward.

127 problems (``problems.py``: a reference solution per problem, whose signature and docstring
are the spec). The model sees the spec and two worked examples, may try code in a Python REPL of
its own (``vf.PythonEnv``), and answers with the function in a ```python block. After the
episode, ten hidden tests per problem run in a fresh sandbox that reports only what each call
returned; the outputs are compared here with the reference's, so nothing the code prints,
patches or writes can pass a test it fails (``verifiers.rubrics.sandbox_checks``). Reward: half
the fraction of hidden tests passed, half for passing them all.
"""

from __future__ import annotations

import json
import random
import re
import zlib
from functools import cache
from typing import Any

import verifiers as vf
from code_functions.problems import PROBLEMS, Problem
from verifiers.rubrics.sandbox_checks import SandboxChecks

HIDDEN_TESTS = 10
SHOWN_EXAMPLES = 2

SYSTEM_PROMPT = """You write Python functions from a specification.
You have a `python` tool (a REPL in your own sandbox) to try code. When you are done, reply with the complete function in one ```python code block, with any imports it needs."""

_FENCE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.S)


def _normal(value: Any) -> Any:
    return json.loads(json.dumps(value))


@cache
def tests_for(name: str) -> tuple[list[list[Any]], list[Any], list[list[Any]]]:
    """(example inputs, hidden inputs, hidden expected outputs) for a problem: its edge cases
    first, then inputs from its generator, seeded by the problem's name (the same everywhere)."""
    problem = BY_NAME[name]
    rng = random.Random(zlib.crc32(name.encode()))
    inputs: list[list[Any]] = []
    for args in [*problem.edge_cases, *(problem.gen(rng) for _ in range(200))]:
        args = _normal(list(args))
        if args not in inputs:
            inputs.append(args)
        if len(inputs) == SHOWN_EXAMPLES + HIDDEN_TESTS:
            break
    examples, hidden = inputs[:SHOWN_EXAMPLES], inputs[SHOWN_EXAMPLES:]
    return examples, hidden, [_normal(problem.solution(*args)) for args in hidden]


BY_NAME: dict[str, Problem] = {p.name: p for p in PROBLEMS}


def spec(problem: Problem) -> str:
    import inspect

    doc = inspect.getdoc(problem.solution) or ""
    signature = f"def {problem.name}{inspect.signature(problem.solution)}:"
    examples, _, _ = tests_for(problem.name)
    shown = "\n".join(
        f"{problem.name}({', '.join(map(repr, args))}) == {problem.solution(*args)!r}"
        for args in examples
    )
    body = "\n".join(f"    {line}" if line else "" for line in f'"""{doc}"""'.splitlines())
    return f"Write this function:\n\n```python\n{signature}\n{body}\n```\n\nExamples:\n{shown}"


def extract_code(completion: vf.Messages, parser: vf.Parser) -> str:
    """The last ```python block of the last reply (or the whole reply if it has no fence)."""
    replies = parser.get_assistant_messages(completion)
    text = str(replies[-1].get("content") or "") if replies else ""
    blocks = _FENCE.findall(text)
    return blocks[-1] if blocks else (text if "def " in text else "")


def make_rows(problems: list[Problem]) -> list[dict[str, Any]]:
    return [{"question": spec(p), "answer": p.name, "info": {"problem": p.name}} for p in problems]


async def grade(checks: SandboxChecks, source: str, name: str) -> dict[str, Any]:
    """Run a problem's hidden tests against ``source`` in a fresh sandbox; judge them here."""
    _, hidden, expected = tests_for(name)
    if not source.strip():
        return {"passed": [False] * len(hidden), "errors": ["no code in the reply"], "timed_out": False}
    run = await checks.run(setup=source, expressions=[f"{name}(*{args!r})" for args in hidden])
    return run.judge(expected)


class CodeFunctionsEnv(vf.PythonEnv):
    """PythonEnv plus the hidden-test grader, whose sandboxes are closed with the run's."""

    def __init__(self, checks: SandboxChecks, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.checks = checks

    async def end_run(self) -> None:
        await self.checks.close()
        await super().end_run()


def load_environment(
    max_turns: int = 3,
    eval_every: int = 4,
    problems: list[str] | None = None,
    sandbox_mode: str = "auto",
) -> vf.Environment:
    """
    Args:
        max_turns: model turns per rollout (REPL calls included).
        eval_every: every n-th problem is held out for evaluation (the rest train).
        problems: names of problems to hold out instead (the rest train).
        sandbox_mode: isolation for both the REPL and the grader: auto, bwrap or landlock.
    """
    unknown = sorted(set(problems or ()) - set(BY_NAME))
    if unknown:
        raise ValueError(f"unknown problems {unknown}; the names are code_functions.PROBLEMS")
    held_out = set(problems) if problems else {p.name for p in PROBLEMS[::eval_every]}
    checks = SandboxChecks(sandbox_mode)  # refuses "unsafe": the code is untrusted
    parser = vf.Parser()

    async def run_hidden_tests(completions, states) -> list[float]:
        """Grade a group's rollouts at once; each rollout's report is kept in its state."""
        import asyncio

        async def one(completion, state) -> float:
            name = state["info"]["problem"]
            try:
                report = await grade(checks, extract_code(completion, parser), name)
            except vf.SandboxError as exc:  # the grader's own failure, kept apart from the model's
                report = {"passed": [False], "errors": [], "grader_error": str(exc)}
            state["test_report"] = report
            return sum(report["passed"]) / len(report["passed"])

        return list(await asyncio.gather(*(one(c, s) for c, s in zip(completions, states, strict=True))))

    run_hidden_tests.__name__ = "pass_rate"

    def all_passed(state) -> float:
        report = state.get("test_report") or {}
        return float(bool(report.get("passed")) and all(report["passed"]))

    rubric = vf.Rubric(funcs=[run_hidden_tests, all_passed], weights=[0.5, 0.5], parser=parser)
    return CodeFunctionsEnv(
        checks=checks,
        dataset=make_rows([p for p in PROBLEMS if p.name not in held_out]),
        eval_dataset=make_rows([p for p in PROBLEMS if p.name in held_out]),
        system_prompt=SYSTEM_PROMPT,
        parser=parser,
        rubric=rubric,
        max_turns=max_turns,
        sandbox_mode=sandbox_mode,
    )
