"""Every vf-rl setting, declared once, with its default.

The CLI parses a TOML file and ``--dotted.key value`` overrides into :class:`RLConfig`; the
trainer, the losses and the orchestrator read their sections of it and declare nothing of their
own. Each loss is its own model carrying its paper's defaults, so ``loss = "dapo"`` selects DAPO's
clip-higher 0.2/0.28, not GRPO's 0.2/0.2 under another name, and each names the trainer/inference
importance correction its objective implies (``importance``). A misspelt key is an error.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

Advantage = Literal["group_mean", "group_mean_std", "group_mean_batch_std", "leave_one_out"]
Aggregation = Literal["sequence_mean", "token_mean", "constant"]
Correction = Literal["mask", "truncate", "off"]
Tracker = Literal["tensorboard", "wandb"]


class _Strict(BaseModel):
    """A misspelt key is an error, not a silently ignored setting."""

    model_config = ConfigDict(extra="forbid")


class _PolicyGradient(_Strict):
    """A loss over sampled tokens. ``importance`` is the (token, sequence) correction of the
    trainer/inference mismatch its objective implies, used unless ``[trainer.importance]`` says
    otherwise (see :class:`ImportanceConfig`)."""

    sampled: ClassVar[bool] = True
    importance: ClassVar[tuple[Correction, Correction]] = ("mask", "off")


class _ClippedSurrogate(_PolicyGradient):
    """PPO's clipped surrogate. The ratio r = π/π_old enters unclipped on the side the clip does
    not bound, so a token far off-policy with A < 0 could weigh r: the token band masks it."""

    # two-sided clip (INTELLECT-2, TRL's delta): r is also capped at delta on the unclipped
    # side (A < 0); None: off. Set it above 1 + clip_high.
    delta: float | None = Field(default=None, gt=1)


# --- losses: each the algorithm of its name, with that paper's defaults ------------------------


class GRPOLoss(_ClippedSurrogate):
    """GRPO (Shao et al. 2024, DeepSeekMath eq. 3): PPO's clipped surrogate per token, averaged
    over each sequence's tokens, then over sequences; std-scaled group advantages."""

    aggregation: ClassVar[Aggregation] = "sequence_mean"
    name: Literal["grpo"] = "grpo"
    clip_low: float = Field(default=0.2, ge=0)  # ratio lower bound 1 - clip_low
    clip_high: float = Field(default=0.2, ge=0)  # ratio upper bound 1 + clip_high
    advantage: Advantage = "group_mean_std"


class DAPOLoss(_ClippedSurrogate):
    """DAPO (Yu et al. 2025, eq. 8): the clipped surrogate with clip-higher (ε_low 0.2, ε_high
    0.28) and token-level aggregation (every token of the batch weighs the same)."""

    aggregation: ClassVar[Aggregation] = "token_mean"
    name: Literal["dapo"] = "dapo"
    clip_low: float = Field(default=0.2, ge=0)
    clip_high: float = Field(default=0.28, ge=0)
    advantage: Advantage = "group_mean_std"


class DrGRPOLoss(_ClippedSurrogate):
    """Dr. GRPO (Liu et al. 2025, "Understanding R1-Zero-like training"): the clipped surrogate
    summed over tokens and divided by a constant B·L_max (no length bias), and advantages without
    std scaling (no difficulty bias). The constant does not move with filtering: B is the step's
    sampled sequences (examples_per_step × rollouts_per_example), L_max the orchestrator's
    max_tokens, unless set here; vf-rl writes the values it used to config.json."""

    aggregation: ClassVar[Aggregation] = "constant"
    name: Literal["dr_grpo"] = "dr_grpo"
    clip_low: float = Field(default=0.2, ge=0)
    clip_high: float = Field(default=0.2, ge=0)
    advantage: Advantage = "group_mean"
    max_completion_tokens: int | None = Field(default=None, ge=1)  # L_max
    sequences_per_step: int | None = Field(default=None, ge=1)  # B


