"""``verifiers.types``: the data that crosses boundaries, under the names environments import from
here (the classic module path): the shapes the classic API exchanges (``shapes``: messages,
rollout state, trajectory steps, generate outputs), the client settings (``client_config``) and
the classic output rows (``outputs``). The openai SDK's types that verifiers 0.1.x re-exported
from here are imported on first use (the openai package costs ~40 ms to import and most
processes never need them)."""

from typing import Any

from verifiers.types.client_config import (  # the client settings, a classic name here too
    ClientConfig as ClientConfig,
)
from verifiers.types.client_config import (
    ClientType as ClientType,
)
from verifiers.types.client_config import (
    EndpointApi as EndpointApi,
)
from verifiers.types.client_config import (
    EndpointClientConfig as EndpointClientConfig,
)
from verifiers.types.client_config import (
    EndpointConfig as EndpointConfig,
)
from verifiers.types.client_config import (
    Endpoints as Endpoints,
)
from verifiers.types.outputs import GenerateMetadata as GenerateMetadata
from verifiers.types.outputs import GenerateOutputs as GenerateOutputs
from verifiers.types.shapes import *  # noqa: F403  every name the classic module had

_OPENAI_TYPES = {
    "AsyncOpenAI": "openai",
    "ChatCompletion": "openai.types.chat.chat_completion",
    "ChatCompletionMessageParam": "openai.types.chat.chat_completion_message_param",
    "ChatCompletionMessageToolCall": "openai.types.chat.chat_completion_message_tool_call",
    "ChatCompletionRole": "openai.types.chat.chat_completion_role",
    "ChatCompletionToolParam": "openai.types.chat.chat_completion_tool_param",
    "Completion": "openai.types.completion",
    "FunctionDefinition": "openai.types.shared_params",
    "FunctionParameters": "openai.types.shared_params",
}


def __getattr__(name: str) -> Any:
    if name in _OPENAI_TYPES:
        import importlib

        return getattr(importlib.import_module(_OPENAI_TYPES[name]), name)
    raise AttributeError(f"module 'verifiers.types' has no attribute {name!r}")
