"""MultiTurnEnv: the model and the environment take turns until a stop condition holds.

The loop is the classic one: ``get_prompt_messages`` (the environment's reply to the last turn),
``get_model_response``, ``add_model_response``, until ``is_completed``. What this SDK adds: any
exception becomes data on the rollout (``state["error"]``, a ``vf.Error``) and ends it; the
built-in limits (errors, overlong prompts, ``max_turns``, ``final_env_response``) hold even when a
subclass overrides ``is_completed`` without calling it; and cleanup runs exactly once, however the
rollout ends.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from abc import abstractmethod
from typing import Any

from verifiers.classic.error_data import error_chain
from verifiers.concurrency import call_with_named, maybe_await
from verifiers.decorators import cleanup, stop
from verifiers.envs.environment import Environment
from verifiers.envs.messages import concat_messages, normalize_env_messages
from verifiers.envs.model_turn import add_usage
from verifiers.errors import EmptyModelResponseError, OverlongPromptError, record_error
from verifiers.messages import timing
from verifiers.messages.convert import normalize_messages
from verifiers.messages.models import Response
from verifiers.rubrics.rubric import Rubric
from verifiers.types import Messages, RolloutInput, SamplingArgs, State, TrajectoryStep


class MultiTurnMonitorRubric(Rubric):
    """``num_turns`` as a metric (weight 0), added by multi-turn environments from 0.1.9 on."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.add_metric(self.num_turns)

    async def num_turns(self, state: State) -> float:
        return float(len(state.get("trajectory") or []))


