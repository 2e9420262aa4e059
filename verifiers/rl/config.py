"""Every vf-rl setting, declared once, with its default.

The CLI parses a TOML file and ``--dotted.key value`` overrides into :class:`RLConfig`; the
trainer, the losses and the orchestrator read their sections of it and declare nothing of their
own. Each loss is its own model carrying its paper's defaults, so ``loss = "dapo"`` selects DAPO's
clip-higher 0.2/0.28, not GRPO's 0.2/0.2 under another name. A misspelt key is an error.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

Advantage = Literal["group_mean", "group_mean_std", "leave_one_out"]
Aggregation = Literal["sequence_mean", "token_mean", "constant"]


class _Strict(BaseModel):
    """A misspelt key is an error, not a silently ignored setting."""

    model_config = ConfigDict(extra="forbid")


class _PolicyGradient(_Strict):
    """A loss over sampled tokens: their trainer/inference ratio is bounded (``importance``)."""

    sampled: ClassVar[bool] = True


# --- losses: each the algorithm of its name, with that paper's defaults ------------------------


class GRPOLoss(_PolicyGradient):
    """GRPO (Shao et al. 2024, DeepSeekMath eq. 3): PPO's clipped surrogate per token, averaged
    over each sequence's tokens, then over sequences; std-scaled group advantages."""

    aggregation: ClassVar[Aggregation] = "sequence_mean"
    name: Literal["grpo"] = "grpo"
    clip_low: float = Field(default=0.2, ge=0)  # ratio lower bound 1 - clip_low
    clip_high: float = Field(default=0.2, ge=0)  # ratio upper bound 1 + clip_high
    advantage: Advantage = "group_mean_std"


class DAPOLoss(_PolicyGradient):
    """DAPO (Yu et al. 2025, eq. 8): the clipped surrogate with clip-higher (ε_low 0.2, ε_high
    0.28) and token-level aggregation (every token of the batch weighs the same)."""

    aggregation: ClassVar[Aggregation] = "token_mean"
    name: Literal["dapo"] = "dapo"
    clip_low: float = Field(default=0.2, ge=0)
    clip_high: float = Field(default=0.28, ge=0)
    advantage: Advantage = "group_mean_std"


class DrGRPOLoss(_PolicyGradient):
    """Dr. GRPO (Liu et al. 2025, "Understanding R1-Zero-like training"): the clipped surrogate
    summed over tokens and divided by a constant B·L_max (no length bias), and advantages without
    std scaling (no difficulty bias). L_max defaults to the orchestrator's max_tokens."""

    aggregation: ClassVar[Aggregation] = "constant"
    name: Literal["dr_grpo"] = "dr_grpo"
    clip_low: float = Field(default=0.2, ge=0)
    clip_high: float = Field(default=0.2, ge=0)
    advantage: Advantage = "group_mean"
    max_completion_tokens: int | None = Field(default=None, ge=1)


class GSPOLoss(_PolicyGradient):
    """GSPO (Zheng et al. 2025, eq. 5-7): one length-normalized ratio per sequence,
    s = exp(mean_t(log π - log π_old)), clipped at 1 - 3e-4 / 1 + 4e-4, averaged over sequences."""

    aggregation: ClassVar[Aggregation] = "sequence_mean"
    name: Literal["gspo"] = "gspo"
    clip_low: float = Field(default=3e-4, ge=0)
    clip_high: float = Field(default=4e-4, ge=0)
    advantage: Advantage = "group_mean_std"


class CISPOLoss(_PolicyGradient):
    """CISPO (MiniMax-M1, 2025, eq. 4-5): REINFORCE weighted by the stop-gradient IS ratio
    clipped from above only, sg(min(r, 1 + ε_high))·A·log π, token-level aggregation. Every
    token keeps its gradient; ``max_weight`` is 1 + ε_high."""

    aggregation: ClassVar[Aggregation] = "token_mean"
    name: Literal["cispo"] = "cispo"
    max_weight: float = Field(default=5.0, gt=0)
    advantage: Advantage = "group_mean_std"


class SFTLoss(_Strict):
    """Supervised fine-tuning (vf-sft): the negative log-likelihood of the trained tokens,
    averaged over every trained token of the batch. No ratio, so no importance mask."""

    aggregation: ClassVar[Aggregation] = "token_mean"
    sampled: ClassVar[bool] = False  # dataset tokens: no sampling ratio to bound
    name: Literal["sft"] = "sft"
    advantage: Advantage = "group_mean"  # unused: SFT samples carry no advantage


