"""SingleTurnEnv: one prompt, one model reply."""

from __future__ import annotations

from typing import Any

from verifiers.envs.multiturn_env import MultiTurnEnv
from verifiers.types import Messages, State


class SingleTurnEnv(MultiTurnEnv):
    def __init__(self, **kwargs: Any) -> None:
        kwargs.pop("max_turns", None)
        super().__init__(max_turns=1, **kwargs)

    async def env_response(self, messages: Messages, state: State, **kwargs: Any) -> Messages:
        raise NotImplementedError("env_response is not implemented for SingleTurnEnv")
