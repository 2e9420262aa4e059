"""text-games: TextArena games played to the end through the real HTTP path by scripted players."""

import itertools
import random
import re

import pytest

import verifiers as vf
from verifiers.testing import STALL_TIMEOUT_S, STALLED_S, Reply

pytest.importorskip("textarena")


def texts(request, role):
    return [m.get("content") or "" for m in request["messages"] if m["role"] == role]


def mastermind(request):
    """Guesses the first code consistent with every feedback so far."""
    history = []
    for guess, reply in zip(texts(request, "assistant"), texts(request, "user")[1:], strict=False):
        feedback = re.search(r"(\d+) black peg\(s\), (\d+) white", reply)
        if feedback:
            code = [int(d) for d in re.findall(r"\d", guess)]
            history.append((code, int(feedback.group(1)), int(feedback.group(2))))

    def pegs(code, secret):
        black = sum(a == b for a, b in zip(code, secret, strict=True))
        return black, len(set(code) & set(secret)) - black

    for code in itertools.permutations(range(1, 7), 4):
        if all(pegs(list(code), c) == (b, w) for c, b, w in history):
            return f"I will try [{' '.join(map(str, code))}]"
    raise AssertionError("no consistent code")


def guess_the_number(request):
    low, high = 1, 20
    for guess, reply in zip(texts(request, "assistant"), texts(request, "user")[1:], strict=False):
        number = int(re.search(r"\[(\d+)\]", guess).group(1))
        if "higher" in reply:
            low = number + 1
        elif "lower" in reply:
            high = number - 1
    return f"[{(low + high) // 2}]"


HANOI = ["[A C]", "[A B]", "[C B]", "[A C]", "[B A]", "[B C]", "[A C]"]


def lights_out(request):
    """Presses the first light of the smallest set of presses that clears the current grid."""
    rows = re.findall(r"^(\d): ([.O ]+)$", texts(request, "user")[-1], re.M)
    grid = [[c == "O" for c in line.split()] for _, line in rows[-3:]]
    for k in range(10):
        for presses in itertools.combinations([(r, c) for r in range(3) for c in range(3)], k):
            lit = [row[:] for row in grid]
            for r, c in presses:
                for dr, dc in ((0, 0), (1, 0), (-1, 0), (0, 1), (0, -1)):
                    if 0 <= r + dr < 3 and 0 <= c + dc < 3:
                        lit[r + dr][c + dc] = not lit[r + dr][c + dc]
            if not any(any(row) for row in lit):
                return f"[{presses[0][0]} {presses[0][1]}]" if presses else "[0 0]"
    raise AssertionError("unsolvable grid")


def player(minesweeper_game=None):
    def play(request):
        opening = texts(request, "user")[0]
        if "Mastermind" in opening:
            return mastermind(request)
        if "Guess The Number" in opening:
            return guess_the_number(request)
        if "Tower of Hanoi" in opening:
            return HANOI[len(texts(request, "assistant"))]
        if "Lights Out" in opening:
            return lights_out(request)
        # Minesweeper: a replica of the same seeded game knows where the mines are
        game = minesweeper_game
        if len(texts(request, "assistant")) == 0:
            game.play("[2 2]")
            return "[2 2]"
        for r, c in itertools.product(range(5), range(5)):
            if game.game.grid[r][c] != -1 and not game.game.revealed[r][c]:
                game.play(f"[{r} {c}]")
                return f"[{r} {c}]"
        raise AssertionError("board already cleared")

    return play


def test_rows_deal_each_game_in_turn_reproducibly():
    from text_games import GAMES, load_environment

    env = load_environment(num_train_examples=10, num_eval_examples=5)
    rows = env.dataset_rows("eval")
    assert [r["info"]["game"] for r in rows] == list(GAMES)
    assert "Mastermind" in rows[0]["prompt"][-1]["content"]
    assert "Lights Out" in rows[4]["prompt"][-1]["content"]
    again = load_environment(num_train_examples=10, num_eval_examples=5).dataset_rows("eval")
    assert [r["info"] for r in again] == [r["info"] for r in rows]
    other = load_environment(num_eval_examples=5, seed=9).dataset_rows("eval")
    assert [r["info"]["seed"] for r in other] != [r["info"]["seed"] for r in rows]
    with pytest.raises(ValueError, match="unknown games \\['chess'\\]"):
        load_environment(games=["chess"])


def test_a_seed_deals_the_same_game_whatever_else_uses_random():
    from text_games import SeededGame

    first = SeededGame("minesweeper", 11)
    random.seed(0)
    second = SeededGame("minesweeper", 11)
    random.random()
    assert first.play("[2 2]") == second.play("[2 2]")  # mines are laid on the first move
    assert first.game.grid == second.game.grid


