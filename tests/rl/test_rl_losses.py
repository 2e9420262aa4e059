"""Each loss against its paper's formula, written out independently of the code under test.

The reference below computes every sequence's logprobs with a plain forward pass (no packing, no
chunking, no ``logits_to_keep``) and each objective as the paper states it, one sequence at a time,
with the gradient from autograd on that scalar (GSPO's through s_i itself, not the trainer's
stop-gradient form). Its constants are the papers' own, written here (not read from the config
under test). The data reaches the ratio windows where the losses differ: a token at ratio 1.25
with A > 0 (GRPO clips it, DAPO's clip-higher 1.28 does not), one at e^3 ≈ 20 (beyond the token
band: masked for the PPO-style losses, kept by CISPO at weight ε_max), a sequence whose
geometric-mean ratio leaves GSPO's sequence band, both clipped sides. The trainer's gradient must
equal the reference packed or padded, under every attention implementation the trainer accepts.
"""

from __future__ import annotations

import copy
import math

import pytest

torch = pytest.importorskip("torch")

from support.toy import random_samples, tiny_llama  # noqa: E402

from verifiers.rl.algorithm.batching import PackingError  # noqa: E402
from verifiers.rl.algorithm.trainer import Trainer  # noqa: E402
from verifiers.rl.configs.rl import LOSS_NAMES, RLConfig, TrainerConfig  # noqa: E402

# The papers' constants (and the token band of prime-rl, whose trainer this follows).
PAPER = {
    "grpo": {"eps_low": 0.2, "eps_high": 0.2},  # DeepSeekMath, PPO's ε
    "dapo": {"eps_low": 0.2, "eps_high": 0.28},  # DAPO §3.1, clip-higher
    "dr_grpo": {"eps_low": 0.2, "eps_high": 0.2},  # Dr. GRPO keeps PPO's ε
    "gspo": {"eps_low": 3e-4, "eps_high": 4e-4},  # GSPO §5.1
    "cispo": {"eps_max": 5.0},  # CISPO's weight bound (ScaleRL's setting)
}
TOKEN_BAND = (0.125, 8.0)  # masked tokens (GRPO, DAPO, Dr. GRPO)
SEQUENCE_BAND = (0.5, 2.0)  # masked sequences (GSPO)
L_MAX = 16  # Dr. GRPO's L_max
B_CONST = 8  # Dr. GRPO's B: the sequences a step samples, not those that survive filtering
DR_GRPO = {"max_completion_tokens": L_MAX, "sequences_per_step": B_CONST}


def plain_logprobs(model, sample, with_entropy=False):
    """log π of each loss token of ``sample``, from one unpacked forward pass (and the entropy
    of π at the positions that predict them)."""
    ids = torch.tensor([sample.input_ids])
    logits = model(input_ids=ids).logits[0].float()
    logp = torch.log_softmax(logits, dim=-1)
    positions = [t for t, m in enumerate(sample.loss_mask) if m]
    picked = torch.stack([logp[t - 1, sample.input_ids[t]] for t in positions])
    if not with_entropy:
        return picked
    entropy = torch.stack([-(logp[t - 1].exp() * logp[t - 1]).sum() for t in positions])
    return picked, entropy


def reference_loss(name, model, samples, kl_beta=0.0, reference=None, entropy_coef=0.0, delta=None):
    """The batch objective as the papers write it, sequence by sequence."""
    per_sequence, token_sums, lengths = [], [], []
    for sample in samples:
        lp, entropy = plain_logprobs(model, sample, with_entropy=True)
        old = torch.tensor(
            [o for o, m in zip(sample.old_logprobs, sample.loss_mask, strict=True) if m]
        )
        a = sample.advantage
        ratio = torch.exp(lp - old)
        n = len(lp)
        lengths.append(n)
        kept = torch.ones(n)
        if name in ("grpo", "dapo", "dr_grpo"):
            kept = ((ratio.detach() >= TOKEN_BAND[0]) & (ratio.detach() <= TOKEN_BAND[1])).float()
            lo, hi = 1 - PAPER[name]["eps_low"], 1 + PAPER[name]["eps_high"]
            capped = ratio if delta is None else torch.clamp(ratio, max=delta)
            term = -torch.minimum(capped * a, torch.clamp(ratio, lo, hi) * a)
        elif name == "cispo":  # no mask: a token above the band weighs ε_max
            term = -torch.clamp(ratio.detach(), max=PAPER["cispo"]["eps_max"]) * a * lp
        elif name == "sft":  # negative log-likelihood; no ratio, so nothing is masked
            term = -lp
        else:  # gspo: one ratio per sequence over all its tokens; the sequence band masks it
            s = torch.exp((lp - old).mean())
            inside = SEQUENCE_BAND[0] <= float(s.detach()) <= SEQUENCE_BAND[1]
            kept = torch.full((n,), float(inside))
            lo, hi = 1 - PAPER["gspo"]["eps_low"], 1 + PAPER["gspo"]["eps_high"]
            seq = -torch.minimum(s * a, torch.clamp(s, lo, hi) * a)
            term = seq * torch.ones(n)  # every token carries the sequence's term
        if entropy_coef:
            term = term - entropy_coef * entropy
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
    return torch.stack(token_sums).sum() / (B_CONST * L_MAX)


