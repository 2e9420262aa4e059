"""TextArenaEnv: a single-player TextArena game (Wordle-v0 by default) as a multi-turn environment.

Needs the ``textarena`` extra (``pip install textarena``); many of its games also need NLTK
corpora, which TextArena downloads itself on first use (this SDK never does: no network at
runtime). Each row is one game whose secret word is its ``answer``; the model's guess (the
parser's answer field) is stepped, and the game's observation is the reply. When the game ends
its last observation is the ``final_env_response``.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from typing import Any

from verifiers.decorators import cleanup, stop
from verifiers.envs.multiturn_env import MultiTurnEnv
from verifiers.parsers.xml_parser import XMLParser
from verifiers.rubrics.rubric import Rubric
from verifiers.types import ChatMessage, Messages, State


def _textarena() -> Any:
    try:
        import textarena
    except ImportError as exc:
        raise ImportError(
            "TextArenaEnv needs textarena: pip install textarena (or this SDK's textarena extra)"
        ) from exc
    return textarena


class TextArenaEnv(MultiTurnEnv):
    def __init__(
        self,
        game: str = "Wordle-v0",
        num_train_examples: int = 1000,
        num_eval_examples: int = 0,
        system_prompt: str | None = None,
        parser: XMLParser | None = None,
        rubric: Rubric | None = None,
        feedback_fn: Callable[[str], str] = lambda text: text,
        seed: int = 0,
        **kwargs: Any,
    ) -> None:
        ta = _textarena()
        self.game = game
        self.seed = seed
        self.feedback_fn = feedback_fn
        self.ta_env = ta.make(env_id=game)
        probe = ta.make(env_id=game)
        probe.reset(num_players=1)
        _, user_prompt = probe.get_observation()
        rng = random.Random(seed)
        rows = [
            {"question": user_prompt, "answer": rng.choice(probe.word_list)}
            for _ in range(num_train_examples + num_eval_examples)
        ]
        parser = parser or XMLParser(fields=["think", "guess"], answer_field="guess")
        super().__init__(
            dataset=rows[:num_train_examples] or None,
            eval_dataset=rows[num_train_examples:] or None,
            system_prompt=system_prompt,
            parser=parser,
            rubric=rubric or Rubric(parser=parser),
            **kwargs,
        )

    def _game(self, state: State) -> Any:
        if "ta_env" not in state:
            game = copy.deepcopy(self.ta_env)
            game.reset(num_players=1)
            game.state.game_state["secret_word"] = state["answer"]
            state["ta_env"] = game
        return state["ta_env"]

    async def env_response(self, messages: Messages, state: State, **kwargs: Any) -> Messages:
        game = self._game(state)
        completed, _ = game.step(str(self.parser.parse_answer(messages)))
        state["game_completed"] = bool(completed)
        _, observation = game.get_observation()
        reply: list[ChatMessage] = [{"role": "user", "content": str(self.feedback_fn(observation))}]
        if completed:
            state["final_env_response"] = reply
        return reply

    @stop
    async def game_completed(self, state: State) -> bool:
        return bool(state.get("game_completed"))

    @cleanup
    async def close_game(self, state: State) -> None:
        state.pop("ta_env", None)
