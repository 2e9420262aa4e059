"""``verifiers.v1``: the task-centric API upstream shipped beside the classic one in 0.2/0.3
(``import verifiers.v1 as vf``), frozen at its v0.3.0 tag.

A ``Taskset`` yields typed ``Task``s (``TaskData`` + behaviour), a task scores a ``Trace``
with its ``@vf.reward``/``@vf.metric`` hooks, and a trace (a message graph, model calls,
rewards, metrics, errors, timing) is the record of one agent's rollout; an ``Episode`` holds
an env run's traces. Imported only when asked for: ``import verifiers`` does not load it.
Judges (``reference``, ``rubric``, your own) score a trace against any OpenAI-compatible endpoint.
Harnesses: ``null`` and ``bash`` on the ``subprocess`` runtime (a confined sandbox per rollout);
toolsets in-process or as MCP servers (``verifiers.v1.mcp``); an env's ``run`` scripts a user
through ``agent.interaction(task)``. Container runtimes and agent CLIs are refused by name.
"""

import logging as _logging

from verifiers.v1.agent import Agent, Agents, Interaction, ModelContext, Segment, make_agent
from verifiers.v1.configs.agent import AgentConfig
from verifiers.v1.configs.base import BaseConfig
from verifiers.v1.configs.client import (
    BaseClientConfig,
    ClientConfig,
    EvalClientConfig,
    TrainClientConfig,
)
from verifiers.v1.configs.env import EnvConfig, SingleAgentEnvConfig
from verifiers.v1.configs.harness import HarnessConfig, NullHarnessConfig
from verifiers.v1.configs.judge import JudgeConfig, Judges
from verifiers.v1.configs.legacy import LegacyEnvConfig
from verifiers.v1.configs.retries import RetryConfig
from verifiers.v1.configs.runtime import (
    DockerConfig,
    PrimeConfig,
    RuntimeConfig,
    RuntimeInfo,
    SubprocessConfig,
)
from verifiers.v1.configs.serve import ElasticPoolConfig, ServeConfig, StaticPoolConfig
from verifiers.v1.configs.task import TaskConfig
from verifiers.v1.configs.taskset import TasksetConfig
from verifiers.v1.env import Env, SingleAgentEnv
from verifiers.v1.episode import Episode, WireEpisode
from verifiers.v1.errors import (
    EnvError,
    HarnessError,
    InterceptionError,
    ProviderError,
    RolloutError,
    SandboxError,
    TaskError,
    ToolsetError,
    TunnelError,
)
from verifiers.v1.graph import MessageNode
from verifiers.v1.hooks import metric, reward, stop, tool
from verifiers.v1.judge import Judge, JudgeResponse, JudgeView
from verifiers.v1.judges import (
    Criterion,
    ReferenceJudge,
    ReferenceJudgeConfig,
    RubricJudge,
    RubricJudgeConfig,
)
from verifiers.v1.runtimes.base import ProgramResult, Runtime
from verifiers.v1.scoring import (
    compare_stdout_results,
    extract_boxed_answer,
    parse_judge_choice,
    parse_pytest_outcomes,
    read_answer_file_or_last_reply,
    verify_boxed_math_answer,
)
from verifiers.v1.state import State, StateT
from verifiers.v1.task import (
    Artifact,
    Task,
    TaskData,
    TaskResources,
    TaskTimeout,
    WireTaskData,
    task_key,
)
from verifiers.v1.taskset import Taskset
from verifiers.v1.toolset import SharedToolsetConfig, Toolset, ToolsetConfig
from verifiers.v1.trace import (
    TRACE_VERSION,
    AgentInfo,
    AgentSpan,
    Branch,
    Error,
    EvalRunInfo,
    ModelCall,
    Reward,
    RunInfo,
    TimeSpan,
    TimeSplit,
    Timing,
    Trace,
    TraceTask,
    TrainRunInfo,
    VersionInfo,
    WireTrace,
)
from verifiers.v1.types import (
    ID,
    AssistantMessage,
    ContentPart,
    ImageUrlContentPart,
    ImageUrlSource,
    KeptTokens,
    Message,
    MessageContent,
    Messages,
    Response,
    Sampling,
    SamplingConfig,
    SystemMessage,
    TextContentPart,
    Tool,
    ToolCall,
    ToolMessage,
    TurnTokens,
    Usage,
    UserMessage,
)
from verifiers.v1.utils.loaders import (
    env_config_type,
    environment_class,
    import_environment,
    import_judge,
    import_taskset,
    judge_class,
    judge_config_type,
    load_environment,
    load_judge,
    load_taskset,
    resolve_env_config,
    task_type,
    taskset_config_type,
)