LossConfig = Annotated[
    GRPOLoss | DAPOLoss | DrGRPOLoss | GSPOLoss | CISPOLoss | SFTLoss,
    Field(discriminator="name"),
]
LOSS_NAMES = ("grpo", "dapo", "dr_grpo", "gspo", "cispo")  # the RL losses (vf-rl)


def _packing_mode(value: Any) -> Any:
    """``packing = true`` is ``"auto"``, ``false`` is ``"off"``."""
    if isinstance(value, bool):
        return "auto" if value else "off"
    return value


def _loss_by_name(value: Any) -> Any:
    """``loss = "dapo"`` is short for ``[trainer.loss] name = "dapo"`` (all its defaults)."""
    return {"name": value} if isinstance(value, str) else value


class ImportanceConfig(_Strict):
    """Trainer/inference mismatch correction: tokens (and optionally whole sequences) whose
    probability ratio π_trainer/π_inference leaves the band get no gradient. prime-rl's token
    band [0.125, 8] is on by default; without it nothing bounds a token's weight."""

    token_mask: bool = True
    token_low: float = Field(default=0.125, ge=0)
    token_high: float = Field(default=8.0, gt=0)
    sequence_mask: bool = False  # on the geometric mean of a sequence's token ratios
    sequence_low: float = Field(default=0.5, ge=0)
    sequence_high: float = Field(default=2.0, gt=0)


class TrainerConfig(_Strict):
    lr: float = 1e-5
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    warmup_steps: int = Field(default=0, ge=0)
    schedule: Literal["constant", "linear", "cosine"] = "constant"
    min_lr_ratio: float = Field(default=0.0, ge=0, le=1)
    loss: Annotated[LossConfig, BeforeValidator(_loss_by_name)] = Field(default_factory=GRPOLoss)
    importance: ImportanceConfig = Field(default_factory=ImportanceConfig)
    kl_beta: float = Field(default=0.0, ge=0)  # KL to the frozen starting model (k3); 0: off
    max_grad_norm: float = 1.0
    # varlen: samples concatenated into rows, kept apart by position ids (flash-attention
    # kernels: no padding, no L² mask); masked: the same rows with a block-diagonal mask (sdpa,
    # eager: correct, but attention costs L² per row); off: padded micro-batches of samples of
    # similar length. auto: varlen where the model's attention supports it, else off.
    packing: Annotated[
        Literal["auto", "varlen", "masked", "off"], BeforeValidator(_packing_mode)
    ] = "auto"
    max_tokens_per_micro_batch: int = Field(default=2048, ge=2)  # a row, or batch × longest
    micro_batch_size: int = Field(default=8, ge=1)  # padded: at most this many samples
    logprob_chunk: int = Field(default=1024, ge=1)  # positions per chunk of the vocab projection
    # auto: bf16 exactly when the server samples in bfloat16, so the on-policy ratio is 1
    autocast: Literal["auto", "none", "bf16"] = "auto"
    gradient_checkpointing: bool = False
    device: str = "auto"  # auto: this rank's GPU when the run uses GPUs, else cpu


class OrchestratorConfig(_Strict):
    examples_per_step: int = Field(default=4, ge=1)
    rollouts_per_example: int = Field(default=4, ge=2)
    max_tokens: int = Field(default=64, ge=1)
    temperature: float = Field(default=1.0, gt=0)
    max_concurrent: int = Field(default=32, ge=1)
    # truncated completions (hit max_tokens): keep as they are, mask them out of the loss
    # (DAPO's overlong filtering), or subtract overlong_penalty from their reward
    overlong: Literal["keep", "mask", "penalize"] = "keep"
    overlong_penalty: float = 1.0
    # groups whose rollouts all have the same advantage teach nothing: leave them out of the
    # batch and its token count; dynamic_sampling refills the batch from further examples
    filter_zero_advantage: bool = True
    dynamic_sampling: bool = False
    max_sampling_rounds: int = Field(default=3, ge=1)


