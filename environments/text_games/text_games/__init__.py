"""text-games: single-player TextArena games played to the end, rewarded with partial credit.

Each row is one game (which game, and the seed that deals it). The environment keeps the real
TextArena game object for the rollout, passes each reply to the game's own ``step`` as the
move, and answers with what the game says. Rollouts end when the game does (a win, its turn
limit, or its second invalid move in a row); ``max_turns`` leaves room for that, so every game
is played to the end.

The reward is TextArena's own outcome for the game: 1 for a win, otherwise the game's partial
credit (its ``_get_percentage_completion``: pegs for Mastermind, closeness for Guess the
Number, disks in place for Tower of Hanoi, safe cells for Minesweeper, lights off for Lights
Out), clamped to [0, 1]. It is read from the game object in this process, never from the
conversation, so nothing a reply says can set it: a reply is only ever a move.

The games chosen need no downloads (TextArena's word games fetch NLTK corpora on first use).
Their randomness goes through Python's global ``random``; each game gets a generator state of
its own, swapped in for each call, so a seed deals the same game whatever else runs.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import verifiers as vf


@dataclass(frozen=True)
class GameSpec:
    env_id: str  # TextArena's id; the -raw variant: observations as the game emits them
    settings: dict[str, Any] = field(default_factory=dict)
    turn_limit: int = 10  # the game's own limit on valid moves


GAMES: dict[str, GameSpec] = {
    "mastermind": GameSpec(
        "Mastermind-v0-raw", {"code_length": 4, "num_numbers": 6, "max_turns": 10}, 10
    ),
    "guess-the-number": GameSpec(
        "GuessTheNumber-v0-raw", {"min_number": 1, "max_number": 20, "max_turns": 6}, 6
    ),
    "tower-of-hanoi": GameSpec("TowerOfHanoi-v0-raw", {"num_disks": 3, "max_turns": 12}, 12),
    "minesweeper": GameSpec(
        "Minesweeper-v0-raw", {"rows": 5, "cols": 5, "num_mines": 3, "max_turns": 12}, 12
    ),
    "lights-out": GameSpec("LightsOut-v0-raw", {"size": 3, "max_turns": 9}, 9),
}

SYSTEM_PROMPT = """You are playing a single-player text game. Read the rules and the board, then reply with your next move in square brackets, exactly as the rules show (for example [2 1 4 5] or [A C]).
Only the first bracketed move in your reply counts, so do not put brackets around anything else."""


def _textarena() -> Any:
    try:
        import textarena
    except ImportError as exc:  # the package's own dependency: only a broken install lacks it
        raise ImportError("text-games needs textarena: pip install textarena") from exc
    return textarena


class SeededGame:
    """A TextArena game with a random generator of its own (the games use the global one)."""

    def __init__(self, name: str, seed: int) -> None:
        spec = GAMES[name]
        self.name = name
        self.game = _textarena().make(env_id=spec.env_id, **spec.settings)
        self._rng_state = random.Random(seed).getstate()
        self.done = False
        self.invalid_moves = 0
        self._call(self.game.reset, 1, seed)

    def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        outer = random.getstate()
        random.setstate(self._rng_state)
        try:
            return fn(*args)
        finally:
            self._rng_state = random.getstate()
            random.setstate(outer)

    def observe(self) -> str:
        """What the game said since the last call (the player's own move is not repeated)."""
        import textarena as ta

        _, messages = self.game.get_observation()
        return "\n".join(
            text.strip()
            for _, text, kind in messages
            if kind != ta.ObservationType.PLAYER_ACTION and text.strip()
        )

    def play(self, move: str) -> str:
        done, _ = self._call(self.game.step, move)
        self.done = bool(done)
        # TextArena clears made_invalid_move inside step; a pending error count (reset by the
        # next valid move) or the game's invalid_move flag (its last chance spent) says it
        state = self.game.state
        if state.error_count > 0 or state.game_info[0].get("invalid_move"):
            self.invalid_moves += 1
        text = self.observe()
        if self.done:
            reason = self.game.state.game_info[0].get("reason") or "the game is over"
            text = f"{text}\nGame over: {reason}".strip()
        return text

    def outcome(self) -> dict[str, Any]:
        """The game's result as plain data: TextArena's reward when it ended, else its partial
        credit so far; clamped to [0, 1] (Lights Out's can go below 0)."""
        rewards = self.game.state.rewards if self.done else None
        raw = rewards[0] if rewards else self.game._get_percentage_completion()
        won = self.done and raw == 1
        return {
            "game": self.name,
            "finished": self.done,
            "won": won,
            "score": min(1.0, max(0.0, float(raw))),
            "game_turns": int(self.game.state.turn),
            "invalid_moves": self.invalid_moves,
            "reason": self.game.state.game_info[0].get("reason"),
        }


def make_rows(games: list[str], n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` games, the kinds in turn, each dealt by its own seed; the prompt is its opening."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        name = games[i % len(games)]
        game_seed = rng.randrange(2**31)
        opening = SeededGame(name, game_seed).observe()
        rows.append({"question": opening, "info": {"game": name, "seed": game_seed}})
    return rows


class TextGamesEnv(vf.MultiTurnEnv):
    """Plays one TextArena game per rollout; its state holds the live game until cleanup."""

    async def setup_state(self, state: vf.State, **kwargs: Any) -> vf.State:
        info = state["info"]
        state["game"] = SeededGame(info["game"], int(info["seed"]))
        state["game_outcome"] = state["game"].outcome()
        return await super().setup_state(state, **kwargs)

    async def env_response(self, messages: vf.Messages, state: vf.State, **kwargs: Any) -> vf.Messages:
        game: SeededGame = state["game"]
        replies = self.parser.get_assistant_messages(messages)
        move = str(replies[-1].get("content") or "") if replies else ""
        reply = [{"role": "user", "content": game.play(move) or "(the game said nothing)"}]
        state["game_outcome"] = game.outcome()
        if game.done:
            state["final_env_response"] = reply
        return reply

    @vf.stop(priority=10)
    async def game_over(self, state: vf.State) -> bool:
        return bool(state.get("game_outcome", {}).get("finished"))

    @vf.cleanup(priority=50)
    async def record_outcome(self, state: vf.State) -> None:
        """Keep the result as plain data and drop the game object (states cross processes)."""
        game = state.pop("game", None)
        if game is not None:
            state["game_outcome"] = game.outcome()


def load_environment(
    games: list[str] | None = None,
    num_train_examples: int = 1000,
    num_eval_examples: int = 50,
    seed: int = 0,
) -> vf.Environment:
    """
    Args:
        games: which games to deal (default: all of ``GAMES``), in turn.
    """
    games = list(games or GAMES)
    unknown = [g for g in games if g not in GAMES]
    if unknown:
        raise ValueError(f"unknown games {unknown}; choose from {sorted(GAMES)}")

    def outcome(state: vf.State) -> dict[str, Any]:
        return state.get("game_outcome") or {}

    def game_score(state, **kwargs) -> float:
        """TextArena's outcome: 1 for a win, else the game's partial credit."""
        return float(outcome(state).get("score", 0.0))

    def won(state, **kwargs) -> float:
        return float(bool(outcome(state).get("won")))

    def invalid_moves(state, **kwargs) -> float:
        return float(outcome(state).get("invalid_moves", 0))

    def finished(state, **kwargs) -> float:
        return float(bool(outcome(state).get("finished")))

    rubric = vf.Rubric(funcs=[game_score, won, invalid_moves, finished], weights=[1, 0, 0, 0])
    # the longest game: every valid move answered by an invalid one, plus the last reply
    max_turns = 2 * max(GAMES[g].turn_limit for g in games) + 3
    return TextGamesEnv(
        # builders, called on first use: dealing a game's opening takes a few milliseconds
        dataset=lambda: make_rows(games, num_train_examples, seed),
        eval_dataset=lambda: make_rows(games, num_eval_examples, seed + 1),
        system_prompt=SYSTEM_PROMPT,
        rubric=rubric,
        max_turns=max_turns,
    )
