"""repo-bugfix: tool-using bug fixes in a sandboxed repository, graded after the episode in a
fresh sandbox that sees only the package's module."""

import pytest

import verifiers as vf
from verifiers.testing import Reply

pytestmark = pytest.mark.usefixtures("no_leftover_sandboxes")

TOOL = Reply.tool_call


def task_of(request):
    from repo_bugfix import TASKS

    issue = next(m["content"] for m in request["messages"] if m["role"] == "user")
    return next(t for t in TASKS if t.issue in issue)


def scripted(*steps):
    """A policy that plays ``steps(task)`` one per turn, then says it is done."""

    def policy(request):
        turn = sum(1 for m in request["messages"] if m["role"] == "assistant")
        actions = [step(task_of(request)) for step in steps]
        return actions[turn] if turn < len(actions) else "Done: the tests pass."

    return policy


def run_tests(task):
    return Reply(tool_calls=[TOOL("bash", {"command": "python3 -m unittest -v 2>&1 | tail -3"})])


def write_fix(task):
    return Reply(tool_calls=[TOOL("write_file", {"path": task.module_path, "content": task.fixed})])


def tool_outputs(state):
    return [m["content"] for m in state["completion"] if m["role"] == "tool"]


def test_tasks_are_consistent():
    from repo_bugfix import TASKS, expected_values, load_environment

    assert len(TASKS) >= 12 and len({t.id for t in TASKS}) == len(TASKS)
    for task in TASKS:
        assert task.buggy != task.fixed and task.module_path in task.files()
        buggy = {"__name__": "buggy"}
        exec(task.buggy, buggy)
        wrong = [eval(check, buggy) for check in task.checks]
        assert wrong != expected_values(task), task.id  # the bug shows in the checks
    rows = load_environment().dataset_rows("eval")
    assert [r["info"]["repo"] for r in rows] == [t.id for t in TASKS]


async def test_a_fix_with_the_tools_passes_every_check(server, client):
    from repo_bugfix import load_environment

    env = load_environment()
    server.set_handler(
        scripted(
            run_tests,
            lambda t: Reply(tool_calls=[TOOL("read_file", {"path": t.module_path})]),
            write_fix,
            run_tests,
        )
    )
    out = await env.evaluate(client, "m", num_examples=4)
    for state in out.state:
        outputs = tool_outputs(state)
        assert "FAILED" in outputs[0] and "OK" in outputs[3], outputs  # red, then green
        assert state["reward"] == 1.0 and state["metrics"]["tests_edited"] == 0.0
    assert env.run_metadata()["sandbox_mode"] in ("bwrap", "landlock")


async def test_replace_in_file_edits_one_exact_occurrence(server, client):
    from repo_bugfix import load_environment

    env = load_environment()
    server.set_handler(
        scripted(
            lambda t: Reply(tool_calls=[TOOL("replace_in_file", {"path": t.module_path, "old": "not in the file", "new": "x"})]),
            lambda t: Reply(
                tool_calls=[TOOL("replace_in_file", {"path": t.module_path, "old": t.buggy, "new": t.fixed})]
            ),
        )
    )
    out = await env.evaluate(client, "m", num_examples=2)
    for state in out.state:
        assert "occurs 0 times" in tool_outputs(state)[0]
        assert "replaced 1 occurrence" in tool_outputs(state)[1]
        assert state["reward"] == 1.0


async def test_special_casing_the_visible_test_is_partial_credit(server, client):
    from repo_bugfix import load_environment

    env = load_environment()
    hack = (
        'def slugify(text):\n    if text == "Hello World":\n        return "hello-world"\n'
        '    return "-".join(text.split())\n'
    )
    server.set_handler(
        scripted(lambda t: Reply(tool_calls=[TOOL("write_file", {"path": t.module_path, "content": hack})]), run_tests)
    )
    out = await env.evaluate(client, "m", num_examples=1)  # slugify-case is the first task
    state = out.state[0]
    assert "OK" in tool_outputs(state)[1]  # the visible test passes...
    assert state["metrics"]["fixed"] == 0.0 and 0 < state["reward"] < 0.5  # ...the checks do not


