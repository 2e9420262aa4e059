"""Shared prompts (``trainer.shared_prompts``): a group's prompt computed once gives the same
loss, metrics, gradient and weights after a step as every sample computed whole."""

from __future__ import annotations

import copy
import math

import pytest

torch = pytest.importorskip("torch")

from support.toy import tiny_llama  # noqa: E402

from verifiers.rl.algorithm.batching import Sample  # noqa: E402
from verifiers.rl.algorithm.trainer import Trainer  # noqa: E402
from verifiers.rl.configs.rl import TrainerConfig  # noqa: E402

VOCAB = 64


def grouped_samples(seed: int = 4) -> list[Sample]:
    """Three prompts of different lengths, four completions each of different lengths, one
    sample of two model turns (a tool reply between them), advantages of both signs and
    inference logprobs a little off the uniform policy (some ratios clip)."""
    g = torch.Generator().manual_seed(seed)
    uniform = -math.log(VOCAB)
    samples = []
    for group, prompt_len in enumerate((5, 9, 7)):
        prompt = torch.randint(1, VOCAB, (prompt_len,), generator=g).tolist()
        for i in range(4):
            completion = torch.randint(1, VOCAB, (2 + 3 * i + group,), generator=g).tolist()
            ids, mask = prompt + completion, [0] * prompt_len + [1] * len(completion)
            if group == 1 and i == 2:  # a second turn: environment tokens, then the model's
                ids += [3, 4, 5, 7, 8, 9, 10]
                mask += [0, 0, 0, 1, 1, 1, 1]
            noise = torch.randn(len(ids), generator=g) * 0.3
            old = [uniform + float(n) if m else 0.0 for m, n in zip(mask, noise, strict=True)]
            samples.append(Sample(ids, mask, old, float(i) - 1.5 + 0.25 * group, 0.0, 0))
    samples[0].record = samples[5].record = True
    return samples


def step(config: TrainerConfig, shared: bool, samples: list[Sample]) -> tuple[Trainer, dict]:
    model = tiny_llama(VOCAB)
    config = config.model_copy(update={"shared_prompts": shared})
    trainer = Trainer(model, config)
    metrics = trainer.gradients(copy.deepcopy(samples))
    return trainer, metrics


def grads(trainer: Trainer) -> torch.Tensor:
    return torch.cat([p.grad.flatten() for p in trainer.model.parameters() if p.grad is not None])


SETTINGS = {
    "grpo": TrainerConfig(packing="off"),
    "one-per-micro-batch": TrainerConfig(packing="off", micro_batch_size=1),
    "tight-budget": TrainerConfig(packing="off", max_tokens_per_micro_batch=24),
    "gspo-entropy-kl": TrainerConfig(
        packing="off", loss="gspo", entropy_coef=0.01, kl_beta=0.1, micro_batch_size=3
    ),
    "cispo-truncated": TrainerConfig(
        packing="off", loss="cispo", importance={"token": "truncate", "token_high": 1.5}
    ),
}


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_shared_prompts_give_the_same_gradient_and_metrics(name):
    samples = grouped_samples()
    whole, whole_metrics = step(SETTINGS[name], False, samples)
    shared, shared_metrics = step(SETTINGS[name], True, samples)
    assert whole.prompt_blocks(samples) is None  # the reference really trains whole samples
    blocks = shared.prompt_blocks(samples)
    assert blocks is not None
    assert sum(len(b.prompts.input_ids) for b in blocks) == 3  # each prompt computed once
    assert torch.allclose(grads(shared), grads(whole), atol=1e-6, rtol=1e-4)
    assert grads(whole).abs().max() > 0
    assert set(shared_metrics) == set(whole_metrics)
    for key, value in whole_metrics.items():
        if key != "micro_batches":
            assert shared_metrics[key] == pytest.approx(value, rel=1e-5, abs=1e-7), key


def test_shared_prompts_record_the_same_trainer_logprobs_and_train_the_same_weights():
    samples = grouped_samples()
    config = TrainerConfig(packing="off", lr=1e-2, num_iterations=2, max_grad_norm=1e9)
    results = []
    for shared in (False, True):
        trainer = Trainer(tiny_llama(VOCAB), config.model_copy(update={"shared_prompts": shared}))
        batch = copy.deepcopy(samples)
        metrics = trainer.train_step(batch)
        results.append((trainer, metrics, batch))
    (whole, whole_metrics, whole_batch), (shared, shared_metrics, shared_batch) = results
    assert shared_metrics["loss"] == pytest.approx(whole_metrics["loss"], rel=1e-5, abs=1e-7)
    # AdamW's first steps move each weight by about lr (1e-2) whatever its gradient's size;
    # float rounding of a near-zero gradient moves a few by 3e-6, never by a step
    for a, b in zip(whole.model.parameters(), shared.model.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-5)
    start = tiny_llama(VOCAB).parameters()
    moved = zip(whole.model.parameters(), start, strict=True)
    assert max((a - b).abs().max() for a, b in moved) > 1e-3
    for a, b in zip(whole_batch, shared_batch, strict=True):
        if a.record:
            trained = [i for i, m in enumerate(a.loss_mask) if m]
            assert b.trainer_logprobs is not None and a.trainer_logprobs is not None
            assert [b.trainer_logprobs[i] for i in trained] == pytest.approx(
                [a.trainer_logprobs[i] for i in trained], abs=1e-5
            )


def test_distinct_prompts_are_trained_whole():
    samples = grouped_samples()[::4]  # one sample of each prompt: nothing to share
    trainer = Trainer(tiny_llama(VOCAB), TrainerConfig(packing="off"))
    assert trainer.prompt_blocks(samples) is None


def test_a_model_with_sliding_window_layers_trains_whole_samples():
    """Shared prompts continue from a cut KV cache, checked for models whose every layer sees
    the whole sequence: a model with sliding-window layers (Gemma 2's) trains whole samples,
    and its step still runs."""
    from transformers import Gemma2Config, Gemma2ForCausalLM

    torch.manual_seed(0)
    gemma = Gemma2ForCausalLM(
        Gemma2Config(
            vocab_size=VOCAB,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=8,
            sliding_window=4,
        )
    )
    config = TrainerConfig(packing="off")
    assert Trainer(tiny_llama(VOCAB), config).share_prompts
    trainer = Trainer(gemma, config)
    assert not trainer.share_prompts
    assert trainer.prompt_blocks(grouped_samples()) is None
    metrics = trainer.gradients(grouped_samples())
    assert metrics["micro_batches"] >= 1 and math.isfinite(metrics["loss"])
