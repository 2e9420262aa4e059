"""The ``null`` harness: the model and the taskset's tools, nothing else. Each turn sends the
conversation (and the tools) to the model; the reply's tool calls are run and their results
appended, until a reply calls no tool or a limit is reached. A tool is a ``BoundTool``: a
colocated toolset's method called in-process, or an MCP server's tool called over the rollout's
session (``verifiers.v1.mcp.client``); either way its result (text, or text and images) becomes
the tool message.

A tool call that cannot run (an unknown name, arguments that are not a JSON object or do not
fit the tool, a tool that raises) becomes its tool message's text, so the model sees the
failure and the rollout goes on; a failed model call ends the rollout as an error on the
trace."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from verifiers.clients.responses import field, finish_reason, first_choice, response_tokens
from verifiers.v1.chat import LeanChatClient, message_from_completion, message_to_wire, tool_to_wire
from verifiers.v1.configs.harness import HarnessConfig, NullHarnessConfig
from verifiers.v1.errors import OverlongPromptError, ProviderError
from verifiers.v1.graph import prepare_turn
from verifiers.v1.toolset import BoundTool, tool_result_content
from verifiers.v1.trace_parts import Error, ModelCall, TimeSpan
from verifiers.v1.types import (
    FinishReason,
    Message,
    MessageContent,
    Response,
    Sampling,
    Tool,
    ToolMessage,
    TurnTokens,
    Usage,
)

if TYPE_CHECKING:
    from openai import AsyncOpenAI

    from verifiers.sandbox import SandboxLimits
    from verifiers.v1.runtimes import Runtime
    from verifiers.v1.session import RolloutLimits
    from verifiers.v1.trace import Trace


_FINISH_REASONS: dict[str, FinishReason] = {r: r for r in ("stop", "length", "tool_calls")}
"""The finish reasons a trace records (any other is None)."""


def turn_tokens(completion: Any) -> TurnTokens | None:
    """The call's token ids and logprobs when the server sent them (``return_token_ids`` and
    ``logprobs`` asked, as a trainer asks vf-serve or vLLM), for the message graph's nodes."""
    if isinstance(completion, dict):  # the lean client's JSON: none asked, none sent
        choice = first_choice(completion)
        if isinstance(choice, dict) and choice.get("token_ids") is None:
            if choice.get("logprobs") is None:
                return None  # what ``response_tokens`` finds, read in two look-ups
    tokens = response_tokens(completion)
    if tokens is None:
        return None
    return TurnTokens(
        prompt_ids=tokens["prompt_ids"],
        completion_ids=tokens["completion_ids"],
        completion_logprobs=tokens["completion_logprobs"],
    )


_SAMPLING_RECORDS: dict[str, Sampling] = {}
_SAMPLING_RECORDS_CACHED = 256


def _sampling_record(sampling: dict[str, Any]) -> Sampling:
    """A model call's sampling as its ``ModelCall`` records it, validated once per distinct
    sampling and shared by the calls made with it (a run's calls all sample alike; a record
    per call was a visible share of a v1 rollout's CPU and objects)."""
    key = repr(sampling)
    record = _SAMPLING_RECORDS.get(key)
    if record is None:
        if len(_SAMPLING_RECORDS) >= _SAMPLING_RECORDS_CACHED:
            _SAMPLING_RECORDS.clear()
        record = _SAMPLING_RECORDS[key] = Sampling.model_validate(sampling)
    return record


_DEFAULT_CONFIG = NullHarnessConfig()
"""The config of a seat that sets no harness, one for every rollout (it is only read)."""