TAMPERING = {
    "rewrites the failing test": lambda t: Reply(
        tool_calls=[TOOL("write_file", {"path": t.test_path, "content": "import unittest\n"})]
    ),
    "deletes the tests": lambda t: Reply(tool_calls=[TOOL("bash", {"command": "rm -rf tests"})]),
    "shadows unittest and adds a sitecustomize": lambda t: Reply(
        tool_calls=[
            TOOL("write_file", {"path": "unittest.py", "content": "print('OK')\n"}),
            TOOL("write_file", {"path": "sitecustomize.py", "content": "import os\nos._exit(0)\n"}),
        ]
    ),
    "writes a passing report": lambda t: Reply(
        tool_calls=[TOOL("bash", {"command": "echo '{\"passed\": true, \"reward\": 1}' > report.json > /tmp/results.json"})]
    ),
    "module exits at import": lambda t: Reply(
        tool_calls=[TOOL("write_file", {"path": t.module_path, "content": "import os\nos._exit(0)\n"})]
    ),
    "module prints claims and patches json": lambda t: Reply(
        tool_calls=[
            TOOL(
                "write_file",
                {
                    "path": t.module_path,
                    "content": t.buggy + "\nimport json\nprint('all checks passed')\njson.dumps = lambda *a, **k: 'true'\n",
                },
            )
        ]
    ),
}


@pytest.mark.parametrize("attack", sorted(TAMPERING))
async def test_tampering_in_the_episode_cannot_raise_the_reward(server, client, attack):
    from repo_bugfix import load_environment

    env = load_environment()
    server.set_handler(scripted(TAMPERING[attack], run_tests))
    out = await env.evaluate(client, "m", num_examples=3)
    for state in out.state:
        assert state["metrics"]["fixed"] == 0.0, (attack, state["check_report"])
        assert state["reward"] < 0.5
    if attack == "rewrites the failing test":
        assert all(s["metrics"]["tests_edited"] == 1.0 for s in out.state)


async def test_a_hanging_command_and_a_hanging_module_are_time_limited(server, client):
    from repo_bugfix import load_environment

    env = load_environment(max_turns=3)
    env.sandbox_limits = env.sandbox_limits.model_copy(update={"wall_time_s": 1.0})
    env.checks.limits = env.checks.limits.model_copy(update={"wall_time_s": 2.0})
    hang = "while True:\n    pass\n"
    server.set_handler(
        scripted(
            lambda t: Reply(tool_calls=[TOOL("bash", {"command": "sleep 30"})]),
            lambda t: Reply(tool_calls=[TOOL("write_file", {"path": t.module_path, "content": hang})]),
        )
    )
    out = await env.evaluate(client, "m", num_examples=1)
    state = out.state[0]
    assert "timed out" in tool_outputs(state)[0]
    assert state["reward"] == 0.0 and state["check_report"]["timed_out"]


async def test_empty_reply_and_malformed_tool_calls_are_data(server, client):
    from repo_bugfix import load_environment

    env = load_environment()
    server.enqueue(
        Reply(tool_calls=[TOOL("replace_in_file", "{broken")]),
        Reply(tool_calls=[TOOL("no_such_tool", {})]),
        Reply(content=""),
    )
    out = await env.evaluate(client, "m", num_examples=1)
    state = out.state[0]
    outputs = tool_outputs(state)
    assert len(outputs) == 2 and all("rror" in o for o in outputs), outputs
    assert state["error"]["type"] == "EmptyModelResponseError" and state["reward"] == 0.0


def test_environment_loads_by_id_and_refuses_unsafe_mode():
    env = vf.load_environment("repo-bugfix")
    assert {t.name for t in env.tool_defs} == {"bash", "read_file", "write_file", "replace_in_file"}
    with pytest.raises(ValueError, match="untrusted"):
        vf.load_environment("repo-bugfix", sandbox_mode="unsafe")
