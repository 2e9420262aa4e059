"""GymEnv: any Gym-style environment (``reset(seed=)``, ``step(action)``) as a multi-turn one.

Each episode is a row (its seed); the model's reply is parsed into an action, the environment
steps, and its observation is the next user message. Step rewards land on the trajectory steps
and the default rubric sums them.

By default the episode ends as in verifiers 0.1.11+: the final observation (marked "Episode
already ended.") goes to the model for one more reply, then the rollout stops.
``end_on_final_observation=True`` instead ends the rollout with the final observation as its
``final_env_response`` (no wasted model call), and steps the reply at ``max_turns`` too, so the
last action counts like every other.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from verifiers.decorators import cleanup, stop
from verifiers.envs.multiturn_env import MultiTurnEnv
from verifiers.rubrics.rubric import Rubric
from verifiers.types import ChatMessage, Message, Messages, State


class StepResetEnv(Protocol):
    def reset(self, *, seed: int) -> Any: ...
    def step(self, action: Any) -> Any: ...


def normalize_reset(out: Any) -> tuple[Any, dict[str, Any]]:
    return (out[0], dict(out[1])) if isinstance(out, tuple) and len(out) == 2 else (out, {})


def normalize_step(out: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
    """Old (obs, reward, done, info) and new (obs, reward, terminated, truncated, info) APIs."""
    if not isinstance(out, tuple | list) or len(out) not in (4, 5):
        raise TypeError(f"env.step() must return a 4- or 5-tuple, got {out!r:.100}")
    if len(out) == 5:
        obs, reward, terminated, truncated, info = out
        return obs, float(reward), bool(terminated), bool(truncated), dict(info or {})
    obs, reward, done, info = out
    return obs, float(reward), bool(done), False, dict(info or {})


def sum_step_rewards(state: State) -> float:
    return float(sum(float(s.get("reward") or 0.0) for s in state.get("trajectory") or []))


class EpisodicSumRubric(Rubric):
    def __init__(self, weight: float = 1.0, **kwargs: Any) -> None:
        super().__init__(funcs=[sum_step_rewards], weights=[weight], **kwargs)


class GymEnv(MultiTurnEnv):
    def __init__(
        self,
        env_cls: Callable[..., StepResetEnv],
        env_kwargs: dict[str, Any] | None = None,
        action_parser: Callable[[str], Any] | None = None,
        obs_to_text: Callable[[Any], str] | None = None,
        num_train_episodes: int = 1000,
        num_eval_episodes: int = 20,
        max_episode_steps: int | None = None,
        seed: int = 0,
        system_prompt: str | None = None,
        few_shot: list[dict[str, Any]] | None = None,
        parser: Any = None,
        rubric: Rubric | None = None,
        message_type: Any = "chat",
        end_on_final_observation: bool = False,
        **kwargs: Any,
    ) -> None:
        self.end_on_final_observation = end_on_final_observation
        self.num_train_episodes = num_train_episodes
        self.num_eval_episodes = num_eval_episodes
        self.env_cls = env_cls
        self.env_kwargs = dict(env_kwargs or {})
        self.action_parser = action_parser or (lambda text: text)
        self.obs_to_text_fn = obs_to_text
        self.seed = seed
        probe = env_cls(**self.env_kwargs)
        rows = []
        try:
            for i in range(num_train_episodes + num_eval_episodes):
                obs, _ = normalize_reset(probe.reset(seed=seed + i))
                rows.append({"question": self.obs_to_text(obs), "answer": str(seed + i)})
        finally:
            close = getattr(probe, "close", None)
            if close is not None:
                close()
        super().__init__(
            dataset=rows[:num_train_episodes] or None,
            eval_dataset=rows[num_train_episodes:] or None,
            rubric=rubric or EpisodicSumRubric(),
            max_turns=max_episode_steps or 1000,
            system_prompt=system_prompt,
            few_shot=few_shot,
            parser=parser,
            message_type=message_type,
            **kwargs,
        )

    def obs_to_text(self, obs: Any) -> str:
        return self.obs_to_text_fn(obs) if self.obs_to_text_fn else str(obs)

    def _episode(self, state: State) -> StepResetEnv:
        if "gym_env" not in state:
            env = self.env_cls(**self.env_kwargs)
            env.reset(seed=int(state["answer"]))
            state["gym_env"], state["gym_done"], state["gym_stepped"] = env, False, 0
        return state["gym_env"]

    def _act(self, state: State) -> str:
        """Step the episode with the last reply's action; returns the observation text."""
        env = self._episode(state)
        step = state["trajectory"][-1]
        raw = self.parser.parse_answer(step["completion"])
        if raw is None:
            completion = step["completion"]
            raw = completion[-1].get("content", "") if isinstance(completion, list) else completion
        state["gym_stepped"] = len(state["trajectory"])
        try:
            action = self.action_parser(str(raw))
        except Exception as exc:
            state["gym_done"], step["reward"] = True, 0.0
            return f"Action Parsing Error: {exc}"
        obs, reward, terminated, truncated, info = normalize_step(env.step(action))
        step["reward"] = reward
        step["extras"]["gym_info"] = info
        state["gym_done"] = terminated or truncated
        return self.obs_to_text(obs)

    def wrap_response(self, text: str) -> Messages:
        """An observation as the environment's message."""
        if self.release.typed_messages:
            from verifiers.messages.models import UserMessage

            typed: list[Message] = [UserMessage(content=text)]
            return typed
        plain: list[ChatMessage] = [{"role": "user", "content": text}]
        return plain

    async def env_response(self, messages: Messages, state: State, **kwargs: Any) -> Messages:
        text = self._act(state)
        if state["gym_done"] and not self.end_on_final_observation:
            text = f"{text}\nEpisode already ended."
        reply = self.wrap_response(text)
        if state["gym_done"] and self.end_on_final_observation:
            state["final_env_response"] = reply
        return reply

    @stop
    async def is_done(self, state: State) -> bool:
        return bool(state.get("gym_done"))

    async def render_completion(self, state: State) -> None:
        """The reply at max_turns never reaches env_response: step it here, so its reward counts
        and its observation ends the completion."""
        trajectory = state.get("trajectory") or []
        pending = state.get("gym_stepped", 0) < len(trajectory)
        if (
            self.end_on_final_observation
            and trajectory
            and pending
            and not state.get("gym_done")
            and state.get("error") is None
        ):
            state["final_env_response"] = self.wrap_response(self._act(state))
        await super().render_completion(state)

    @cleanup
    async def close_episode(self, state: State) -> None:
        env = state.pop("gym_env", None)
        close = getattr(env, "close", None)
        if close is not None:
            close()
