"""ReasoningGymEnv: reasoning-gym's procedural tasks as a single-turn environment.

Needs the ``reasoning-gym`` extra (``pip install reasoning-gym``). Each row's ``answer`` is the
index of its reasoning-gym entry, so the reward is the dataset's own ``score_answer`` on that
entry; ``task`` is the entry's source dataset (a composite mixes several).
"""

from __future__ import annotations

from typing import Any

from verifiers.envs.environment import release_of
from verifiers.envs.singleturn_env import SingleTurnEnv
from verifiers.parsers.parser import Parser
from verifiers.parsers.xml_parser import XMLParser
from verifiers.rubrics.rubric import Rubric
from verifiers.types import Messages


def _reasoning_gym() -> Any:
    try:
        import reasoning_gym
    except ImportError as exc:
        raise ImportError(
            "ReasoningGymEnv needs reasoning-gym: pip install reasoning-gym "
            "(or install this SDK with its reasoning-gym extra)"
        ) from exc
    return reasoning_gym


def build_dataset(gym: str | list[str | dict[str, Any]], size: int, seed: int) -> Any:
    """One reasoning-gym dataset, or a composite of several (names or DatasetSpec fields)."""
    rg = _reasoning_gym()
    if isinstance(gym, str):
        return rg.create_dataset(gym, size=size, seed=seed)
    from reasoning_gym.composite import DatasetSpec

    specs = []
    for item in gym:
        if isinstance(item, str):
            specs.append(DatasetSpec(name=item, weight=1.0, config={}))
        elif isinstance(item, dict):
            specs.append(DatasetSpec(**item))
        else:
            raise ValueError(
                f"a reasoning-gym dataset is a name or a DatasetSpec dict, got {item!r}"
            )
    return rg.create_dataset("composite", datasets=specs, size=size, seed=seed)


class ReasoningGymEnv(SingleTurnEnv):
    def __init__(
        self,
        gym: str | list[str | dict[str, Any]],
        num_train_examples: int = 1000,
        num_eval_examples: int = 100,
        system_prompt: str | None = None,
        parser: Parser | None = None,
        seed: int = 0,
        **kwargs: Any,
    ) -> None:
        rg = _reasoning_gym()
        self.gym = gym
        self.num_train_examples = num_train_examples
        self.num_eval_examples = num_eval_examples
        self.seed = seed
        self.rg_dataset = build_dataset(gym, num_train_examples + num_eval_examples, seed)
        # the source task is the row's ``task`` up to verifiers 0.1.13, ``info`` after (where
        # ``task`` is the row's payload)
        label = "info" if release_of(type(self)).task_is_payload else "task"
        rows = [
            {
                "question": entry["question"],
                "answer": str(i),
                **(
                    {"info": {"source_dataset": entry["metadata"]["source_dataset"]}}
                    if label == "info"
                    else {"task": entry["metadata"]["source_dataset"]}
                ),
            }
            for i, entry in enumerate(self.rg_dataset)
        ]
        parser = parser or XMLParser(fields=["answer"])
        rubric = Rubric(parser=parser)

        def check_answer_reward_func(completion: Messages, answer: str, **_: Any) -> float:
            entry = self.rg_dataset[int(answer)]
            response = str(parser.parse_answer(completion)).strip()
            return float(self.rg_dataset.score_answer(answer=response, entry=entry))

        rubric.add_reward_func(check_answer_reward_func)
        rubric.add_reward_func(parser.get_format_reward_func(), weight=0.0)
        from reasoning_gym.utils import SYSTEM_PROMPTS

        super().__init__(
            dataset=rows[:num_train_examples] or None,
            eval_dataset=rows[num_train_examples:] or None,
            system_prompt=system_prompt if system_prompt is not None else SYSTEM_PROMPTS["default"],
            parser=parser,
            rubric=rubric,
            **kwargs,
        )
        if self.release.monitor_metrics:
            # from verifiers 0.1.9 (when monitor metrics arrived) ReasoningGymEnv sets its own
            # rubric after building, which drops the monitor rubric: no num_turns metric
            self.rubric = rubric
        del rg
