"""MultiTurnEnv: the model and the environment take turns until a stop condition holds."""

from __future__ import annotations

import inspect
import time
from abc import abstractmethod
from typing import Any

from verifiers import decorators
from verifiers.decorators import stop
from verifiers.envs.environment import Environment
from verifiers.errors import EnvironmentResponseError, ModelError, PromptTooLongError, to_record
from verifiers.types import Messages, RolloutInput, SamplingArgs, State


class MultiTurnEnv(Environment):
    """Subclasses implement ``env_response(messages, state)``; optionally ``setup_state`` and stop conditions.

    ``env_response`` may return new messages (and mutate ``state``) or, classic style, a
    ``(messages, state)`` tuple. A rollout ends when ``is_completed`` says so, when any ``@vf.stop``
    method returns True, at ``max_turns`` model calls, when the prompt no longer fits, or on an error;
    the reason is recorded in ``state["stop_condition"]``.
    """

    def __init__(self, max_turns: int = -1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.max_turns = max_turns
        self._stop_conditions = decorators.collect(self, "stop")
        self._stop_wants_messages = {
            c.__name__: "messages" in inspect.signature(c).parameters for c in self._stop_conditions
        }

    async def setup_state(self, state: State, **kwargs: Any) -> State:
        return state

    @abstractmethod
    async def env_response(
        self, messages: Messages, state: State, **kwargs: Any
    ) -> Messages | tuple[Messages, State]:
        """The environment's reply to the model's last message."""

    # --- built-in stop conditions ----------------------------------------------------------------
    @stop(priority=100)
    async def has_error(self, state: State) -> bool:
        return bool(state.get("error"))

    @stop(priority=90)
    async def prompt_too_long(self, state: State) -> bool:
        return bool(state.get("prompt_too_long"))

    @stop(priority=80)
    async def max_turns_reached(self, state: State) -> bool:
        return self.max_turns > 0 and state["turn"] >= self.max_turns

    async def is_completed(self, messages: Messages, state: State, **kwargs: Any) -> bool:
        """True when any stop condition holds; the first one found is recorded."""
        for condition in self._stop_conditions:
            args = (messages, state) if self._stop_wants_messages[condition.__name__] else (state,)
            result = condition(*args)
            if inspect.isawaitable(result):
                result = await result
            if result:
                state["stop_condition"] = condition.__name__
                return True
        return False

    async def _should_stop(self, messages: Messages, state: State) -> bool:
        # An overridden is_completed need not call the built-ins: turn limits, errors and
        # context overflow always end the rollout, so a forgotten check cannot loop forever.
        result = self.is_completed(messages, state)
        if inspect.isawaitable(result):
            result = await result
        if result:
            if not state.get("stop_condition"):
                state["stop_condition"] = "is_completed"
            return True
        for builtin in (self.has_error, self.prompt_too_long, self.max_turns_reached):
            if await builtin(state):
                state["stop_condition"] = builtin.__name__
                return True
        return False

    # --- the loop --------------------------------------------------------------------------------
    async def rollout(
        self,
        input: RolloutInput,
        client: Any,
        model: str,
        sampling_args: SamplingArgs | None = None,
    ) -> State:
        state = self.init_state(input, client, model, sampling_args)
        start = time.perf_counter()
        phase = "setup"
        try:
            state = await self._setup(state)
            prompt = state["prompt"]
            messages: Messages = list(prompt) if isinstance(prompt, list) else prompt
            while not await self._should_stop(messages, state):
                phase = "model"
                t0 = time.perf_counter()
                try:
                    response = await self.get_model_response(
                        client,
                        model,
                        messages,
                        oai_tools=state.get("oai_tools"),
                        sampling_args=state["sampling_args"],
                        message_type=self.message_type,
                    )
                except PromptTooLongError:
                    state["prompt_too_long"] = True
                    continue
                finally:
                    state["timing"]["model_ms"] += (time.perf_counter() - t0) * 1000
                new = self.record_model_response(state, messages, response)
                messages = self._extend(messages, state, new)
                state["turn"] += 1
                if await self._should_stop(messages, state):
                    break
                phase = "env_response"
                env_messages = await self._env_response(messages, state)
                messages = self._extend(messages, state, env_messages)
            state["is_completed"] = True
        except ModelError as exc:
            state["error"] = to_record(exc, phase="model")
            state["stop_condition"] = "has_error"
        except Exception as exc:  # environment code failed: keep what the rollout produced so far
            wrapped = EnvironmentResponseError(f"{phase} raised {type(exc).__name__}: {exc}")
            wrapped.__cause__ = exc
            state["error"] = to_record(wrapped, phase=phase)
            state["stop_condition"] = "has_error"
        finally:
            state["timing"]["generation_ms"] = (time.perf_counter() - start) * 1000
            await self.run_cleanup(state)
        return state

    async def _setup(self, state: State) -> State:
        result = self.setup_state(state)
        if inspect.isawaitable(result):
            result = await result
        return state if result is None else _as_state(result, state)

    async def _env_response(self, messages: Messages, state: State) -> Messages:
        result = self.env_response(messages, state)
        if inspect.isawaitable(result):
            result = await result
        if isinstance(result, tuple) and len(result) == 2:  # classic (messages, state)
            result, new_state = result
            if new_state is not None and new_state is not state:
                state.update({k: v for k, v in dict(new_state).items() if k != "input"})
        if result is None:
            return [] if self.message_type == "chat" else ""
        if self.message_type == "chat":
            if isinstance(result, dict):
                result = [result]
            if not isinstance(result, list) or not all(
                isinstance(m, dict) and "role" in m for m in result
            ):
                raise TypeError(
                    f"env_response must return a list of chat messages, got {result!r:.120}"
                )
        elif not isinstance(result, str):
            raise TypeError(
                f"env_response must return a string in completion mode, got {type(result).__name__}"
            )
        return result

    def _extend(self, messages: Messages, state: State, new: Messages) -> Messages:
        if isinstance(messages, str):
            state["completion"] = state["completion"] + new
            return messages + new
        messages.extend(new)
        state["completion"].extend(new)
        return messages


def _as_state(result: Any, original: State) -> State:
    if isinstance(result, State):
        return result
    if isinstance(result, dict):
        original.update({k: v for k, v in result.items() if k != "input"})
        return original
    raise TypeError(f"setup_state must return the state, got {type(result).__name__}")