__all__ = [  # noqa: RUF022 - grouped by area, as upstream's
    # messages and model calls
    "ID",
    "AssistantMessage",
    "ContentPart",
    "ImageUrlContentPart",
    "ImageUrlSource",
    "KeptTokens",
    "Message",
    "MessageContent",
    "Messages",
    "Response",
    "Sampling",
    "SamplingConfig",
    "SystemMessage",
    "TextContentPart",
    "Tool",
    "ToolCall",
    "ToolMessage",
    "TurnTokens",
    "Usage",
    "UserMessage",
    # tasks, traces, episodes
    "Artifact",
    "Task",
    "TaskData",
    "TaskResources",
    "TaskTimeout",
    "WireTaskData",
    "task_key",
    "Taskset",
    "State",
    "StateT",
    "MessageNode",
    "Trace",
    "TraceTask",
    "WireTrace",
    "TRACE_VERSION",
    "AgentInfo",
    "AgentSpan",
    "Branch",
    "Error",
    "EvalRunInfo",
    "ModelCall",
    "Reward",
    "RunInfo",
    "TimeSpan",
    "TimeSplit",
    "Timing",
    "TrainRunInfo",
    "VersionInfo",
    "Episode",
    "WireEpisode",
    # hooks
    "metric",
    "reward",
    "stop",
    "tool",
    # errors
    "RolloutError",
    "EnvError",
    "ProviderError",
    "HarnessError",
    "ToolsetError",
    "SandboxError",
    "TaskError",
    "InterceptionError",
    "TunnelError",
    # configs
    "BaseConfig",
    "TaskConfig",
    "TasksetConfig",
    "EnvConfig",
    "SingleAgentEnvConfig",
    "AgentConfig",
    "HarnessConfig",
    "RetryConfig",
    "LegacyEnvConfig",
    "ServeConfig",
    "StaticPoolConfig",
    "ElasticPoolConfig",
    "ProgramResult",
    "Runtime",
    "RuntimeConfig",
    "RuntimeInfo",
    "SubprocessConfig",
    "DockerConfig",
    "PrimeConfig",
    "BaseClientConfig",
    "ClientConfig",
    "EvalClientConfig",
    "TrainClientConfig",
    "NullHarnessConfig",
    # agents and tools
    "Agent",
    "Agents",
    "Interaction",
    "ModelContext",
    "make_agent",
    "Segment",
    "SharedToolsetConfig",
    "Toolset",
    "ToolsetConfig",
    # envs and loaders
    "Env",
    "SingleAgentEnv",
    "env_config_type",
    "environment_class",
    "import_environment",
    "import_taskset",
    "load_environment",
    "load_taskset",
    "resolve_env_config",
    "task_type",
    "taskset_config_type",
    "import_judge",
    "judge_class",
    "judge_config_type",
    "load_judge",
    # judges
    "Judge",
    "JudgeConfig",
    "Judges",
    "JudgeResponse",
    "JudgeView",
    "ReferenceJudge",
    "ReferenceJudgeConfig",
    "RubricJudge",
    "RubricJudgeConfig",
    "Criterion",
    # answer checks
    "compare_stdout_results",
    "extract_boxed_answer",
    "parse_judge_choice",
    "parse_pytest_outcomes",
    "read_answer_file_or_last_reply",
    "verify_boxed_math_answer",
]

_logging.getLogger(__name__).addHandler(_logging.NullHandler())

# a package exporting a Taskset loads by id as an environment (vf-eval, env workers, the hub's ids)
from verifiers.loading.loader import register_module_kind as _register_module_kind  # noqa: E402
from verifiers.v1.kind import environment_factory as _environment_factory  # noqa: E402

_register_module_kind(_environment_factory)
