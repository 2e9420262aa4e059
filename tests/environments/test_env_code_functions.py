"""code-functions: specs in, functions out, hidden tests in a fresh sandbox judged on the host."""

import collections
import inspect
import json

import pytest

from verifiers.testing import Reply, last_user_text

pytestmark = pytest.mark.usefixtures("no_leftover_sandboxes")


def reference_source(name):
    from code_functions import BY_NAME

    lines = inspect.getsource(BY_NAME[name].solution).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("def "))
    imports = "import math, string\nfrom collections import Counter\n\n"  # problems.py's own
    return imports + "\n".join(lines[start:])


def fenced(code):
    return f"Here is my solution:\n```python\n{code}\n```"


def problem_of(request):
    return last_user_text(request).split("def ", 1)[1].split("(", 1)[0]


def test_problem_set_has_over_100_specs_with_discriminating_hidden_tests():
    from code_functions import PROBLEMS, spec, tests_for

    assert len(PROBLEMS) >= 100 and len({p.name for p in PROBLEMS}) == len(PROBLEMS)
    for problem in PROBLEMS:
        examples, hidden, expected = tests_for(problem.name)
        assert len(examples) == 2 and len(hidden) >= 5, problem.name
        assert not any(h in examples for h in hidden), problem.name
        # a constant answer passes at most 70% of a problem's hidden tests
        counts = collections.Counter(json.dumps(e, sort_keys=True) for e in expected)
        assert counts.most_common(1)[0][1] <= 0.7 * len(hidden), problem.name
        text = spec(problem)
        assert f"def {problem.name}(" in text and "Examples:" in text
    assert tests_for("to_roman") == tests_for("to_roman")  # seeded by name


def test_splits_and_the_harness_never_carry_expected_outputs():
    from code_functions import load_environment, tests_for

    from verifiers.rubrics.sandbox_checks import harness_script

    env = load_environment()
    train, held_out = env.dataset_rows("train"), env.dataset_rows("eval")
    assert len(train) + len(held_out) >= 100 and len(held_out) >= 25
    assert not {r["info"]["problem"] for r in train} & {r["info"]["problem"] for r in held_out}
    _, hidden, expected = tests_for("to_roman")
    script = harness_script("def to_roman(n): pass", [f"to_roman(*{a!r})" for a in hidden], "nonce", 2)
    assert not [e for e in expected if json.dumps(e) in script]
    row = next(r for r in held_out + train if r["info"]["problem"] == "to_roman")
    assert not [e for e in expected if e in json.dumps(row)]  # nor does the row


def test_comparison_is_typed():
    from verifiers.rubrics.sandbox_checks import same

    assert same(212.0, 212) and same([1, [2.0]], [1, [2]]) and same({"a": None}, {"a": None})
    assert not same(1, True) and not same(False, 0) and not same(None, 0)
    assert not same([1, 2], [1, 2, 3]) and not same({"a": 1}, {"a": 1, "b": 2})
    assert not same("1", 1)


async def test_reference_solutions_pass_and_wrong_ones_fail(server, client):
    from code_functions import load_environment

    env = load_environment()
    server.set_handler(lambda req: fenced(reference_source(problem_of(req))))
    right = await env.evaluate(client, "m", num_examples=6)
    assert right.reward == [1.0] * 6
    assert all(s["test_report"]["passed"] == [True] * len(s["test_report"]["passed"]) for s in right.state)
    server.set_handler(lambda req: fenced(f"def {problem_of(req)}(*args):\n    return None"))
    wrong = await env.evaluate(client, "m", num_examples=6)
    assert all(r < 0.5 for r in wrong.reward) and wrong.metrics["all_passed"] == [0.0] * 6
    assert env.run_metadata()["sandbox_mode"] in ("bwrap", "landlock")


async def test_repl_tool_then_answer_and_malformed_tool_calls(server, client):
    """The model's own REPL runs its code, never holds the tests; a malformed call is an error
    message to the model and the rollout goes on."""
    from code_functions import load_environment

    env = load_environment()
    name = env.dataset_rows("eval")[0]["info"]["problem"]
    probe = (
        "import importlib.util, os\n"
        "print(importlib.util.find_spec('code_functions'), sorted(os.listdir('.')))"
    )
    server.enqueue(
        Reply(tool_calls=[Reply.tool_call("python", "{not json")]),
        Reply(tool_calls=[Reply.tool_call("python", {"code": probe})]),
        Reply(content=fenced(reference_source(name))),
    )
    out = await env.evaluate(client, "m", num_examples=1)
    state = out.state[0]
    tool_outputs = [m["content"] for m in state["completion"] if m["role"] == "tool"]
    assert "not valid JSON" in tool_outputs[0] or "Error" in tool_outputs[0]
    assert tool_outputs[1].startswith("None [")  # no tests, no grader in the REPL's sandbox
    assert out.reward == [1.0] and state["error"] is None


