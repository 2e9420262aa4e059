from verifiers.rubrics.judge_rubric import JudgeRubric
from verifiers.rubrics.math_rubric import MathRubric
from verifiers.rubrics.rubric import Rubric, group_reward_func
from verifiers.rubrics.rubric_group import RubricGroup

__all__ = ["JudgeRubric", "MathRubric", "Rubric", "RubricGroup", "group_reward_func"]
