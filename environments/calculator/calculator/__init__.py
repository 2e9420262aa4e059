"""calculator: arithmetic answered with a calculator tool, over several turns.

The tool parses its expression with ``ast`` and evaluates only numbers and ``+ - * / ( )``:
model-written text is never run as code. The reward is mostly the answer (the last number of the
final reply, compared exactly) and partly for having used the tool at all, so a small model that
cannot multiply three-digit numbers in its head has a way to learn: call, read, answer.
"""

from __future__ import annotations

import ast
import operator
import random
import re

import verifiers as vf

SYSTEM_PROMPT = (
    "You have a calculator. To use it, reply with only\n"
    '<tool_call>{"name": "calculate", "arguments": {"expression": "37 * 41"}}</tool_call>\n'
    "and you will get the result. Then give the final answer as a number."
)
# One worked exchange before each question (the call written out as the model writes it), so
# a small model sees the protocol once in its context
FEW_SHOT = [
    {"role": "user", "content": "What is 23 * 19 + 5?"},
    {
        "role": "assistant",
        "content": '<tool_call>{"name": "calculate", "arguments": {"expression": "23 * 19 + 5"}}'
        "</tool_call>",
    },
    {"role": "tool", "content": "442"},
    {"role": "assistant", "content": "442"},
]
OPERATORS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.USub: operator.neg,
}


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
        return OPERATORS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in OPERATORS:
        return OPERATORS[type(node.op)](_evaluate(node.operand))
    raise ValueError("only numbers and + - * / ( ) are allowed")


def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression.

    Args:
        expression: Numbers with + - * / and parentheses, e.g. "37 * 41 + 12".
    """
    if len(expression) > 200:
        raise ValueError("the expression is too long")
    value = _evaluate(ast.parse(expression, mode="eval").body)
    return str(int(value)) if float(value).is_integer() else f"{value:.4g}"


def make_rows(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        a, b = rng.randint(12, 99), rng.randint(12, 99)
        if rng.random() < 0.5:
            question, answer = f"What is {a} * {b}?", a * b
        else:
            c = rng.randint(2, 99)
            question, answer = f"What is {a} * {b} + {c}?", a * b + c
        rows.append({"question": question, "answer": str(answer)})
    return rows


NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def load_environment(
    num_train_examples: int = 1000,
    num_eval_examples: int = 100,
    seed: int = 0,
    max_turns: int = 3,
    few_shot: bool = True,
) -> vf.Environment:
    parser = vf.Parser()

    def final_number(completion) -> str | None:
        replies = parser.get_assistant_messages(completion)
        text = (replies[-1].get("content") or "") if replies else ""
        numbers = NUMBER.findall(text.replace(",", ""))
        return numbers[-1] if numbers else None

    def correct(completion, answer, **kwargs) -> float:
        """The last number of the final reply is the answer."""
        return float(final_number(completion) == answer)

    def tool_results(completion) -> list[str]:
        return [m.get("content") or "" for m in completion if m.get("role") == "tool"]

    def called(completion, **kwargs) -> float:
        """At least one calculator call evaluated without an error."""
        return float(any(NUMBER.fullmatch(r.strip()) for r in tool_results(completion)))

    answer = vf.Rubric(funcs=[correct, called], weights=[0.8, 0.2], parser=parser)
    rubric = vf.RubricGroup([answer, vf.ToolRubric(tools=[calculate])])  # call counts (metrics)
    return vf.ToolEnv(
        tools=[calculate],
        dataset=make_rows(num_train_examples, seed),
        eval_dataset=make_rows(num_eval_examples, seed + 1),
        system_prompt=SYSTEM_PROMPT,
        few_shot=FEW_SHOT if few_shot else None,
        parser=parser,
        rubric=rubric,
        max_turns=max_turns,
    )
