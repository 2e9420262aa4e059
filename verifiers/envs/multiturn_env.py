"""MultiTurnEnv: the model and the environment take turns until a stop condition holds.

The loop is the classic one: ``get_prompt_messages`` (the environment's reply to the last turn),
``get_model_response``, ``add_model_response``, until ``is_completed``. What this SDK adds: any
exception becomes data on the rollout (``state["error"]``, a ``vf.Error``) and ends it; the
built-in limits (errors, overlong prompts, ``max_turns``, ``final_env_response``) hold even when a
subclass overrides ``is_completed`` without calling it; and cleanup runs exactly once, however the
rollout ends.
"""

from __future__ import annotations

import inspect
import time
from abc import abstractmethod
from typing import Any

from verifiers.concurrency import maybe_await
from verifiers.decorators import stop
from verifiers.envs.environment import Environment
from verifiers.envs.messages import concat_messages, normalize_env_messages
from verifiers.errors import OverlongPromptError, record_error
from verifiers.types import Messages, RolloutInput, SamplingArgs, State, TrajectoryStep


class MultiTurnEnv(Environment):
    """Subclasses implement ``env_response(messages, state)``; optionally ``setup_state`` and
    ``@vf.stop`` methods.

    ``env_response`` returns the environment's new messages (and may mutate ``state``); setting
    ``state["final_env_response"]`` ends the rollout with those messages appended, so the model's
    last reply is still answered. The reason a rollout ended is ``state["stop_condition"]``.
    """

    def __init__(self, max_turns: int = -1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.max_turns = max_turns
        self._completed_takes_messages = _takes_messages(type(self).is_completed)
        self._model_call_takes_state = _first_param(type(self).get_model_response) == "state"

    async def setup_state(self, state: State, **kwargs: Any) -> State:
        return state

    def monitor_metrics(self, state: State) -> dict[str, float]:
        return {"num_turns": float(len(state.get("trajectory") or []))}

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
        timing = state["timing"]
        elapsed = (time.time() - timing.get("start_time", time.time())) * 1000
        timing["generation_ms"] = elapsed
        timing["total_ms"] = elapsed
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
        return concat_messages([messages, normalize_env_messages(reply, self.message_type)])

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
                [
                    conversation,
                    normalize_env_messages(final, self.message_type, "final_env_response"),
                ]
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
        if self._model_call_takes_state:
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
        try:
            result = await maybe_await(self.setup_state, state)
            if isinstance(result, dict) and result is not state:
                state.update({k: v for k, v in dict.items(result) if k != "input"})
        except Exception as exc:
            record_error(state, exc, phase="setup")
        phase = "env_response"
        try:
            while not await self._check_completed(state):
                try:
                    phase = "env_response"
                    prompt_messages = await self.get_prompt_messages(state)
                    dict.__setitem__(state, "_next_prompt", prompt_messages)
                    if state.get("final_env_response") is not None:
                        continue
                    phase = "model"
                    t0 = time.perf_counter()
                    try:
                        response = await self._call_model(state, prompt_messages)
                    finally:
                        state["timing"]["model_ms"] += (time.perf_counter() - t0) * 1000
                    phase = "add_model_response"
                    await self.add_model_response(state, prompt_messages, response)
                    dict.pop(state, "_next_prompt", None)
                except OverlongPromptError:
                    state["prompt_too_long"] = True
                    state["is_truncated"] = True
                except Exception as exc:
                    record_error(state, exc, phase=phase)
        finally:  # cancelled or interrupted: the state is still finished and cleaned up once
            if not dict.get(state, "_finished"):
                await self._finish(state, "has_error" if state.get("error") else "cancelled")
            dict.pop(state, "_next_prompt", None)
            dict.pop(state, "_finished", None)
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
