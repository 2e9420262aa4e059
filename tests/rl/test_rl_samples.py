"""Rollouts become training samples: group advantages, masks over multi-turn rollouts, errors
and truncations as data, groups without signal left out, dynamic sampling, DAPO's overlong
penalty, batch-level reward scaling."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


from support.trainer_runs import by_reward, scripted_batch, step  # noqa: E402

from verifiers.rl.algorithm.advantages import ESTIMATORS, group_mean, leave_one_out  # noqa: E402
from verifiers.rl.algorithm.batching import (  # noqa: E402
    MissingTokensError,
    samples_from_state,
)


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_group_advantages_sum_to_zero(name):
    for rewards in ([1.0, 0.0, 0.0, 1.0], [0.3, 0.9, 0.1], [2.0, 2.0]):
        assert sum(ESTIMATORS[name](rewards)) == pytest.approx(0.0, abs=1e-9)


def test_advantage_values():
    assert group_mean([1.0, 0.0]) == [0.5, -0.5]
    # the sample std (n - 1), as DeepSeekMath/TRL: std([1, 0]) = 0.7071, plus epsilon 1e-4
    assert group_mean([1.0, 0.0], scale=True) == pytest.approx([0.7070, -0.7070], abs=1e-4)
    assert group_mean([0.5, 0.5, 0.5], scale=True) == [0.0, 0.0, 0.0]  # uniform: no signal
    assert leave_one_out([1.0, 0.0, 0.0]) == [1.0, -0.5, -0.5]


def test_multi_turn_rollout_becomes_one_masked_sample():
    state = {"reward": 1.0, "trajectory": [step([1, 2], [3, 4]), step([1, 2, 3, 4, 9, 9], [5])]}
    (sample,) = samples_from_state(state, advantage=0.5, policy_version=2)
    assert sample.input_ids == [1, 2, 3, 4, 9, 9, 5]
    assert sample.loss_mask == [0, 0, 1, 1, 0, 0, 1]  # environment tokens (9, 9) are never trained
    assert sample.old_logprobs == [0, 0, -0.5, -0.5, 0, 0, -0.5] and sample.policy_version == 2


def test_an_empty_reply_is_an_error_on_the_rollout_and_still_a_training_sample():
    """The policy chose to say nothing (one end-of-sequence token): the rollout carries the
    error, and the trainer still learns from those tokens with the rollout's reward."""
    import verifiers as vf
    from verifiers.errors import EmptyModelResponseError, ModelConnectionError
    from verifiers.rl.training.orchestrator import _trainable_error

    env = vf.SingleTurnEnv(dataset=[{"question": "q", "answer": "a"}], rubric=vf.Rubric())
    state = {
        "responses": [],
        "trajectory": [],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0},
    }
    reply = {
        "prompt_token_ids": [1, 2, 3],
        "choices": [
            {
                "message": {"role": "assistant", "content": ""},
                "finish_reason": "stop",
                "token_ids": [0],
                "logprobs": {"content": [{"token": "<eos>", "logprob": -0.25}]},
            }
        ],
    }
    with pytest.raises(EmptyModelResponseError):
        env.record_model_response(state, [{"role": "user", "content": "q"}], reply)
    state.update(reward=0.0, error=EmptyModelResponseError("empty"))
    assert _trainable_error(state)
    (sample,) = samples_from_state(state, advantage=-0.5, policy_version=0)
    assert sample.input_ids == [1, 2, 3, 0] and sample.loss_mask == [0, 0, 0, 1]
    assert sample.old_logprobs == [0, 0, 0, -0.25] and sample.advantage == -0.5
    assert not _trainable_error({**state, "error": ModelConnectionError("down")})


def test_re_rendered_history_starts_a_new_sample():
    state = {"reward": 0.0, "trajectory": [step([1, 2], [3, 4]), step([1, 2, 7, 9], [5])]}
    assert [s.input_ids for s in samples_from_state(state, 0.0, 0)] == [
        [1, 2, 3, 4],
        [1, 2, 7, 9, 5],
    ]
    with pytest.raises(MissingTokensError, match="return_token_ids"):
        samples_from_state({"trajectory": [{"tokens": None}]}, 0.0, 0)


def test_groups_with_no_advantage_are_left_out_and_counted():
    batch = scripted_batch(["all", "none", "long", "long"])
    assert batch.stats["zero_advantage_groups"] == 2 and batch.stats["groups_trained"] == 2
    assert batch.stats["solve_all"] == 0.25 and batch.stats["solve_none"] == 0.25
    assert len(batch.samples) == 8  # the two "long" groups only
    kept = scripted_batch(["all", "none", "long", "long"], filter_zero_advantage=False)
    assert len(kept.samples) == 16 and sum(s.advantage == 0 for s in kept.samples) == 8


def test_a_failed_rollout_leaves_the_baseline_instead_of_counting_as_zero():
    import statistics

    batch = scripted_batch(["error", "error", "error", "error"])
    assert batch.errors == 4 and len(batch.samples) == 12
    rewards = [1.0, 0.0, 1.0]  # the three that answered; not [1, 0, 1, 0]
    mean, std = statistics.fmean(rewards), statistics.stdev(rewards)
    expected = sorted((r, round((r - mean) / (std + 1e-4), 4)) for r in rewards)
    assert by_reward(batch) == sorted(expected * 4)