WINDOW = math.log(1.25)  # log-ratio in DAPO's clip-higher window (1.2, 1.28]


def perturbed_samples(model, seed=1):
    """Samples whose recorded (inference) logprobs differ from the model's: log-ratios
    log π/π_old spread with std 0.4, plus the windows where the losses differ: sample 0 has a
    token at ratio e^3 ≈ 20 (beyond the token band), samples 1 and 3 tokens at ratio 1.25 with
    A > 0 (DAPO's clip-higher window), sample 4 a geometric-mean ratio e^0.9 ≈ 2.5 (beyond the
    sequence band). Sequences 0 and 2 are on the unclipped side of their sequence ratio, 1 and 3
    on the clipped side (GSPO's tiny band leaves them some gradient)."""
    samples = random_samples(n=5, vocab_size=64, seed=seed)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for i, sample in enumerate(samples):
            true = plain_logprobs(model, sample).tolist()
            noise = (torch.randn(len(true), generator=g) * 0.4).tolist()
            if i == 0:
                noise[1] = 3.0
            if i in (1, 3):
                noise[0] = noise[2] = WINDOW
            if i == 4:
                noise = [0.9 + e / 4 for e in noise]
            log_s = sum(noise) / len(noise)  # log of the sequence ratio π/π_old
            if i in (1, 3):
                sample.advantage = 0.5 + abs(i - 2)  # A > 0: the 1.25 tokens are in the window
            else:
                unclipped_side = i % 2 == 0
                sign = (-1 if log_s > 0 else 1) * (1 if unclipped_side else -1)
                sample.advantage = sign * (0.5 + abs(i - 2))
            it = iter(t - e for t, e in zip(true, noise, strict=True))
            sample.old_logprobs = [next(it) if m else 0.0 for m in sample.loss_mask]
    return samples


def loss_config(name, **extra):
    """The trainer's config for ``name`` with the constants the test reaches for."""
    loss = {"name": name, **(DR_GRPO if name == "dr_grpo" else {})}
    return TrainerConfig(loss=loss, **extra)


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
    config = loss_config(name, **batching)
    trainer = Trainer(copy.deepcopy(model), config)
    metrics = trainer.gradients(samples)
    # the e^3 token (or GSPO's e^0.9 sequence) was masked; CISPO keeps it, SFT has no ratio
    assert (metrics["is_masked_fraction"] > 0) == (name not in ("cispo", "sft"))
    model.zero_grad()
    reference_loss(name, model, samples).backward()
    expected = grads(model)
    assert expected.abs().max() > 0
    assert torch.allclose(grads(trainer.model), expected, atol=1e-6, rtol=1e-4)
    assert metrics["loss"] == pytest.approx(reference_loss(name, model, samples).item(), abs=1e-5)


def test_dapos_clip_higher_window_separates_it_from_grpo():
    """The reference data has tokens at ratio 1.25 with A > 0: GRPO's 1.2 clips them, DAPO's
    1.28 does not, so the clip fractions differ by exactly those tokens."""
    model = tiny_llama()
    samples = perturbed_samples(model)
    fractions = {
        name: Trainer(copy.deepcopy(model), loss_config(name)).gradients(samples)["clip_fraction"]
        for name in ("grpo", "dapo")
    }
    tokens = sum(sum(s.loss_mask) for s in samples)
    assert fractions["grpo"] - fractions["dapo"] >= 4 / tokens - 1e-9  # samples 1 and 3, 2 each