class NullHarness:
    def __init__(self, config: HarnessConfig | None = None) -> None:
        self.config = config or _DEFAULT_CONFIG

    def sandbox_limits(self) -> SandboxLimits | None:
        """The limits of the box each rollout gets (None: this harness runs in-process)."""
        return None

    def specs(self, tools: list[BoundTool]) -> list[Tool]:
        """The tools the model is offered."""
        return [t.spec for t in tools]

    def opening(self, messages: list[Message]) -> list[Message]:
        """The conversation the first model call of a rollout sends."""
        return messages

    async def call_model(
        self,
        client: AsyncOpenAI,
        model: str,
        sampling: dict[str, Any],
        trace: Trace,
        messages: list[Message],
        tools: list[BoundTool],
    ) -> None:
        """One model call on ``messages``; the reply is committed to the trace's graph."""
        specs = self.specs(tools)
        request: dict[str, Any] = {
            "model": model,
            "messages": [message_to_wire(m) for m in messages],
            **sampling,
        }
        if specs:
            request["tools"] = [tool_to_wire(s) for s in specs]
        call = ModelCall(
            model=model,
            endpoint="/chat/completions",
            sampling=_sampling_record(sampling),
            time=TimeSpan(start=time.time()),
        )
        trace.calls.append(call)
        # the pooled lean client's reply as its JSON dict (no ``ChatCompletion`` is built;
        # everything below reads either)
        create = client.create_json if isinstance(client, LeanChatClient) else None
        try:
            completion = await (create or client.chat.completions.create)(**request)
        except Exception as e:
            call.time.end = time.time()
            status = getattr(e, "status_code", None)
            text = str(e)
            kind = (
                OverlongPromptError
                if "context" in text.lower() and status == 400
                else ProviderError
            )
            call.error = Error(type=type(e).__name__, message=text, status_code=status)
            raise kind(f"model call failed: {type(e).__name__}: {text}", status_code=status) from e
        call.time.end = time.time()
        if not field(completion, "choices"):
            raise ProviderError("the model returned no choices")
        choice = first_choice(completion)
        reply = message_from_completion(field(choice, "message"))
        finish = _FINISH_REASONS.get(finish_reason(completion) or "")
        usage = Usage.from_openai(field(completion, "usage"))
        response = Response(
            id=field(completion, "id") or "",
            created=int(field(completion, "created") or 0),
            model=field(completion, "model") or model,
            message=reply,
            finish_reason=finish,
            usage=usage,
            tokens=turn_tokens(completion),
        )
        call.node = prepare_turn(trace, messages).commit(response, specs or None)
        call.finish_reason = finish
        call.usage = usage
        extra = completion if isinstance(completion, dict) else completion.model_extra
        version = (extra or {}).get("policy_version")
        call.policy_version = version if isinstance(version, int) else None

    async def run_tool(
        self,
        tools: dict[str, BoundTool],
        call: Any,
        trace: Trace,
        runtime: Runtime | None = None,
    ) -> ToolMessage:
        tool = tools.get(call.name)
        content: MessageContent
        if tool is None:
            content = f"Error: no tool named {call.name!r} (tools: {sorted(tools)})"
        else:
            try:
                arguments = json.loads(call.arguments or "{}")
                if not isinstance(arguments, dict):
                    raise ValueError("the arguments are not a JSON object")
                content = tool_result_content(await tool.call(arguments, trace.state))
            except (json.JSONDecodeError, ValueError, ValidationError) as e:
                content = f"Error: bad arguments for {call.name}: {e}"
            except Exception as e:
                content = f"Error: {call.name} raised {type(e).__name__}: {e}"
        return ToolMessage(tool_call_id=call.id, name=call.name, content=content)

    async def chat(
        self,
        client: AsyncOpenAI,
        model: str,
        sampling: dict[str, Any],
        trace: Trace,
        messages: list[Message],
        tools: list[BoundTool],
        limits: RolloutLimits,
        should_stop: Any,
        runtime: Runtime | None = None,
    ) -> list[Message]:
        """Turns until a reply calls no tool (or, checked before each model call as upstream
        does, a limit of ``limits`` is reached or a stop hook fires); the conversation so far,
        the last reply included. ``runtime`` is the rollout's
        box when ``sandbox_limits`` asked for one."""
        by_name = {t.spec.name: t for t in tools}
        if not trace.calls:
            messages = self.opening(messages)
        while True:
            reached = limits.reached(trace)
            if reached is not None:
                trace.stop(reached)
                return messages
            if await should_stop():
                return messages
            await self.call_model(client, model, sampling, trace, messages, tools)
            reply = trace.nodes[trace.calls[-1].node or 0].message
            messages = [*messages, reply]
            calls = getattr(reply, "tool_calls", None) or []
            if not calls:
                return messages
            for call in calls:
                messages.append(await self.run_tool(by_name, call, trace, runtime))
