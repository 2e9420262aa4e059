"""verifiers: environments for reinforcement learning with language models.

``import verifiers as vf`` is cheap: names resolve on first use, so a CLI or a worker that needs
one class does not pay for datasets, the openai SDK or math-verify at import time.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Literal

# The classic API of verifiers 0.3.1 (the last classic release), plus this SDK's fixes: so an
# environment's ``verifiers>=0.3.1,<0.4`` requirement is satisfied by this package.
__version__ = "0.3.1.post1"

_EXPORTS: dict[str, str] = {
    # environments
    "Environment": "verifiers.envs.environment",
    "MultiTurnEnv": "verifiers.envs.multiturn_env",
    "SingleTurnEnv": "verifiers.envs.singleturn_env",
    "EnvGroup": "verifiers.envs.env_group",
    "ToolEnv": "verifiers.envs.tool_env",
    "StatefulToolEnv": "verifiers.envs.stateful_tool_env",
    "SandboxEnv": "verifiers.envs.sandbox_env",
    "PythonEnv": "verifiers.envs.python_env",
    "ReasoningGymEnv": "verifiers.envs.integrations.reasoning_gym_env",
    "TextArenaEnv": "verifiers.envs.integrations.textarena_env",
    "GymEnv": "verifiers.envs.experimental.gym_env",
    # rubrics
    "Rubric": "verifiers.rubrics.rubric",
    "RubricGroup": "verifiers.rubrics.rubric_group",
    "JudgeRubric": "verifiers.rubrics.judge_rubric",
    "MathRubric": "verifiers.rubrics.math_rubric",
    "ToolRubric": "verifiers.rubrics.tool_rubric",
    "group_reward_func": "verifiers.rubrics.rubric",
    "EnvGroupRubric": "verifiers.envs.env_group",
    # parsers
    "Parser": "verifiers.parsers.parser",
    "XMLParser": "verifiers.parsers.xml_parser",
    "ThinkParser": "verifiers.parsers.think_parser",
    "MaybeThinkParser": "verifiers.parsers.think_parser",
    "MCPEnv": "verifiers.envs.experimental.mcp_env",
    # decorators
    "stop": "verifiers.decorators",
    "cleanup": "verifiers.decorators",
    "teardown": "verifiers.decorators",
    "setup": "verifiers.decorators",
    "update": "verifiers.decorators",
    "reward": "verifiers.decorators",
    "metric": "verifiers.decorators",
    "advantage": "verifiers.decorators",
    # loading, clients, data helpers
    "load_environment": "verifiers.loading.loader",
    "written_for": "verifiers.classic",
    "ModelClient": "verifiers.clients",
    "OpenAICompatibleClient": "verifiers.clients",
    "RetryPolicy": "verifiers.clients",
    "Client": "verifiers.clients.client",
    "ClientConfig": "verifiers.clients.config",
    "EndpointConfig": "verifiers.clients.config",
    "Endpoints": "verifiers.clients.config",
    "OpenAIChatCompletionsClient": "verifiers.clients.openai_chat_completions_client",
    "OpenAICompletionsClient": "verifiers.clients.openai_completions_client",
    "OpenAIResponsesClient": "verifiers.clients.openai_responses_client",
    "AnthropicMessagesClient": "verifiers.clients.anthropic_messages_client",
    "extract_boxed_answer": "verifiers.data",
    "extract_hash_answer": "verifiers.data",
    "load_example_dataset": "verifiers.data",
    "BOXED_SYSTEM_PROMPT": "verifiers.data",
    "THINK_BOXED_SYSTEM_PROMPT": "verifiers.data",
    "setup_logging": "verifiers.logging_setup",
    "print_prompt_completions_sample": "verifiers.logging_setup",
    "log_level": "verifiers.logging_setup",
    "quiet_verifiers": "verifiers.logging_setup",
    "ensure_keys": "verifiers.classic.config_keys",
    "MissingKeyError": "verifiers.classic.config_keys",
    # types
    "State": "verifiers.types",
    "Messages": "verifiers.types",
    "ChatMessage": "verifiers.types",
    "Info": "verifiers.types",
    "SamplingArgs": "verifiers.types",
    "RewardFunc": "verifiers.types",
    "RolloutInput": "verifiers.types",
    "RolloutScore": "verifiers.types",
    "RolloutScores": "verifiers.types",
    "GenerateOutputs": "verifiers.types",
    "TrajectoryStep": "verifiers.types",
    "ModelResponse": "verifiers.types",
    "Message": "verifiers.types",
    "ChatMessages": "verifiers.types",
    "MessageType": "verifiers.types",
    "RolloutTiming": "verifiers.types",
    "GenerateMetadata": "verifiers.types",
    "ProcessedOutputs": "verifiers.types",
    "TrajectoryStepTokens": "verifiers.types",
    "GroupRewardFunc": "verifiers.types",
    "DatasetBuilder": "verifiers.types",
    "RolloutOutput": "verifiers.types",
    "ErrorData": "verifiers.types",
    "TokenUsage": "verifiers.types",
    "SystemMessage": "verifiers.types",
    "UserMessage": "verifiers.types",
    "AssistantMessage": "verifiers.types",
    "ToolMessage": "verifiers.types",
    "TextMessage": "verifiers.types",
    "Tool": "verifiers.types",
    "ToolCall": "verifiers.types",
    "Response": "verifiers.types",
    "ResponseMessage": "verifiers.types",
    "ResponseTokens": "verifiers.types",
    "Usage": "verifiers.types",
    "TextContentPart": "verifiers.types",
    "ImageUrlContentPart": "verifiers.types",
    "InputAudioContentPart": "verifiers.types",
    "TimeSpan": "verifiers.types",
    "TimeSpans": "verifiers.types",
    # errors
    "VFError": "verifiers.errors",
    "DatasetError": "verifiers.errors",
    "EnvironmentNotFoundError": "verifiers.errors",
    "ModelError": "verifiers.errors",
    "RolloutError": "verifiers.errors",
    "Error": "verifiers.errors",
    "InvalidModelResponseError": "verifiers.errors",
    "EmptyModelResponseError": "verifiers.errors",
    "OverlongPromptError": "verifiers.errors",
    "ToolError": "verifiers.errors",
    "ToolParseError": "verifiers.errors",
    "ToolCallError": "verifiers.errors",
    "InfraError": "verifiers.errors",
    "SandboxError": "verifiers.errors",
    "BrowserSandboxError": "verifiers.errors",
    "TunnelError": "verifiers.errors",
}

TaskSplit = Literal["train", "eval"]

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'verifiers' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


if TYPE_CHECKING:
    from verifiers.clients import ModelClient, OpenAICompatibleClient, RetryPolicy
    from verifiers.data import (
        extract_boxed_answer,
        extract_hash_answer,
        load_example_dataset,
    )
    from verifiers.decorators import (
        advantage,
        cleanup,
        metric,
        reward,
        setup,
        stop,
        teardown,
        update,
    )
    from verifiers.envs.env_group import EnvGroup
    from verifiers.envs.environment import Environment
    from verifiers.envs.multiturn_env import MultiTurnEnv
    from verifiers.envs.python_env import PythonEnv
    from verifiers.envs.sandbox_env import SandboxEnv
    from verifiers.envs.singleturn_env import SingleTurnEnv
    from verifiers.envs.stateful_tool_env import StatefulToolEnv
    from verifiers.envs.tool_env import ToolEnv
    from verifiers.errors import (
        DatasetError,
        EnvironmentNotFoundError,
        ModelError,
        RolloutError,
        VFError,
    )
    from verifiers.loading.loader import load_environment
    from verifiers.parsers.parser import Parser
    from verifiers.parsers.think_parser import MaybeThinkParser, ThinkParser
    from verifiers.parsers.xml_parser import XMLParser
    from verifiers.rubrics.judge_rubric import JudgeRubric
    from verifiers.rubrics.math_rubric import MathRubric
    from verifiers.rubrics.rubric import Rubric, group_reward_func
    from verifiers.rubrics.rubric_group import RubricGroup
    from verifiers.rubrics.tool_rubric import ToolRubric
    from verifiers.types import (
        ChatMessage,
        GenerateOutputs,
        Info,
        Messages,
        ModelResponse,
        RewardFunc,
        RolloutInput,
        RolloutScore,
        RolloutScores,
        SamplingArgs,
        State,
        TrajectoryStep,
    )
