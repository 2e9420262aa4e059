"""The environment package template behind ``vf-init`` and ``prime env init``.

A scaffold installs, loads and evaluates unchanged: pyproject (PEP 621, hatchling, entry point
in ``verifiers.environments``, ``[tool.verifiers.eval]`` defaults shipped in the wheel's
metadata), a README with the sections the hub shows, and a working ``load_environment``.
A v1 scaffold (``vf-init --v1``) is a ``verifiers.v1`` taskset package instead: no entry point
(loaded by id, as upstream 0.3 loads one: the module's ``__all__`` names its ``Taskset``), a
``Taskset``, a ``Task`` with a reward and a metric, a ``Toolset`` with one tool; the same
pyproject metadata and eval defaults otherwise.
"""

from __future__ import annotations

import keyword
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from verifiers.cli.scaffold_v1 import v1_files
from verifiers.errors import UsageError

_NAME = re.compile(r"^[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*$")


class ScaffoldError(UsageError):
    """A bad environment name or target (the message says what to do; vf-init exits 2)."""


@dataclass(frozen=True)
class EnvNames:
    env_id: str  # reverse-text: the distribution and entry-point name
    module: str  # reverse_text: the importable module

    @classmethod
    def parse(cls, name: str) -> EnvNames:
        if not _NAME.match(name):
            raise ScaffoldError(
                f"{name!r} is not a valid environment name: use lowercase letters, digits and single "
                "'-' or '_' between them, starting with a letter (e.g. 'word-count')"
            )
        module = name.replace("-", "_")
        if (
            keyword.iskeyword(module)
            or module in sys.stdlib_module_names
            or module in ("verifiers", "test", "tests")
        ):
            raise ScaffoldError(
                f"{name!r} would shadow the Python module {module!r}; pick another name"
            )
        return cls(env_id=name.replace("_", "-"), module=module)

    @property
    def class_prefix(self) -> str:
        """The v1 scaffold's class names start with this (upstream's: word_count_v1 ->
        WordCount)."""
        stem = self.module.removesuffix("_v1")
        return "".join(part[:1].upper() + part[1:] for part in stem.split("_"))


PYPROJECT = """[project]
name = "{env_id}"
version = "0.1.0"
description = "{env_id}: a verifiers environment"
readme = "README.md"
requires-python = ">=3.11"
dependencies = ["verifiers>=0.3.1"]

[project.entry-points."verifiers.environments"]
{env_id} = "{module}:load_environment"

[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[tool.hatch.build.targets.wheel]
{wheel_selection}

# Ships this file in the wheel's metadata, where vf-eval reads [tool.verifiers.eval].
[tool.hatch.build.targets.wheel.extra-metadata]
"pyproject.toml" = "pyproject.toml"

[tool.verifiers.eval]
num_examples = 5
rollouts_per_example = 3
max_tokens = 256
"""

TEMPLATE_PLACEHOLDER = "What this environment teaches or measures, in one paragraph."
README = """# {env_id}

## Overview
What this environment teaches or measures, in one paragraph.

## Task
- **Dataset**: where the rows come from (shipped, generated) and their columns.
- **Format**: what the model must answer and how it is parsed.
- **Rubric**: each reward function, its weight, and what it rewards.

## Arguments
| arg | default | meaning |
| --- | --- | --- |
| `num_examples` | 20 | rows generated for each split |

## Metrics
`reward` (weighted sum), `correct_answer`, `format_reward`.

## Run it
```bash
vf-install {env_id}
vf-eval {env_id} -n 5 -r 3
```
"""

SINGLE_MODULE = '''"""{env_id}: add two numbers (replace with your task)."""

from __future__ import annotations

import random

import verifiers as vf

SYSTEM_PROMPT = """Answer with the number only, inside <answer> tags:
<answer>42</answer>"""


def make_rows(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        a, b = rng.randint(1, 50), rng.randint(1, 50)
        rows.append({{"question": f"What is {{a}} + {{b}}?", "answer": str(a + b)}})
    return rows


def load_environment(num_examples: int = 20, seed: int = 0) -> vf.Environment:
    parser = vf.XMLParser(["answer"], answer_field="answer")

    def correct_answer(completion, answer, **kwargs) -> float:
        return 1.0 if (parser.parse_answer(completion) or "").strip() == answer else 0.0

    format_reward = parser.get_format_reward_func()
    format_reward.__name__ = "format_reward"
    rubric = vf.Rubric(funcs=[correct_answer, format_reward], weights=[1.0, 0.2], parser=parser)
    return vf.SingleTurnEnv(
        dataset=make_rows(num_examples, seed),
        eval_dataset=make_rows(num_examples, seed + 1),
        system_prompt=SYSTEM_PROMPT,
        parser=parser,
        rubric=rubric,
    )
'''