def test_cispo_keeps_a_token_above_the_band_at_weight_eps_max():
    """MiniMax-M1: the clipped IS weight is CISPO's correction, no token is dropped. The
    default token band masked a token at ratio 20 instead (its gradient went missing)."""
    model = tiny_llama()
    (sample,) = perturbed_samples(model)[:1]
    trainer = Trainer(copy.deepcopy(model), loss_config("cispo"))
    metrics = trainer.gradients([sample])
    assert metrics["is_masked_fraction"] == 0
    model.zero_grad()
    reference_loss("cispo", model, [sample]).backward()
    assert torch.allclose(grads(trainer.model), grads(model), atol=1e-6, rtol=1e-4)


def test_dr_grpo_divides_by_a_constant_whatever_is_filtered():
    """B·L_max from the config: a step that keeps 3 of its 8 sampled sequences divides by 8·16,
    as one that keeps 5 does (it divided by the survivors' count before)."""
    from verifiers.cli.rl import parse_args
    from verifiers.rl.training.rl import make_trainer

    model = tiny_llama()
    samples = perturbed_samples(model)
    argv = ["--trainer.loss", "dr_grpo", "--orchestrator.max_tokens", str(L_MAX)]
    argv += ["--orchestrator.examples_per_step", "2", "--orchestrator.rollouts_per_example", "4"]
    config, _ = parse_args(argv)
    assert config.trainer.loss.sequences_per_step == B_CONST
    for kept in (samples, samples[:3]):
        trainer = make_trainer(config, copy.deepcopy(model))
        metrics = trainer.gradients(kept)
        assert metrics["loss"] == pytest.approx(
            reference_loss("dr_grpo", model, kept).item(), abs=1e-6
        )


def test_the_python_trainer_uses_the_losss_own_l_max():
    model = tiny_llama()
    samples = perturbed_samples(model)
    trainer = Trainer(copy.deepcopy(model), loss_config("dr_grpo"))  # no other L_max given
    assert trainer.gradients(samples)["loss"] == pytest.approx(
        reference_loss("dr_grpo", model, samples).item(), abs=1e-6
    )
    with pytest.raises(ValueError, match="sequences_per_step"):
        Trainer(copy.deepcopy(model), TrainerConfig(loss="dr_grpo"))


def test_two_sided_clip_caps_the_ratio_of_negative_advantages_at_delta():
    model = tiny_llama()
    samples = perturbed_samples(model)
    config = TrainerConfig(loss={"name": "grpo", "delta": 1.5})
    trainer = Trainer(copy.deepcopy(model), config)
    plain = Trainer(copy.deepcopy(model), TrainerConfig(loss="grpo")).gradients(samples)
    metrics = trainer.gradients(samples)
    assert metrics["clip_fraction"] > plain["clip_fraction"]  # tokens with r > 1.5 and A < 0
    model.zero_grad()
    reference_loss("grpo", model, samples, delta=1.5).backward()
    assert torch.allclose(grads(trainer.model), grads(model), atol=1e-6, rtol=1e-4)


def test_the_entropy_bonus_subtracts_coef_times_entropy():
    model = tiny_llama()
    samples = perturbed_samples(model)
    trainer = Trainer(copy.deepcopy(model), TrainerConfig(loss="dapo", entropy_coef=0.1))
    trainer.gradients(samples)
    model.zero_grad()
    reference_loss("dapo", model, samples, entropy_coef=0.1).backward()
    assert torch.allclose(grads(trainer.model), grads(model), atol=1e-6, rtol=1e-4)


