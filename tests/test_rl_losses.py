"""Each loss against its paper's formula, written out independently of the code under test.

The reference below computes every sequence's logprobs with a plain forward pass (no packing, no
chunking, no ``logits_to_keep``) and each objective as the paper states it, one sequence at a time,
with the gradient from autograd on that scalar (GSPO's through s_i itself, not the trainer's
stop-gradient form). The trainer's gradient must equal it on random data with ratios away from 1
(both clipped sides present, one token outside the importance band), packed or padded, under
every attention implementation the trainer accepts.
"""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")

from verifiers.rl.batching import PackingError  # noqa: E402
from verifiers.rl.config import LOSS_NAMES, RLConfig, TrainerConfig  # noqa: E402
from verifiers.rl.toy import random_samples, tiny_llama  # noqa: E402
from verifiers.rl.trainer import Trainer  # noqa: E402

L_MAX = 16  # Dr. GRPO's constant


def plain_logprobs(model, sample):
    """log π of each loss token of ``sample``, from one unpacked forward pass."""
    ids = torch.tensor([sample.input_ids])
    logits = model(input_ids=ids).logits[0].float()
    logp = torch.log_softmax(logits, dim=-1)
    positions = [t for t, m in enumerate(sample.loss_mask) if m]
    return torch.stack([logp[t - 1, sample.input_ids[t]] for t in positions])


def reference_loss(name, cfg, model, samples, band=(0.125, 8.0), kl_beta=0.0, reference=None):
    """The batch objective as the papers write it, sequence by sequence."""
    per_sequence, token_sums, lengths = [], [], []
    for sample in samples:
        lp = plain_logprobs(model, sample)
        old = torch.tensor(
            [o for o, m in zip(sample.old_logprobs, sample.loss_mask, strict=True) if m]
        )
        a = sample.advantage
        ratio = torch.exp(lp - old)
        kept = ((ratio.detach() >= band[0]) & (ratio.detach() <= band[1])).float()
        n = len(lp)
        lengths.append(n)
        if name in ("grpo", "dapo", "dr_grpo"):
            lo, hi = 1 - cfg.clip_low, 1 + cfg.clip_high
            term = -torch.minimum(ratio * a, torch.clamp(ratio, lo, hi) * a)
        elif name == "cispo":
            term = -torch.clamp(ratio.detach(), max=cfg.max_weight) * a * lp
        elif name == "sft":  # negative log-likelihood; no ratio, so nothing is masked
            term, kept = -lp, torch.ones_like(kept)
        else:  # gspo: one ratio per sequence over its kept tokens
            s = torch.exp(((lp - old) * kept).sum() / kept.sum())
            lo, hi = 1 - cfg.clip_low, 1 + cfg.clip_high
            seq = -torch.minimum(s * a, torch.clamp(s, lo, hi) * a)
            term = seq * torch.ones(n)  # every kept token carries the sequence's term
        if kl_beta:
            ref = plain_logprobs(reference, sample).detach()
            term = term + kl_beta * (torch.exp(ref - lp) - (ref - lp) - 1)
        term = term * kept
        token_sums.append(term.sum())
        per_sequence.append(term.sum() / n)
    if name in ("grpo", "gspo"):
        return torch.stack(per_sequence).mean()
    if name in ("dapo", "cispo", "sft"):
        return torch.stack(token_sums).sum() / sum(lengths)
    return torch.stack(token_sums).sum() / (len(samples) * L_MAX)


def perturbed_samples(model, seed=1):
    """Samples whose recorded (inference) logprobs differ from the model's: ratios spread over
    roughly [0.4, 2.5], and one token at ratio e^3 ≈ 20, beyond the importance band. Advantage
    signs put sequences 0, 2, 4 on the unclipped side of their sequence ratio and 1, 3 on the
    clipped side (so GSPO's tiny band leaves some gradient)."""
    samples = random_samples(n=5, vocab_size=64, seed=seed)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for i, sample in enumerate(samples):
            true = plain_logprobs(model, sample).tolist()
            noise = (torch.randn(len(true), generator=g) * 0.4).tolist()
            if i == 0:
                noise[1] = 3.0
            kept = [e for e in noise if abs(e) < 2]
            log_s = -sum(kept) / len(kept)  # log of the sequence ratio π/π_old
            unclipped_side = i % 2 == 0
            sign = (-1 if log_s > 0 else 1) * (1 if unclipped_side else -1)
            sample.advantage = sign * (0.5 + abs(i - 2))
            it = iter(t - e for t, e in zip(true, noise, strict=True))
            sample.old_logprobs = [next(it) if m else 0.0 for m in sample.loss_mask]
    return samples