class GSPOLoss(_ClippedSurrogate):
    """GSPO (Zheng et al. 2025, eq. 5-7): one length-normalized ratio per sequence,
    s = exp(mean_t(log π - log π_old)), clipped at 1 - 3e-4 / 1 + 4e-4, averaged over sequences.
    Its unit is the sequence, so its mismatch correction is too: sequences whose geometric-mean
    ratio leaves the sequence band are masked; no token is taken out of s."""

    aggregation: ClassVar[Aggregation] = "sequence_mean"
    importance: ClassVar[tuple[Correction, Correction]] = ("off", "mask")
    name: Literal["gspo"] = "gspo"
    clip_low: float = Field(default=3e-4, ge=0)
    clip_high: float = Field(default=4e-4, ge=0)
    advantage: Advantage = "group_mean_std"


class CISPOLoss(_PolicyGradient):
    """CISPO (MiniMax-M1, 2025, eq. 4-5): REINFORCE weighted by the stop-gradient IS ratio
    clipped from above only, sg(min(r, ε_max))·A·log π, token-level aggregation. The clipped
    weight *is* its importance correction: every token keeps its gradient, a token above the
    band with weight ε_max, so no band masks tokens out. ε_max = 5 (ScaleRL's CISPO setting;
    MiniMax-M1 tunes only the upper bound)."""

    aggregation: ClassVar[Aggregation] = "token_mean"
    importance: ClassVar[tuple[Correction, Correction]] = ("off", "off")
    name: Literal["cispo"] = "cispo"
    max_weight: float = Field(default=5.0, gt=0)  # ε_max
    advantage: Advantage = "group_mean_std"


class SFTLoss(_Strict):
    """Supervised fine-tuning (vf-sft): the negative log-likelihood of the trained tokens,
    averaged over every trained token of the batch. No ratio, so no importance mask."""

    aggregation: ClassVar[Aggregation] = "token_mean"
    sampled: ClassVar[bool] = False  # dataset tokens: no sampling ratio to bound
    importance: ClassVar[tuple[Correction, Correction]] = ("off", "off")
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
    """Correction of the trainer/inference mismatch: the ratio ρ = π_trainer/π_inference of the
    tokens as sampled (at the step's start), per token and per sequence (geometric mean).

    - ``mask``: tokens (sequences) whose ρ leaves [low, high] get no gradient (prime-rl's token
      band [0.125, 8]; masked IS). The loss's own ratio is taken against the inference logprobs.
    - ``truncate``: every term is weighted by sg(min(ρ, high)) (truncated IS, Yao et al. 2025;
      TRL's ``*_truncate``), and the loss's ratio is taken against the trainer's own policy at
      the step's start, so the mismatch is corrected once, not twice.
    - ``off``. Unset (None): the loss's own (GRPO, DAPO, Dr. GRPO: token mask; GSPO: sequence
      mask; CISPO: none, its clipped weight is its correction)."""

    token: Correction | None = None
    token_low: float = Field(default=0.125, ge=0)
    token_high: float = Field(default=8.0, gt=0)
    sequence: Correction | None = None
    sequence_low: float = Field(default=0.5, ge=0)
    sequence_high: float = Field(default=2.0, gt=0)

    def resolved(self, loss: Any) -> tuple[Correction, Correction]:
        """(token, sequence) correction for ``loss``: what is set here, else the loss's own."""
        own_token, own_sequence = loss.importance
        return (self.token or own_token, self.sequence or own_sequence)