class MultiTurnEnv(Environment):
    """Subclasses implement ``env_response(messages, state)``; optionally ``setup_state`` and
    ``@vf.stop`` methods.

    ``env_response`` returns the environment's new messages (and may mutate ``state``); setting
    ``state["final_env_response"]`` ends the rollout with those messages appended, so the model's
    last reply is still answered. The reason a rollout ended is ``state["stop_condition"]``.
    """

    def __init__(
        self, max_turns: int = -1, timeout_seconds: float | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.max_turns = max_turns
        self.timeout_seconds = timeout_seconds
        self.max_total_completion_tokens: int = -1
        self._completed_takes_messages = _takes_messages(type(self).is_completed)
        self._model_call_takes_state = _first_param(type(self).get_model_response) in (
            "state",
            "args",
        )
        if self.release.monitor_metrics:
            self.add_rubric(MultiTurnMonitorRubric())

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.release.render_state_cleanup:
            self._cleanup_handlers = [
                h for h in self._cleanup_handlers if h.__name__ != "render_state"
            ]

    async def setup_state(self, state: State, **kwargs: Any) -> State:
        return state

    @cleanup(priority=100)
    async def render_state(self, state: State) -> None:
        """Close the generation timing and render ``state["completion"]`` before the other
        cleanup handlers run (verifiers 0.1.14+; earlier releases render it just before)."""
        timing.end_generation(state["timing"])
        await self.render_completion(state)

    def set_max_total_completion_tokens(self, max_total_completion_tokens: int) -> None:
        self.max_total_completion_tokens = max_total_completion_tokens

    def mark_timed_out(self, state: State) -> None:
        state["timed_out"] = True
        state["is_completed"] = True
        state["stop_condition"] = "timeout_reached"

    @abstractmethod
    async def env_response(self, messages: Messages, state: State, **kwargs: Any) -> Messages:
        """The environment's reply to the model's last message."""

    # --- built-in stop conditions ----------------------------------------------------------------
    @stop(priority=100)  # errors first: nothing else should run on a broken rollout
    async def has_error(self, state: State, **kwargs: Any) -> bool:
        return state.get("error") is not None

    @stop
    async def prompt_too_long(self, state: State) -> bool:
        return bool(state.get("prompt_too_long", False))

    @stop
    async def max_turns_reached(self, state: State) -> bool:
        return self.max_turns > 0 and len(state["trajectory"]) >= self.max_turns

    @stop
    async def has_final_env_response(self, state: State) -> bool:
        return state.get("final_env_response") is not None

    @stop
    async def max_total_completion_tokens_reached(self, state: State) -> bool:
        if self.max_total_completion_tokens <= 0:
            return False
        usage = state.get("usage") or {}
        spent = usage.get("output_tokens", usage.get("completion_tokens", 0)) or 0
        return spent >= self.max_total_completion_tokens

    _BUILTIN_STOPS = ("has_error", "prompt_too_long", "max_turns_reached", "has_final_env_response")

    async def is_completed(self, state: State, **kwargs: Any) -> bool:
        """True when any stop condition holds; records it and finishes the rollout's state."""
        for condition in self._stop_conditions:
            try:
                done = await maybe_await(condition, state)
            except Exception as exc:  # a broken stop condition ends the rollout as an error
                record_error(state, exc, phase=f"stop condition {condition.__name__}")
                done = True
                condition = self.has_error
            if done:
                await self._finish(state, condition.__name__)
                return True
        return False

    async def _check_completed(self, state: State) -> bool:
        # A subclass may override is_completed (classic or older ``(messages, state)`` signature)
        # without calling the built-ins: errors and limits still end the rollout.
        if dict.get(state, "_finished"):
            return True
        try:
            if self._completed_takes_messages:
                done = await maybe_await(self.is_completed, self._conversation(state), state)
            else:
                done = await maybe_await(self.is_completed, state)
        except Exception as exc:
            record_error(state, exc, phase="is_completed")
            done = False
        if done:
            await self._finish(state, state.get("stop_condition") or "is_completed")
            return True
        for name in self._BUILTIN_STOPS:
            if await getattr(self, name)(state):
                await self._finish(state, name)
                return True
        return False

    async def _finish(self, state: State, condition: str) -> None:
        if dict.get(state, "_finished"):
            return
        dict.__setitem__(state, "_finished", True)
        state["is_completed"] = True
        state["stop_condition"] = condition
        if any(step.get("is_truncated") for step in state.get("trajectory") or []):
            state["is_truncated"] = True
        if condition == "has_error":
            self.logger.error(f"Aborted rollout due to {error_chain(state.get('error'))}")
        if not any(h.__name__ == "render_state" for h in self._cleanup_handlers):
            timing.end_generation(state["timing"])
            try:
                await self.render_completion(state)
            except Exception as exc:
                record_error(state, exc, phase="render_completion")
        await self._cleanup(state)

    # --- the turn --------------------------------------------------------------------------------
    async def get_prompt_messages(self, state: State) -> Messages:
        """The next prompt: the dataset prompt first, then the conversation plus ``env_response``."""
        if not state["trajectory"]:
            return state["prompt"]
        messages = self._conversation(state)
        reply = await maybe_await(self.env_response, messages, state)
        if isinstance(reply, tuple) and len(reply) == 2 and isinstance(reply[1], dict):
            new_state = reply[1]  # the older ``(messages, state)`` return
            if new_state is not state:
                state.update({k: v for k, v in dict.items(new_state) if k != "input"})
            reply = reply[0]
        return concat_messages([messages, self._env_messages(reply, "env_response")])

    def _env_messages(self, reply: Any, what: str) -> Messages:
        """An environment's reply in this release's message form."""
        if self.release.typed_messages:
            if reply is None:
                return []
            if isinstance(reply, dict):
                reply = [reply]
            return normalize_messages(reply, field_name=what)
        return normalize_env_messages(reply, self.message_type, what)

    def _conversation(self, state: State) -> Messages:
        if not state["trajectory"]:
            prompt = state["prompt"]
            return list(prompt) if isinstance(prompt, list) else prompt
        last = state["trajectory"][-1]
        return concat_messages([last["prompt"], last["completion"]])

    async def render_completion(self, state: State) -> None:
        """``state["completion"]``: everything after the prompt, plus any ``final_env_response``."""
        if not state["trajectory"]:
            state["completion"] = [] if self.message_type == "chat" else ""
            return
        conversation = self._conversation(state)
        pending = dict.get(state, "_next_prompt")
        if (
            state.get("error") is not None
            and isinstance(pending, list)
            and len(pending) > len(conversation)
        ):
            conversation = pending  # the model call after this env reply failed: keep the reply
        final = state.get("final_env_response")
        if final:
            conversation = concat_messages(
                [conversation, self._env_messages(final, "final_env_response")]
            )
        state["completion"] = conversation[len(state["prompt"]) :]

    async def add_trajectory_step(self, state: State, trajectory_step: TrajectoryStep) -> None:
        """Override to set intermediate rewards, advantages or extra metadata on a step."""
        state["trajectory"].append(trajectory_step)

    async def add_model_response(
        self, state: State, prompt_messages: Messages, response: Any
    ) -> None:
        """Record the model's reply as a trajectory step (raises EmptyModelResponseError after
        recording an empty one)."""
        step = self.make_step(state, prompt_messages, response)
        await self.add_trajectory_step(state, step)
        self.check_not_empty(step)

    async def _call_model(self, state: State, prompt_messages: Messages) -> Any:
        if self._model_call_takes_state or self.release.typed_messages:
            return await self.get_model_response(state, prompt_messages)
        return await self.get_model_response(
            client=state["client"],
            model=state["model"],
            prompt=prompt_messages,
            oai_tools=state.get("oai_tools"),
            sampling_args=state.get("sampling_args"),
            message_type=self.message_type,
        )

    # --- the loop --------------------------------------------------------------------------------
    async def rollout(
        self,
        input: RolloutInput,
        client: Any,
        model: str,
        sampling_args: SamplingArgs | None = None,
    ) -> State:
        state = await self.init_state(input, client, model, sampling_args)
        timing.start_generation(state["timing"])
        try:
            if self.timeout_seconds is None:
                state = await self._run_turns(state)
            else:
                try:
                    state = await asyncio.wait_for(self._run_turns(state), self.timeout_seconds)
                except TimeoutError:
                    self.mark_timed_out(state)
        finally:  # cancelled, timed out or interrupted: the state is still finished, once
            if not dict.get(state, "_finished"):
                if state.get("stop_condition") == "timeout_reached":
                    await self._finish(state, "timeout_reached")
                else:
                    await self._finish(state, "has_error" if state.get("error") else "cancelled")
            dict.pop(state, "_next_prompt", None)
            dict.pop(state, "_finished", None)
        return state

    async def _setup(self, state: State) -> State:
        started = time.time()
        try:
            result = await maybe_await(self.setup_state, state)
            if isinstance(result, dict) and result is not state:
                state.update({k: v for k, v in dict.items(result) if k != "input"})
            for handler in self._setup_handlers:
                await call_with_named(handler, state, state=state, env=self)
        except Exception as exc:
            record_error(state, exc, phase="setup")
        finally:
            timing.set_setup(state["timing"], started, time.time())
        return state

    async def _run_turns(self, state: State) -> State:
        state = await self._setup(state)
        phase = "env_response"
        while not await self._check_completed(state):
            try:
                phase = "env_response"
                started = time.time()
                prompt_messages = await self.get_prompt_messages(state)
                if state["trajectory"]:
                    timing.add_span(state["timing"], "env", started, time.time())
                if self.release.typed_messages:
                    prompt_messages = normalize_messages(prompt_messages, field_name="prompt")
                dict.__setitem__(state, "_next_prompt", prompt_messages)
                if state.get("final_env_response") is not None:
                    continue
                phase = "model"
                started = time.time()
                try:
                    response = await self._call_model(state, prompt_messages)
                except EmptyModelResponseError as exc:
                    # an empty reply is a turn the policy took: its step (tokens included) is
                    # kept, so a trainer can penalize it rather than never see it
                    reply = getattr(exc, "response", None)
                    if reply is not None:
                        if isinstance(reply, Response):  # a dict-era step counts its own
                            add_usage(state, reply)
                        await self.add_trajectory_step(
                            state, self.make_step(state, prompt_messages, reply)
                        )
                    raise
                finally:
                    timing.add_span(state["timing"], "model", started, time.time())
                phase = "add_model_response"
                await self.add_model_response(state, prompt_messages, response)
                dict.pop(state, "_next_prompt", None)
            except OverlongPromptError as exc:
                state["prompt_too_long"] = True
                state["is_truncated"] = True
                if not state["trajectory"]:
                    # the first prompt already exceeds the context: nothing was generated, so
                    # the rollout failed (counted as an error), not a stop after some turns
                    record_error(state, exc, phase=phase)
            except Exception as exc:
                record_error(state, exc, phase=phase)
        return state


def _takes_messages(method: Any) -> bool:
    try:
        return "messages" in inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False


def _first_param(method: Any) -> str | None:
    try:
        params = [p for p in inspect.signature(method).parameters if p != "self"]
    except (TypeError, ValueError):
        return None
    return params[0] if params else None