MULTI_INIT = '''"""{env_id}: add two numbers (replace with your task)."""

from {module}.environment import load_environment

__all__ = ["load_environment"]
'''

MULTI_DATASET = '''"""The dataset: generated rows with a question and an answer."""

from __future__ import annotations

import random


def make_rows(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        a, b = rng.randint(1, 50), rng.randint(1, 50)
        rows.append({{"question": f"What is {{a}} + {{b}}?", "answer": str(a + b)}})
    return rows
'''

MULTI_RUBRIC = '''"""The rubric: what counts as a good answer."""

from __future__ import annotations

import verifiers as vf


def build_rubric(parser: vf.XMLParser) -> vf.Rubric:
    def correct_answer(completion, answer, **kwargs) -> float:
        return 1.0 if (parser.parse_answer(completion) or "").strip() == answer else 0.0

    format_reward = parser.get_format_reward_func()
    format_reward.__name__ = "format_reward"
    return vf.Rubric(funcs=[correct_answer, format_reward], weights=[1.0, 0.2], parser=parser)
'''

MULTI_ENVIRONMENT = '''"""load_environment: dataset + parser + rubric."""

from __future__ import annotations

import verifiers as vf
from {module}.dataset import make_rows
from {module}.rubric import build_rubric

SYSTEM_PROMPT = """Answer with the number only, inside <answer> tags:
<answer>42</answer>"""


def load_environment(num_examples: int = 20, seed: int = 0) -> vf.Environment:
    parser = vf.XMLParser(["answer"], answer_field="answer")
    return vf.SingleTurnEnv(
        dataset=make_rows(num_examples, seed),
        eval_dataset=make_rows(num_examples, seed + 1),
        system_prompt=SYSTEM_PROMPT,
        parser=parser,
        rubric=build_rubric(parser),
    )
'''


def _classic_files(fields: dict[str, str], multi_file: bool) -> dict[str, str]:
    module = fields["module"]
    if multi_file:
        selection = f'packages = ["{module}"]'
        files = {
            f"{module}/__init__.py": MULTI_INIT.format(**fields),
            f"{module}/dataset.py": MULTI_DATASET.format(**fields),
            f"{module}/rubric.py": MULTI_RUBRIC.format(**fields),
            f"{module}/environment.py": MULTI_ENVIRONMENT.format(**fields),
        }
    else:
        selection = f'include = ["{module}.py"]'
        files = {f"{module}.py": SINGLE_MODULE.format(**fields)}
    files["pyproject.toml"] = PYPROJECT.format(wheel_selection=selection, **fields)
    files["README.md"] = README.format(**fields)
    return files


def scaffold(
    name: str, parent: str | Path = "environments", multi_file: bool = False, v1: bool = False
) -> Path:
    """Write a new environment package under ``parent`` (a directory of the user's own: its
    code is what vf-install and vf-eval later run); returns its directory. ``v1``: a
    ``verifiers.v1`` taskset package, which is always a package (so not with ``multi_file``)."""
    from verifiers.processes.own_dir import own_dir

    names = EnvNames.parse(name)
    if v1 and multi_file:
        raise ScaffoldError(
            "--multi-file lays out a classic environment; a v1 taskset is always a package "
            "(taskset.py, toolset.py): drop --v1 or --multi-file"
        )
    root = Path(parent) / names.module
    if os.path.lexists(root):
        raise ScaffoldError(f"{root} already exists; pick another name or remove it")
    problem = own_dir(Path(parent), "-p/--path")
    if problem:
        raise ScaffoldError(problem)
    try:
        root.mkdir()  # new, so nothing in it was planted before
    except FileExistsError:
        raise ScaffoldError(f"{root} already exists; pick another name or remove it") from None
    fields = {"env_id": names.env_id, "module": names.module, "prefix": names.class_prefix}
    files = v1_files(fields) if v1 else _classic_files(fields, multi_file)
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root