class LoRAConfig(_Strict):
    """LoRA adapters through peft (Hu et al. 2021): only the adapters train, the inference
    server receives only them, the KL reference is the base with the adapter off (no second
    copy), and ``weights/`` gets the merged model at the end. Dropout defaults to 0: dropout in
    the training forward would make the trainer's π differ from the sampler's."""

    rank: int = Field(default=16, ge=1)
    alpha: float = Field(default=32.0, gt=0)
    dropout: float = Field(default=0.0, ge=0, lt=1)
    # module names (peft's target_modules), or "all-linear": every linear layer but the head
    target_modules: list[str] | Literal["all-linear"] = "all-linear"


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
    # entropy bonus: -entropy_coef · H(π) per token, aggregated like the loss; 0: off
    entropy_coef: float = 0.0
    # μ (GRPO's, TRL's num_iterations): optimizer steps on each batch; the LR schedule and the
    # policy version advance once per batch
    num_iterations: int = Field(default=1, ge=1)
    lora: LoRAConfig | None = None  # [trainer.lora]: train LoRA adapters instead of every weight
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
    # positions per chunk of the LM head, forward and backward: its memory is one chunk's
    logprob_chunk: int = Field(default=1024, ge=1)
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
    # (DAPO's overlong filtering), or penalize (DAPO's soft overlong punishment: 0 up to
    # max_tokens - overlong_buffer tokens, then falling linearly to -overlong_penalty at
    # max_tokens; a rollout's length is its longest model turn, as max_tokens limits each call)
    overlong: Literal["keep", "mask", "penalize"] = "keep"
    overlong_penalty: float = 1.0
    overlong_buffer: int | None = Field(default=None, ge=1)  # L_cache; None: max_tokens // 5
    # groups whose rollouts all have the same advantage teach nothing: leave them out of the
    # batch and its token count; dynamic_sampling refills the batch from further examples
    filter_zero_advantage: bool = True
    dynamic_sampling: bool = False
    max_sampling_rounds: int = Field(default=3, ge=1)
    # groups recorded per step for vf-report (tokens, masks, advantages, both logprobs); 0: off
    report_groups: int = Field(default=2, ge=0)
    # where the environment's code runs: worker processes (a number, "auto": one per core,
    # "ray" / "ray:N": Ray actors), as vf-eval does; "none": in the orchestrator's process.
    # "auto" runs in process an environment that was not loaded by id (built in Python).
    env_workers: int | str = "auto"

    @field_validator("env_workers")
    @classmethod
    def _workers_spec(cls, value: int | str) -> int | str:
        if str(value).strip().lower() == "none":
            return "none"
        from verifiers.workers import parse_spec

        parse_spec(value)  # a clear error for anything else
        return value

    def overlong_start(self) -> int:
        """Completion length where DAPO's soft penalty starts (max_tokens - L_cache)."""
        buffer = self.overlong_buffer or max(1, self.max_tokens // 5)
        return max(0, self.max_tokens - buffer)


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
    # metrics also to TensorBoard (output_dir/tensorboard) and W&B (offline unless WANDB_MODE)
    report_to: list[Tracker] = Field(default_factory=list)
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

    @model_validator(mode="after")
    def _resolve_dr_grpo_constant(self) -> RLConfig:
        """Dr. GRPO's B·L_max from the orchestrator's sampling (unless set), so the written
        config shows the constant the run divided by."""
        loss = self.trainer.loss
        if isinstance(loss, DrGRPOLoss):
            orchestrator = self.orchestrator
            loss.max_completion_tokens = loss.max_completion_tokens or orchestrator.max_tokens
            loss.sequences_per_step = loss.sequences_per_step or (
                orchestrator.examples_per_step * orchestrator.rollouts_per_example
            )
        return self


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
    token, sequence = imp.resolved(loss)
    band = f"token {token} [{imp.token_low}, {imp.token_high}]" if token != "off" else "token off"
    if sequence != "off":
        band += f", sequence {sequence} [{imp.sequence_low}, {imp.sequence_high}]"
    lora = config.trainer.lora
    adapters = f" · LoRA r {lora.rank} α {lora.alpha}" if lora else ""
    return (
        f"loss {loss.name} ({params}; {loss.aggregation}; advantage {loss.advantage}) · "
        f"IS {band} · KL β {config.trainer.kl_beta} · autocast {config.trainer.autocast}, "
        f"server {config.inference.dtype} · overlong {config.orchestrator.overlong}{adapters}"
    )