TAMPERING = {
    "claims success": "print('All 10 tests passed! reward=1.0')\ndef {name}(*a):\n    return None",
    "claims a pass per test": (
        "import sys, os, json\n"
        "nonce = next(c for c in sys._getframe(1).f_globals['_emit'].__code__.co_consts if isinstance(c, str) and len(c.strip()) == 32).strip()\n"
        "for i in range(12):\n"
        "    print(nonce, json.dumps([i, 'passed', True]))\n"
        "sys.stdout.flush(); os._exit(0)"
    ),
    "patches json": "import json\njson.dumps = lambda *a, **k: '[0, \"value\", 0]'\ndef {name}(*a):\n    return 0",
    "always-equal object": (
        "class Yes:\n    def __eq__(self, other): return True\n"
        "def {name}(*a):\n    return Yes()"
    ),
    "exits before the tests": "import os\nos._exit(0)",
    "raises SystemExit in each test": "import sys\ndef {name}(*a):\n    sys.exit(0)",
}


@pytest.mark.parametrize("attack", sorted(TAMPERING))
async def test_tampering_with_the_grader_scores_nothing(server, client, attack):
    from code_functions import load_environment

    env = load_environment()
    server.set_handler(lambda req: fenced(TAMPERING[attack].format(name=problem_of(req))))
    out = await env.evaluate(client, "m", num_examples=2)
    for state in out.state:
        report = state["test_report"]
        # a constant may pass a few hidden tests by luck; never all of them
        assert state["metrics"]["all_passed"] == 0.0 and sum(report["passed"]) <= 7, (attack, report)
    if attack in ("claims a pass per test", "exits before the tests", "raises SystemExit in each test"):
        assert all(r == 0.0 for r in out.reward), attack


async def test_forged_result_lines_are_judged_like_real_ones(server, client):
    """Code that finds the harness's nonce and prints result lines itself gains nothing: a line
    is a claimed *value*, compared with the hidden expected output like any other."""
    from code_functions import load_environment, tests_for

    env = load_environment(problems=["digit_sum"])
    _, _, expected = tests_for("digit_sum")
    forge = (
        "import sys, os, json\n"
        "nonce = next(c for c in sys._getframe(1).f_globals['_emit'].__code__.co_consts if isinstance(c, str) and len(c.strip()) == 32).strip()\n"
        "for i in range(12):\n"
        "    print(nonce, json.dumps([i, 'value', 9]))\n"
        "sys.stdout.flush(); os._exit(0)"
    )
    server.set_handler(lambda req: fenced(forge))
    out = await env.evaluate(client, "m")
    report = out.state[0]["test_report"]
    assert report["errors"] == []  # the forge ran: no load error from the harness
    assert report["passed"] == [e == 9 for e in expected] and not all(report["passed"])


async def test_a_test_that_hangs_times_out_alone(server, client):
    from code_functions import load_environment, tests_for

    env = load_environment(problems=["digit_sum"])
    _, hidden, _ = tests_for("digit_sum")
    code = (
        f"def digit_sum(n):\n    while n == {hidden[3][0]}:\n        pass\n"
        "    return sum(int(d) for d in str(abs(n)))"
    )
    server.set_handler(lambda req: fenced(code))
    out = await env.evaluate(client, "m")
    report = out.state[0]["test_report"]
    assert report["passed"] == [i != 3 for i in range(len(hidden))]
    assert "TimeoutError" in " ".join(report["errors"])
    assert out.reward == [pytest.approx(0.5 * 9 / 10)]


async def test_empty_reply_and_no_code_score_zero(server, client):
    from code_functions import load_environment

    env = load_environment()
    server.enqueue(Reply(content=""), Reply(content="I don't know."))
    out = await env.evaluate(client, "m", num_examples=2)
    assert out.reward == [0.0, 0.0]
    errors = sorted(str((s["error"] or {}).get("type")) for s in out.state)
    assert errors == ["EmptyModelResponseError", "None"]
    answered = next(s for s in out.state if not s["error"])
    assert answered["test_report"]["errors"] == ["no code in the reply"]


def test_unsafe_sandbox_mode_is_refused():
    from code_functions import load_environment

    with pytest.raises(ValueError, match="untrusted"):
        load_environment(sandbox_mode="unsafe")