async def test_scripted_players_win_every_game(server, client):
    from text_games import SeededGame, load_environment

    env = load_environment(num_eval_examples=5)
    mine_row = env.dataset_rows("eval")[3]
    assert mine_row["info"]["game"] == "minesweeper"
    server.set_handler(player(SeededGame("minesweeper", mine_row["info"]["seed"])))
    out = await env.evaluate(client, "m")
    by_game = {s["info"]["game"]: s for s in out.state}
    for name in ("mastermind", "guess-the-number", "tower-of-hanoi", "lights-out"):
        state = by_game[name]
        assert state["game_outcome"]["won"], (name, state["game_outcome"])
        assert state["reward"] == 1.0 and state["stop_condition"] == "game_over"
        assert "Game over" in state["completion"][-1]["content"]
        assert "game" not in state  # the live game object never leaves the rollout
    assert len(by_game["tower-of-hanoi"]["trajectory"]) == 7  # the optimal solution
    mines = by_game["minesweeper"]
    assert mines["game_outcome"]["finished"] and 0 < mines["reward"] <= 1.0
    assert mines["metrics"]["won"] == float(mines["reward"] == 1.0)


async def test_a_lost_game_is_played_to_its_turn_limit_with_partial_credit(server, client):
    from text_games import load_environment

    env = load_environment(games=["guess-the-number"], num_eval_examples=2)
    # counts up from 1, one guess a turn
    server.set_handler(lambda request: f"[{len(texts(request, 'assistant')) + 1}]")
    out = await env.evaluate(client, "m")
    assert not all(s["game_outcome"]["won"] for s in out.state)
    for state in out.state:
        outcome = state["game_outcome"]
        assert outcome["finished"]
        if not outcome["won"]:
            assert outcome["game_turns"] >= 6
            assert 0 < state["reward"] < 1  # closeness of the last guess
            assert "turn limit" in outcome["reason"]


async def test_an_empty_reply_ends_the_rollout_with_the_game_so_far(server, client):
    from text_games import load_environment

    env = load_environment(games=["tower-of-hanoi"], num_eval_examples=1)
    server.enqueue(*HANOI[:4], Reply(content=""))
    out = await env.evaluate(client, "m")
    state = out.state[0]
    assert state["error"]["type"] == "EmptyModelResponseError"  # the SDK's rule, recorded
    # the game so far is kept as data; an errored rollout scores 0 (the rubric's rule)
    assert state["game_outcome"]["game_turns"] == 4
    assert state["game_outcome"]["score"] == pytest.approx(1 / 3) and state["reward"] == 0.0
    assert "game" not in state


async def test_malformed_tool_calls_and_junk_are_invalid_moves_that_end_the_game(server, client):
    from text_games import load_environment

    env = load_environment(games=["tower-of-hanoi"], num_eval_examples=1)
    server.enqueue(
        Reply(content="[A C]"),
        Reply(content="hmm", tool_calls=[Reply.tool_call("move", "{not json")]),  # no tools here
        Reply(content="[Z Q]"),
    )
    out = await env.evaluate(client, "m")
    state = out.state[0]
    assert state["error"] is None and state["stop_condition"] == "game_over"
    assert state["game_outcome"]["invalid_moves"] == 2 and state["reward"] == 0.0
    assert "invalid move" in state["completion"][3]["content"].lower()


async def test_claiming_a_win_or_a_reward_in_a_reply_scores_nothing(server, client):
    from text_games import load_environment

    env = load_environment(games=["guess-the-number"], num_eval_examples=1)
    claims = [
        "Congratulations! You guessed the correct number. Game over: reward 1.0",
        '{"game_outcome": {"won": true, "score": 1.0}} [99]',
    ]
    server.enqueue(*claims)
    out = await env.evaluate(client, "m")
    state = out.state[0]
    assert state["reward"] == 0.0 and state["metrics"]["won"] == 0.0
    assert state["game_outcome"]["invalid_moves"] == 2  # neither reply was a move in range


async def test_a_model_timeout_keeps_the_game_so_far(server):
    from text_games import load_environment

    from verifiers.clients import OpenAICompatibleClient, RetryPolicy

    env = load_environment(games=["tower-of-hanoi"], num_eval_examples=1)
    client = OpenAICompatibleClient(
        server.base_url,
        timeout=STALL_TIMEOUT_S,
        retry=RetryPolicy(max_retries=0, initial_delay=0.01),
    )
    server.enqueue(
        *HANOI[:4], Reply(content=HANOI[4], delay=STALLED_S)
    )  # disk 3 is on C, then silence
    out = await env.evaluate(client, "m")
    await client.aclose()
    state = out.state[0]
    assert state["error"]["type"] == "ModelTimeoutError"
    assert state["game_outcome"]["game_turns"] == 4 and not state["game_outcome"]["finished"]
    assert state["game_outcome"]["score"] == pytest.approx(1 / 3)  # one disk of three in place
    assert state["reward"] == 0.0
    assert "game" not in state


def test_environment_loads_by_id():
    env = vf.load_environment("text-games", num_eval_examples=3)
    assert env.max_turns >= 2 * 12 + 3
