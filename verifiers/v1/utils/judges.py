"""Judges by id: a built-in (``reference``, ``rubric``) or a package exporting one ``Judge``
subclass in ``__all__``, and the config type read off its generic parameter (what a task
config's ``judges`` entries validate against)."""

from __future__ import annotations

from verifiers.v1.configs.judge import JudgeConfig
from verifiers.v1.generics import concrete_type
from verifiers.v1.judge import Judge
from verifiers.v1.judges import BUILTIN_JUDGES
from verifiers.v1.utils.plugins import import_plugin, plugin_class


def judge_class(judge_id: str) -> type[Judge]:
    if "/" not in judge_id and "@" not in judge_id and judge_id in BUILTIN_JUDGES:
        return BUILTIN_JUDGES[judge_id]
    found: type[Judge] = plugin_class(import_plugin(judge_id, "judge"), Judge, "judge")
    return found


def judge_config_type(judge_id: str) -> type[JudgeConfig]:
    return concrete_type(judge_class(judge_id), JudgeConfig, origin=Judge) or JudgeConfig


def load_judge(config: JudgeConfig) -> Judge:
    """The judge ``config`` names, built with it."""
    return judge_class(config.id)(config)
