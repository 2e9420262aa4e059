"""logic-puzzles: reasoning-gym's procedural tasks, chosen and graded by reasoning-gym itself.

Rows come from reasoning-gym's generators (offline, seeded: the same arguments give the same
rows on any machine); the difficulty is reasoning-gym's own curriculum level for each task, and
the reward is the task's own ``score_answer`` on the model's ``<answer>`` (``vf.ReasoningGymEnv``).
The answer key never leaves this process: a row's ``answer`` is only the index of its entry.
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any

import verifiers as vf

# Tasks that generate offline, have a curriculum and an unambiguous scorer, and fit in a
# 96-token reply; any other reasoning-gym task name works too (``tasks=[...]``).
DEFAULT_TASKS = (
    "basic_arithmetic",
    "chain_sum",
    "leg_counting",
    "letter_counting",
    "spell_backward",
    "count_bits",
    "gcd",
    "syllogism",
    "family_relationships",
    "calendar_arithmetic",
    "word_sorting",
    "mini_sudoku",
)


def _factory() -> Any:
    from reasoning_gym import factory

    return factory


def task_config(task: str, difficulty: int, overrides: dict[str, Any] | None) -> dict[str, Any]:
    """The config reasoning-gym's curriculum gives ``task`` at ``difficulty``, then ``overrides``.

    Levels past a task's hardest clamp to its hardest (the curriculum's own rule). The seed and
    size are left to the composite dataset, which derives one seed per task from the env's seed.
    """
    factory = _factory()
    if task not in factory.DATASETS:
        close = difflib.get_close_matches(task, factory.DATASETS, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise ValueError(
            f"unknown reasoning-gym task {task!r}{hint}; the names are reasoning_gym.factory.DATASETS"
        )
    if difficulty < 0:
        raise ValueError(f"difficulty is a curriculum level, 0 or more; got {difficulty}")
    config: dict[str, Any] = {}
    if factory.has_curriculum(task):
        curriculum = factory.create_curriculum(task)
        curriculum.set_global_level(difficulty)
        config = dataclasses.asdict(curriculum.generate_configuration())
    elif difficulty:
        raise ValueError(
            f"reasoning-gym task {task!r} has no curriculum, so no difficulty levels: pass its "
            f"settings as configs={{{task!r}: {{...}}}} instead"
        )
    config.update(overrides or {})
    for key in ("seed", "size"):
        config.pop(key, None)
    return config


def load_environment(
    tasks: str | list[str] = DEFAULT_TASKS,
    difficulty: int = 0,
    configs: dict[str, dict[str, Any]] | None = None,
    weights: dict[str, float] | None = None,
    num_train_examples: int = 2000,
    num_eval_examples: int = 200,
    seed: int = 0,
    system_prompt: str = "direct",
) -> vf.Environment:
    """
    Args:
        tasks: reasoning-gym task names (one, or several mixed by ``weights``).
        difficulty: curriculum level for every task (0 = easiest).
        configs: per-task settings that override the level's, e.g. ``{"gcd": {"max_value": 50}}``.
        weights: per-task sampling weights (default 1 each).
        system_prompt: a name from ``reasoning_gym.utils.SYSTEM_PROMPTS`` or the prompt itself.
    """
    names = [tasks] if isinstance(tasks, str) else list(tasks)
    if not names:
        raise ValueError("tasks is empty: name at least one reasoning-gym task")
    unknown = set(configs or {}) - set(names)
    if unknown:
        raise ValueError(f"configs name tasks not in tasks: {sorted(unknown)}")
    specs = [
        {
            "name": task,
            "weight": float((weights or {}).get(task, 1.0)),
            "config": task_config(task, difficulty, (configs or {}).get(task)),
        }
        for task in names
    ]
    from reasoning_gym.utils import SYSTEM_PROMPTS

    return vf.ReasoningGymEnv(
        gym=specs,
        num_train_examples=num_train_examples,
        num_eval_examples=num_eval_examples,
        seed=seed,
        system_prompt=SYSTEM_PROMPTS.get(system_prompt, system_prompt),
    )
