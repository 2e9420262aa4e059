"""The judges this SDK ships, resolved by id before any installed package: ``reference``
(the response against the task's reference answer) and ``rubric`` (weighted criteria)."""

from verifiers.v1.judges.reference import ReferenceJudge, ReferenceJudgeConfig
from verifiers.v1.judges.rubric import Criterion, RubricJudge, RubricJudgeConfig

BUILTIN_JUDGES = {"reference": ReferenceJudge, "rubric": RubricJudge}

__all__ = [
    "BUILTIN_JUDGES",
    "Criterion",
    "ReferenceJudge",
    "ReferenceJudgeConfig",
    "RubricJudge",
    "RubricJudgeConfig",
]