class InferenceConfig(_Strict):
    # vf-serve: the built-in server (CPU, one GPU); vllm: vLLM's OpenAI server (CUDA), with the
    # weight-update API added (verifiers.weights.vllm_routes / vllm_worker)
    backend: Literal["vf-serve", "vllm"] = "vf-serve"
    dtype: str = "float32"
    max_batch_size: int = 32
    device: str = "cpu"  # "cuda:1": the server on its own GPU (vLLM: CUDA_VISIBLE_DEVICES=1)
    gpu_memory_utilization: float = Field(default=0.4, gt=0, le=1)  # vLLM; leave the trainer room
    max_model_len: int | None = None  # vLLM; default: the model's max_position_embeddings
    extra_args: list[str] = Field(default_factory=list)  # passed to the server's command line
    startup_timeout_s: float = 600
    # filesystem: safetensors + reload (works everywhere); gloo / nccl: a process group between
    # trainer and server (nccl needs them on different GPUs; gloo also works across one GPU)
    weight_transport: Literal["filesystem", "gloo", "nccl"] = "filesystem"
    weight_transport_host: str = "127.0.0.1"


class EvalConfig(_Strict):
    """Held-out reward while training (the environment's eval split; its train split if it has
    none): before the first step, every ``every`` steps and after the last. 0: off."""

    every: int = Field(default=0, ge=0)
    examples: int = Field(default=32, ge=1)
    rollouts_per_example: int = Field(default=1, ge=1)
    temperature: float | None = None  # default: the training temperature


class RLConfig(_Strict):
    model: str = "SmolLM2-135M-Instruct"
    env_id: str = "reverse-text"
    env_args: dict[str, Any] = Field(default_factory=dict)
    output_dir: str = "outputs/rl/run"
    steps: int = Field(default=10, ge=1)
    max_off_policy_steps: int = Field(default=1, ge=0)
    checkpoint_every: int = Field(default=0, ge=0)
    keep_checkpoints: int = Field(
        default=2, ge=0
    )  # newest N kept in output_dir/checkpoints; 0: all
    seed: int = 0
    orchestrator: OrchestratorConfig = Field(default_factory=OrchestratorConfig)
    trainer: TrainerConfig = Field(default_factory=TrainerConfig)
    inference: InferenceConfig = Field(default_factory=InferenceConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)

    @model_validator(mode="after")
    def _an_rl_loss(self) -> RLConfig:
        if self.trainer.loss.name not in LOSS_NAMES:
            raise ValueError(
                f"trainer.loss = {self.trainer.loss.name!r} is vf-sft's; vf-rl trains with one of "
                f"{', '.join(LOSS_NAMES)}"
            )
        return self

    @model_validator(mode="after")
    def _resolve_autocast(self) -> RLConfig:
        resolve_autocast(self.trainer, self.inference)
        return self

    def max_completion_tokens(self) -> int:
        """Dr. GRPO's L_max: its own setting, else the sampling limit."""
        loss = self.trainer.loss
        own = getattr(loss, "max_completion_tokens", None)
        return own or self.orchestrator.max_tokens


def resolve_autocast(trainer: TrainerConfig, inference: InferenceConfig) -> None:
    """``autocast = "auto"``: bf16 exactly when the server samples in bfloat16, so the trainer
    computes what was sampled (the written config shows the choice)."""
    if trainer.autocast == "auto":
        bf16 = inference.dtype.lower() in ("bfloat16", "bf16")
        trainer.autocast = "bf16" if bf16 else "none"


def summary(config: RLConfig) -> str:
    """One line of what will actually run (the full config is written to config.json)."""
    loss = config.trainer.loss
    params = ", ".join(
        f"{k} {v}"
        for k, v in loss.model_dump(exclude={"name", "advantage"}).items()
        if v is not None
    )
    imp = config.trainer.importance
    band = f"token ratio in [{imp.token_low}, {imp.token_high}]" if imp.token_mask else "off"
    if imp.sequence_mask:
        band += f", sequence in [{imp.sequence_low}, {imp.sequence_high}]"
    return (
        f"loss {loss.name} ({params}; {loss.aggregation}; advantage {loss.advantage}) · "
        f"IS mask {band} · KL β {config.trainer.kl_beta} · autocast {config.trainer.autocast}, "
        f"server {config.inference.dtype} · overlong {config.orchestrator.overlong}"
    )