def test_truncated_importance_sampling_weights_each_term_by_the_capped_ratio():
    """TIS: w = min(π_trainer/π_inference, C) (no gradient) times the surrogate whose ratio is
    against the trainer's own policy at the step's start (value 1: -A·w, gradient -A·w·∇log π)."""
    model = tiny_llama()
    samples = perturbed_samples(model)
    config = TrainerConfig(loss="grpo", importance={"token": "truncate", "token_high": 2.0})
    trainer = Trainer(copy.deepcopy(model), config)
    metrics = trainer.gradients(samples)
    assert metrics["is_masked_fraction"] == 0 and 0 < metrics["is_weight"] < 2.0
    model.zero_grad()
    terms = []
    for sample in samples:
        lp = plain_logprobs(model, sample)
        old = torch.tensor(
            [o for o, m in zip(sample.old_logprobs, sample.loss_mask, strict=True) if m]
        )
        weight = torch.clamp(torch.exp(lp.detach() - old), max=2.0)
        terms.append((-weight * sample.advantage * torch.exp(lp - lp.detach())).mean())
    torch.stack(terms).mean().backward()
    assert torch.allclose(grads(trainer.model), grads(model), atol=1e-6, rtol=1e-4)


def test_num_iterations_takes_that_many_optimizer_steps_on_one_batch():
    """μ = 2 on one batch is two steps of the same loss (the ratio still against the sampler's
    logprobs), with the LR schedule and the policy version advancing once."""
    model = tiny_llama()
    samples = perturbed_samples(model)
    twice = Trainer(copy.deepcopy(model), TrainerConfig(loss="grpo", lr=1e-3, num_iterations=2))
    once = Trainer(copy.deepcopy(model), TrainerConfig(loss="grpo", lr=1e-3))
    metrics = twice.train_step(samples)
    once.train_step(samples)
    once.train_step(samples)
    assert metrics["iterations"] == 2 and twice.version == 1
    for a, b in zip(twice.model.parameters(), once.model.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-6)


def test_the_logged_learning_rate_is_the_one_the_step_used():
    model = tiny_llama()
    config = TrainerConfig(lr=1e-3, schedule="linear", warmup_steps=2)
    trainer = Trainer(model, config, total_steps=4)
    rates = [trainer.train_step(random_samples(n=2))["lr"] for _ in range(4)]
    assert rates == pytest.approx([0.5e-3, 1e-3, 1e-3, 0.5e-3])  # warmup 1/2, 2/2, then decay


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
    reference_loss("grpo", moved, samples, kl_beta=0.5, reference=start).backward()
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
        token = "mask" if mask else "off"
        trainer = Trainer(copy.deepcopy(model), TrainerConfig(importance={"token": token}))
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
            "token": "off",
            "sequence": "mask",
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
        (
            ["--trainer.loss", "dr_grpo"],
            {"advantage": "group_mean", "max_completion_tokens": 64, "sequences_per_step": 16},
        ),
        (["--trainer.loss", "gspo"], {"clip_low": 3e-4, "clip_high": 4e-4}),
        (["--trainer.loss", "cispo"], {"max_weight": 5.0}),
        (["--trainer.loss", "dapo", "--trainer.loss.clip_high", "0.3"], {"clip_high": 0.3}),
    ],
)
def test_each_losss_own_defaults_reach_the_trainer_through_vf_rl(argv, check):
    from verifiers.cli.rl import parse_args
    from verifiers.rl.training.rl import make_trainer

    config, _ = parse_args(argv)
    trainer = make_trainer(config, tiny_llama())
    for key, value in check.items():
        assert getattr(trainer.config.loss, key) == value
    assert trainer.config.loss.name == argv[1]


def test_dapo_and_dr_grpo_through_vf_rl_are_not_grpo():
    """The first wave passed GRPO's clip to every loss: dapo and dr_grpo gave GRPO's gradient."""
    from verifiers.cli.rl import parse_args
    from verifiers.rl.training.rl import make_trainer

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


@pytest.mark.parametrize("chunk", [1, 3, 1024])
def test_the_chunked_head_gives_the_same_gradient_in_any_chunk_size(chunk):
    """The head runs ``logprob_chunk`` positions at a time, recomputing each chunk's logits in
    backward (one chunk: kept from forward); logprobs and entropy gradients are the same."""
    model = tiny_llama()
    samples = perturbed_samples(model)
    config = TrainerConfig(loss="dapo", entropy_coef=0.1, logprob_chunk=chunk)
    trainer = Trainer(copy.deepcopy(model), config)
    metrics = trainer.gradients(samples)
    model.zero_grad()
    reference = reference_loss("dapo", model, samples, entropy_coef=0.1)
    reference.backward()
    assert torch.allclose(grads(trainer.model), grads(model), atol=1e-6, rtol=1e-4)
    assert metrics["loss"] == pytest.approx(reference.item(), abs=1e-6)
