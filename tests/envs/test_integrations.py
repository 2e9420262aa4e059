"""Integrations: GymEnv (any reset/step environment) and ReasoningGymEnv (reasoning-gym's tasks)."""

from __future__ import annotations

import pytest

import verifiers as vf
from verifiers.testing import last_user_text


class GuessTheNumber:
    """A real Gym-style game: guess the episode's number; reward 1 for the right guess."""

    def reset(self, *, seed: int):
        self.target, self.steps = seed % 5, 0
        return f"Guess my number (0-4). Seed {seed}.", {}

    def step(self, action: str):
        self.steps += 1
        right = action.strip() == str(self.target)
        return ("right!" if right else "wrong"), float(right), right, False, {"steps": self.steps}


async def test_gym_env_steps_each_reply_and_ends_when_the_episode_does(server, client):
    env = vf.GymEnv(
        GuessTheNumber,
        num_train_episodes=0,
        num_eval_episodes=5,
        max_episode_steps=5,
        end_on_final_observation=True,
    )
    # guess 0, 1, 2, ... in turn: the episode for seed s is solved at guess s % 5
    server.set_handler(lambda req: str(sum(1 for m in req["messages"] if m["role"] == "assistant")))
    out = await env.evaluate(client, "m")
    for state in out.state:
        target = int(state["answer"]) % 5
        assert len(state["trajectory"]) == target + 1 and state["reward"] == 1.0
        assert state["completion"][-1] == {"role": "user", "content": "right!"}


async def test_gym_env_counts_the_reply_at_max_turns(server, client):
    env = vf.GymEnv(
        GuessTheNumber,
        num_train_episodes=0,
        num_eval_episodes=5,
        max_episode_steps=2,
        end_on_final_observation=True,
    )
    server.set_handler(lambda req: "1" if len(req["messages"]) > 2 else "9")  # right on turn 2
    out = await env.evaluate(client, "m")
    seed_1 = next(s for s in out.state if int(s["answer"]) % 5 == 1)
    assert seed_1["stop_condition"] == "max_turns_reached" and seed_1["reward"] == 1.0


async def test_reasoning_gym_env_scores_with_the_tasks_own_checker(server, client):
    pytest.importorskip("reasoning_gym")
    env = vf.ReasoningGymEnv(gym="leg_counting", num_train_examples=2, num_eval_examples=4)
    answers = {
        row["question"]: env.rg_dataset[int(row["answer"])]["answer"] for row in env.eval_dataset
    }

    def solver(request):
        question = last_user_text(request)
        return (
            f"<answer>{answers[question]}</answer>" if len(question) % 2 else "<answer>-1</answer>"
        )

    server.set_handler(solver)
    out = await env.evaluate(client, "m")
    expected = [
        1.0 if len(last_user_text({"messages": s["prompt"]})) % 2 else 0.0 for s in out.state
    ]
    assert out.reward == expected
    assert {s["info"]["source_dataset"] for s in out.state} == {"leg_counting"}
    assert "format_reward_func" in out.metrics or len(out.metrics) >= 2


@pytest.mark.parametrize("release", ["0.1.8", "0.1.9", "0.1.10", "0.3.1"])
def test_reasoning_gym_env_has_no_monitor_metric_in_any_release(release):
    """From 0.1.9, when monitor metrics arrived, ReasoningGymEnv replaced its rubric after
    building, dropping them (checked against the real 0.1.9.post3 and 0.1.10)."""
    pytest.importorskip("reasoning_gym")
    with vf.written_for(release):
        env = vf.ReasoningGymEnv(gym="leg_counting", num_train_examples=1, num_eval_examples=1)
    names = {getattr(f, "__name__", "") for f in env.rubric._get_reward_funcs()}
    assert "num_turns" not in names