def grads(model):
    return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])


LAYOUTS = {
    "packed-sdpa": ("sdpa", {"packing": "masked", "max_tokens_per_micro_batch": 30}),
    "packed-eager": ("eager", {"packing": "masked", "max_tokens_per_micro_batch": 30}),
    "padded-sdpa": ("sdpa", {"packing": "off", "micro_batch_size": 2}),
    "padded-eager": ("eager", {"packing": "off", "micro_batch_size": 1}),
    "padded-by-tokens": ("sdpa", {"packing": "auto", "max_tokens_per_micro_batch": 40}),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("name", [*LOSS_NAMES, "sft"])
def test_trainer_gradient_equals_the_papers_formula(name, layout):
    attention, batching = LAYOUTS[layout]
    model = tiny_llama()
    model.set_attn_implementation(attention)
    samples = perturbed_samples(model)
    config = TrainerConfig(loss=name, **batching)
    if name == "dr_grpo":
        config.loss.max_completion_tokens = L_MAX
    trainer = Trainer(copy.deepcopy(model), config, max_completion_tokens=L_MAX)
    metrics = trainer.gradients(samples)
    # the e^3 token was dropped (SFT has no sampling ratio: it masks nothing)
    assert (metrics["is_masked_fraction"] > 0) == (name != "sft")
    model.zero_grad()
    reference_loss(name, config.loss, model, samples).backward()
    expected = grads(model)
    assert expected.abs().max() > 0
    assert torch.allclose(grads(trainer.model), expected, atol=1e-6, rtol=1e-4)
    assert metrics["loss"] == pytest.approx(
        reference_loss(name, config.loss, model, samples).item(), abs=1e-5
    )


def test_kl_to_the_frozen_start_adds_beta_k3():
    model = tiny_llama()
    start = copy.deepcopy(model)
    config = TrainerConfig(loss="grpo", kl_beta=0.5, lr=1e-2)
    trainer = Trainer(model, config)
    trainer.train_step(perturbed_samples(start))  # the policy moves away from its start
    moved = copy.deepcopy(trainer.model)
    samples = perturbed_samples(moved, seed=2)
    metrics = trainer.gradients(samples)
    assert metrics["ref_kl"] > 0
    moved.zero_grad()
    reference_loss("grpo", config.loss, moved, samples, kl_beta=0.5, reference=start).backward()
    assert torch.allclose(grads(trainer.model), grads(moved), atol=1e-6, rtol=1e-4)


def test_the_importance_band_bounds_a_tokens_weight():
    """A token the trainer finds e^3 times likelier than the server did, with A < 0: unmasked,
    PPO's clip does not apply on that side and its weight is 20; the default band drops it."""
    model = tiny_llama()
    (sample,) = random_samples(n=1, seed=4)
    with torch.no_grad():
        true = plain_logprobs(model, sample).tolist()
    it = iter(true)
    sample.old_logprobs = [next(it) if m else 0.0 for m in sample.loss_mask]
    first = sample.loss_mask.index(1)
    sample.old_logprobs[first] -= 3.0
    sample.advantage = -1.0
    weights = {}
    for mask in (True, False):
        trainer = Trainer(copy.deepcopy(model), TrainerConfig(importance={"token_mask": mask}))
        weights[mask] = trainer.gradients([sample])
    assert weights[True]["is_masked_fraction"] == pytest.approx(1 / sum(sample.loss_mask))
    assert weights[False]["is_masked_fraction"] == 0
    # the unmasked loss carries the e^3 token: its (positive) loss is far larger
    assert weights[False]["loss"] > weights[True]["loss"] + 2.0


def test_sequence_masking_drops_a_whole_sequence():
    model = tiny_llama()
    samples = perturbed_samples(model)
    config = TrainerConfig(
        importance={
            "token_mask": False,
            "sequence_mask": True,
            "sequence_low": 0.99,
            "sequence_high": 1.01,
        }
    )
    metrics = Trainer(copy.deepcopy(model), config).gradients(samples)
    assert metrics["is_masked_fraction"] == pytest.approx(1.0)  # every sequence is off by more


def test_a_packing_the_attention_cannot_keep_apart_is_refused():
    model = tiny_llama()  # sdpa: a block-diagonal mask works, varlen needs flash attention
    with pytest.raises(PackingError, match="packing = 'varlen' needs"):
        Trainer(model, TrainerConfig(packing="varlen"))
    assert Trainer(model, TrainerConfig(packing="masked")).packing == "masked"
    assert Trainer(model, TrainerConfig(packing=True)).packing == "off"  # auto on sdpa
    model.config._attn_implementation = "flex_attention"
    with pytest.raises(PackingError, match="packing = 'masked' needs"):
        Trainer(model, TrainerConfig(packing="masked"))
    model.config._attn_implementation = "flash_attention_2"
    assert Trainer(model, TrainerConfig(packing="auto")).packing == "varlen"


def test_clip_fraction_counts_only_tokens_clipped_on_their_advantages_side():
    model = tiny_llama()
    (sample,) = random_samples(n=1, seed=5)
    with torch.no_grad():
        true = plain_logprobs(model, sample).tolist()
    n = len(true)
    # ratio 1.5 on every token: above 1 + ε. With A > 0 all are clipped; with A < 0 none is
    it = iter(t - 0.405465 for t in true)
    sample.old_logprobs = [next(it) if m else 0.0 for m in sample.loss_mask]
    for advantage, fraction in ((1.0, 1.0), (-1.0, 0.0)):
        sample.advantage = advantage
        metrics = Trainer(copy.deepcopy(model), TrainerConfig()).gradients([sample])
        assert metrics["clip_fraction"] == pytest.approx(fraction), n
        assert metrics["mismatch_kl"] > 0  # k3 is never negative, and here not zero


@pytest.mark.parametrize(
    ("argv", "check"),
    [
        (
            ["--trainer.loss", "dapo"],
            {"clip_low": 0.2, "clip_high": 0.28, "advantage": "group_mean_std"},
        ),
        (["--trainer.loss", "dr_grpo"], {"advantage": "group_mean", "max_completion_tokens": None}),
        (["--trainer.loss", "gspo"], {"clip_low": 3e-4, "clip_high": 4e-4}),
        (["--trainer.loss", "cispo"], {"max_weight": 5.0}),
        (["--trainer.loss", "dapo", "--trainer.loss.clip_high", "0.3"], {"clip_high": 0.3}),
    ],
)
def test_each_losss_own_defaults_reach_the_trainer_through_vf_rl(argv, check):
    from verifiers.rl.cli import make_trainer, parse_args

    config, _ = parse_args(argv)
    trainer = make_trainer(config, tiny_llama())
    for key, value in check.items():
        assert getattr(trainer.config.loss, key) == value
    assert trainer.config.loss.name == argv[1]


def test_dapo_and_dr_grpo_through_vf_rl_are_not_grpo():
    """The first wave passed GRPO's clip to every loss: dapo and dr_grpo gave GRPO's gradient."""
    from verifiers.rl.cli import make_trainer, parse_args

    model = tiny_llama()
    samples = perturbed_samples(model)
    found = {}
    for name in ("grpo", "dapo", "dr_grpo"):
        config, _ = parse_args(["--trainer.loss", name, "--orchestrator.max_tokens", "16"])
        trainer = make_trainer(config, copy.deepcopy(model))
        trainer.gradients(samples)
        found[name] = grads(trainer.model)
    assert not torch.allclose(found["grpo"], found["dapo"])
    assert not torch.allclose(found["grpo"], found["dr_grpo"])


def test_autocast_follows_the_servers_dtype_unless_set():
    assert RLConfig().trainer.autocast == "none"  # server float32
    assert RLConfig.model_validate({"inference": {"dtype": "bfloat16"}}).trainer.autocast == "bf16"
    explicit = {"inference": {"dtype": "bfloat16"}, "trainer": {"autocast": "none"}}
    assert RLConfig.model_validate(explicit).trainer.autocast == "none"
