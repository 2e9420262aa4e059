"""Tasksets by id: the package an id names, imported, its one ``Taskset`` subclass, and its
config type read off its generic parameter (what an env and a config's ``[taskset]`` block
need, below the env loaders in ``loaders``)."""

from __future__ import annotations

from types import ModuleType

from verifiers.v1.configs.taskset import TasksetConfig
from verifiers.v1.generics import concrete_type
from verifiers.v1.task import Task
from verifiers.v1.taskset import Taskset
from verifiers.v1.utils.plugins import (  # kept importable from here
    UPSTREAM_BUILTINS as UPSTREAM_BUILTINS,
)
from verifiers.v1.utils.plugins import PluginNotInstalled as PluginNotInstalled
from verifiers.v1.utils.plugins import import_plugin as import_plugin
from verifiers.v1.utils.plugins import module_name as module_name
from verifiers.v1.utils.plugins import plugin_class as plugin_class


def import_taskset(taskset_id: str) -> ModuleType:
    return import_plugin(taskset_id, "taskset")


def import_environment(env_id: str) -> ModuleType:
    return import_plugin(env_id, "environment")


def taskset_class(taskset_id: str) -> type[Taskset]:
    return plugin_class(import_taskset(taskset_id), Taskset, "taskset")


def task_type(taskset_id: str) -> type[Task]:
    return taskset_class(taskset_id).task_type()


def taskset_config_type(taskset_id: str) -> type[TasksetConfig]:
    return concrete_type(taskset_class(taskset_id), TasksetConfig, origin=Taskset) or TasksetConfig


def load_taskset(config: TasksetConfig) -> Taskset:
    """The taskset ``config`` names, built with its own config type."""
    cls = taskset_class(config.id)
    own = concrete_type(cls, TasksetConfig, origin=Taskset) or TasksetConfig
    if not isinstance(config, own):
        config = own.model_validate(config.model_dump())
    return cls(config)