def test_truncated_completions_are_kept_masked_or_penalized():
    rewards = [1.0, 0.0, 0.5, 1.0]  # the fourth hit max_tokens
    keep = scripted_batch(["long"] * 4)
    assert keep.stats["truncated_fraction"] == 0.25 and len(keep.samples) == 16
    mask = scripted_batch(["long"] * 4, overlong="mask")
    assert len(mask.samples) == 12  # the truncated one trains nothing, but is in the baseline
    from verifiers.rl.algorithm.advantages import group_mean

    in_baseline = dict(zip(rewards[:3], group_mean(rewards, scale=True)[:3], strict=True))
    assert all(s.advantage == pytest.approx(in_baseline[round(s.reward, 3)]) for s in mask.samples)
    # the soft penalty starts at max_tokens - buffer = 6: the 4-token replies keep their reward
    penalized = scripted_batch(
        ["long"] * 4, overlong="penalize", overlong_penalty=1.0, max_tokens=8, overlong_buffer=2
    )
    lowest = min(s.advantage for s in penalized.samples)
    # the truncated "AAAA" scores 1 - 1 = 0 for its advantage: below the correct, untruncated ones
    truncated = [s for s in penalized.samples if s.reward == 1.0 and s.advantage < 0]
    assert len(truncated) == 4 and lowest < 0


def test_dynamic_sampling_refills_the_batch_from_further_examples():
    rows = ["all", "none", "all", "none", "long", "long", "long", "long"]
    plain = scripted_batch(rows)
    refilled = scripted_batch(rows, dynamic_sampling=True, max_sampling_rounds=4)
    assert plain.stats["groups_trained"] < 4 and plain.stats["sampling_rounds"] == 1
    # rounds of further examples until the step has its 4 groups, and no more than 4
    assert refilled.stats["groups_trained"] == 4 and refilled.stats["sampling_rounds"] > 1
    assert len(refilled.samples) == 16


def test_dynamic_sampling_never_draws_an_example_twice_in_a_step():
    """Refills are further examples: each round takes the next slice of one shuffle per step
    (independent draws per round repeated examples, so a group could train twice)."""
    import verifiers as vf
    from verifiers.rl.training.orchestrator import Orchestrator

    env = vf.SingleTurnEnv(
        dataset=[{"question": f"q{i}", "answer": "a"} for i in range(10)], rubric=vf.Rubric()
    )
    orch = Orchestrator(env, None, "m", examples_per_step=3, dynamic_sampling=True)
    for step_index in range(20):
        drawn = [row["question"] for r in range(4) for row in orch.examples_for(step_index, r)]
        assert len(drawn) == len(set(drawn)) == 10  # 3 + 3 + 3 + the last 1, each once
        assert orch.examples_for(step_index, 4) == []


def test_overlong_penalty_is_dapos_soft_linear_punishment():
    """0 up to max_tokens - L_cache, then linear to -penalty at max_tokens; truncated: all of it
    (a flat penalty on truncated replies before)."""
    import verifiers as vf
    from verifiers.rl.training.orchestrator import Orchestrator

    env = vf.SingleTurnEnv(dataset=[{"question": "q", "answer": "a"}], rubric=vf.Rubric())
    orch = Orchestrator(
        env, None, "m", max_tokens=20, overlong="penalize", overlong_buffer=8, overlong_penalty=0.5
    )

    def state(*turns, truncated=False):
        trajectory = [{"tokens": {"completion_ids": [1] * n}} for n in turns]
        return {"trajectory": trajectory, "is_truncated": truncated}

    assert orch.overlong_penalty(state(12)) == 0.0  # 20 - 8 = 12: the penalty starts after
    assert orch.overlong_penalty(state(16)) == pytest.approx(-0.25)  # halfway into the buffer
    assert orch.overlong_penalty(state(10, 18)) == pytest.approx(-0.375)  # its longest turn
    assert orch.overlong_penalty(state(20, truncated=True)) == -0.5
    default = Orchestrator(env, None, "m", max_tokens=20, overlong="penalize")
    assert default.config.overlong_start() == 16  # L_cache = a fifth of max_tokens (DAPO)


def test_batch_level_reward_scaling_divides_by_the_std_of_the_whole_batch():
    import statistics

    from verifiers.rl.algorithm.advantages import batch_advantages

    groups = [[1.0, 0.0], [0.5, 0.5, 0.0, 1.0]]
    pooled = statistics.stdev([r for g in groups for r in g])
    expected = [[0.5 / (pooled + 1e-4), -0.5 / (pooled + 1e-4)]]
    assert batch_advantages("group_mean_batch_std", groups)[0] == pytest.approx(expected[0])
    per_group = batch_advantages("group_mean_std", groups)
    assert per_group[0] != pytest.approx(expected[0])  # the group's own std (0.707) differs
    batch = scripted_batch(["long"] * 4, advantage="group_mean_batch_std")
    rewards = [1.0, 0.0, 0.5, 1.0]
    scale = statistics.stdev(rewards * 4) + 1e-4  # every reward the step drew
    mean = statistics.fmean(rewards)
    assert by_reward(batch) == sorted((r, round((r - mean) / scale, 4)) for r in rewards * 4)
