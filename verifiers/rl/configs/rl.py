"""Every vf-rl setting, declared once, with its default.

The CLI parses a TOML file and ``--dotted.key value`` overrides into :class:`RLConfig`; the
trainer, the losses and the orchestrator read their sections of it and declare nothing of their
own. Each loss is its own model carrying its paper's defaults, so ``loss = "dapo"`` selects DAPO's
clip-higher 0.2/0.28, not GRPO's 0.2/0.2 under another name, and each names the trainer/inference
importance correction its objective implies (``importance``). A misspelt key is an error.

Over 400 lines, not split: every vf-rl setting declared once, in the one file a reader
searches for a key, is the point.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from verifiers.local_model.models import DEFAULT_MODEL

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

    delta: float | None = Field(
        default=None,
        gt=1,
        description="two-sided clip (INTELLECT-2, TRL's delta): r is also capped at delta on "
        "the unclipped side (A < 0); none: off. Set it above 1 + clip_high",
    )


# --- losses: each the algorithm of its name, with that paper's defaults ------------------------


class GRPOLoss(_ClippedSurrogate):
    """GRPO (Shao et al. 2024, DeepSeekMath eq. 3): PPO's clipped surrogate per token, averaged
    over each sequence's tokens, then over sequences; std-scaled group advantages."""

    aggregation: ClassVar[Aggregation] = "sequence_mean"
    name: Literal["grpo"] = Field(default="grpo", description="the loss: GRPO")
    clip_low: float = Field(default=0.2, ge=0, description="ratio lower bound 1 - clip_low")
    clip_high: float = Field(default=0.2, ge=0, description="ratio upper bound 1 + clip_high")
    advantage: Advantage = Field(
        default="group_mean_std", description="how rewards become advantages within a group"
    )


class DAPOLoss(_ClippedSurrogate):
    """DAPO (Yu et al. 2025, eq. 8): the clipped surrogate with clip-higher (ε_low 0.2, ε_high
    0.28) and token-level aggregation (every token of the batch weighs the same)."""

    aggregation: ClassVar[Aggregation] = "token_mean"
    name: Literal["dapo"] = Field(default="dapo", description="the loss: DAPO")
    clip_low: float = Field(default=0.2, ge=0, description="ratio lower bound 1 - clip_low")
    clip_high: float = Field(default=0.28, ge=0, description="ratio upper bound 1 + clip_high")
    advantage: Advantage = Field(
        default="group_mean_std", description="how rewards become advantages within a group"
    )


class DrGRPOLoss(_ClippedSurrogate):
    """Dr. GRPO (Liu et al. 2025, "Understanding R1-Zero-like training"): the clipped surrogate
    summed over tokens and divided by a constant B·L_max (no length bias), and advantages without
    std scaling (no difficulty bias). The constant does not move with filtering: B is the step's
    sampled sequences (examples_per_step × rollouts_per_example), L_max the orchestrator's
    max_tokens, unless set here; vf-rl writes the values it used to config.json."""

    aggregation: ClassVar[Aggregation] = "constant"
    name: Literal["dr_grpo"] = Field(default="dr_grpo", description="the loss: Dr. GRPO")
    clip_low: float = Field(default=0.2, ge=0, description="ratio lower bound 1 - clip_low")
    clip_high: float = Field(default=0.2, ge=0, description="ratio upper bound 1 + clip_high")
    advantage: Advantage = Field(
        default="group_mean", description="how rewards become advantages within a group"
    )
    max_completion_tokens: int | None = Field(
        default=None,
        ge=1,
        description="L_max of the constant B·L_max (none: orchestrator.max_tokens)",
    )
    sequences_per_step: int | None = Field(
        default=None,
        ge=1,
        description="B of the constant B·L_max (none: examples_per_step × rollouts_per_example)",
    )


class GSPOLoss(_ClippedSurrogate):
    """GSPO (Zheng et al. 2025, eq. 5-7): one length-normalized ratio per sequence,
    s = exp(mean_t(log π - log π_old)), clipped at 1 - 3e-4 / 1 + 4e-4, averaged over sequences.
    Its unit is the sequence, so its mismatch correction is too: sequences whose geometric-mean
    ratio leaves the sequence band are masked; no token is taken out of s."""

    aggregation: ClassVar[Aggregation] = "sequence_mean"
    importance: ClassVar[tuple[Correction, Correction]] = ("off", "mask")
    name: Literal["gspo"] = Field(default="gspo", description="the loss: GSPO")
    clip_low: float = Field(default=3e-4, ge=0, description="ratio lower bound 1 - clip_low")
    clip_high: float = Field(default=4e-4, ge=0, description="ratio upper bound 1 + clip_high")
    advantage: Advantage = Field(
        default="group_mean_std", description="how rewards become advantages within a group"
    )


class CISPOLoss(_PolicyGradient):
    """CISPO (MiniMax-M1, 2025, eq. 4-5): REINFORCE weighted by the stop-gradient IS ratio
    clipped from above only, sg(min(r, ε_max))·A·log π, token-level aggregation. The clipped
    weight *is* its importance correction: every token keeps its gradient, a token above the
    band with weight ε_max, so no band masks tokens out. ε_max = 5 (ScaleRL's CISPO setting;
    MiniMax-M1 tunes only the upper bound)."""

    aggregation: ClassVar[Aggregation] = "token_mean"
    importance: ClassVar[tuple[Correction, Correction]] = ("off", "off")
    name: Literal["cispo"] = Field(default="cispo", description="the loss: CISPO")
    max_weight: float = Field(
        default=5.0, gt=0, description="ε_max: the upper clip of the stop-gradient IS weight"
    )
    advantage: Advantage = Field(
        default="group_mean_std", description="how rewards become advantages within a group"
    )


class SFTLoss(_Strict):
    """Supervised fine-tuning (vf-sft): the negative log-likelihood of the trained tokens,
    averaged over every trained token of the batch. No ratio, so no importance mask."""

    aggregation: ClassVar[Aggregation] = "token_mean"
    sampled: ClassVar[bool] = False  # dataset tokens: no sampling ratio to bound
    importance: ClassVar[tuple[Correction, Correction]] = ("off", "off")
    name: Literal["sft"] = Field(
        default="sft", description="the loss: supervised fine-tuning (vf-sft)"
    )
    advantage: Advantage = Field(
        default="group_mean", description="unused: SFT samples carry no advantage"
    )


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

    token: Correction | None = Field(
        default=None, description="per-token correction (none: the loss's own)"
    )
    token_low: float = Field(default=0.125, ge=0, description="lower end of the token band")
    token_high: float = Field(default=8.0, gt=0, description="upper end of the token band")
    sequence: Correction | None = Field(
        default=None,
        description="per-sequence correction, on the geometric-mean ratio (none: the loss's own)",
    )
    sequence_low: float = Field(default=0.5, ge=0, description="lower end of the sequence band")
    sequence_high: float = Field(default=2.0, gt=0, description="upper end of the sequence band")

    def resolved(self, loss: Any) -> tuple[Correction, Correction]:
        """(token, sequence) correction for ``loss``: what is set here, else the loss's own."""
        own_token, own_sequence = loss.importance
        return (self.token or own_token, self.sequence or own_sequence)


class LoRAConfig(_Strict):
    """LoRA adapters through peft (Hu et al. 2021): only the adapters train, the inference
    server receives only them, the KL reference is the base with the adapter off (no second
    copy), and ``weights/`` gets the merged model at the end. Dropout defaults to 0: dropout in
    the training forward would make the trainer's π differ from the sampler's."""

    rank: int = Field(default=16, ge=1, description="the adapters' rank r")
    alpha: float = Field(default=32.0, gt=0, description="the adapters' scale α (α / r)")
    dropout: float = Field(
        default=0.0, ge=0, lt=1, description="adapter dropout (0: the sampler's π is trained)"
    )
    target_modules: list[str] | Literal["all-linear"] = Field(
        default="all-linear",
        description="module names (peft's target_modules), or all-linear: every linear layer "
        "but the head",
    )


class TrainerConfig(_Strict):
    """The optimizer step: loss, optimizer, schedule, packing, precision."""

    lr: float = Field(default=1e-5, description="AdamW's peak learning rate")
    weight_decay: float = Field(default=0.0, description="AdamW's weight decay")
    betas: tuple[float, float] = Field(default=(0.9, 0.999), description="AdamW's (β1, β2)")
    warmup_steps: int = Field(default=0, ge=0, description="steps of linear warm-up to lr")
    schedule: Literal["constant", "linear", "cosine"] = Field(
        default="constant", description="the learning rate after warm-up"
    )
    min_lr_ratio: float = Field(
        default=0.0, ge=0, le=1, description="where linear and cosine decay end, times lr"
    )
    loss: Annotated[LossConfig, BeforeValidator(_loss_by_name)] = Field(
        default_factory=GRPOLoss,
        description="the objective, each with its paper's defaults (vf-rl: grpo, dapo, dr_grpo, "
        "gspo, cispo; vf-sft: sft)",
    )
    importance: ImportanceConfig = Field(
        default_factory=ImportanceConfig,
        description="correction of the trainer/inference mismatch",
    )
    kl_beta: float = Field(
        default=0.0, ge=0, description="KL to the frozen starting model (k3); 0: off"
    )
    entropy_coef: float = Field(
        default=0.0,
        description="entropy bonus: -entropy_coef · H(π) per token, aggregated like the loss; "
        "0: off",
    )
    num_iterations: int = Field(
        default=1,
        ge=1,
        description="μ (GRPO's, TRL's num_iterations): optimizer steps on each batch; the LR "
        "schedule and the policy version advance once per batch",
    )
    lora: LoRAConfig | None = Field(
        default=None,
        description="[trainer.lora]: train LoRA adapters instead of every weight (none: full)",
    )
    max_grad_norm: float = Field(default=1.0, description="gradient norm clip")
    packing: Annotated[
        Literal["auto", "varlen", "masked", "off"], BeforeValidator(_packing_mode)
    ] = Field(
        default="auto",
        description="varlen: samples concatenated into rows, kept apart by position ids "
        "(flash-attention kernels: no padding, no L² mask); masked: the same rows with a "
        "block-diagonal mask (sdpa, eager: correct, but attention costs L² per row); off: "
        "padded micro-batches of samples of similar length; auto: varlen where the model's "
        "attention supports it, else off",
    )
    max_tokens_per_micro_batch: int = Field(
        default=2048, ge=2, description="tokens in a packed row, or padded batch × longest"
    )
    micro_batch_size: int = Field(
        default=8, ge=1, description="padded micro-batches: at most this many samples"
    )
    logprob_chunk: int = Field(
        default=1024,
        ge=1,
        description="positions per chunk of the LM head, forward and backward: its memory is "
        "one chunk's",
    )
    autocast: Literal["auto", "none", "bf16"] = Field(
        default="auto",
        description="auto: bf16 exactly when the server samples in bfloat16, so the on-policy "
        "ratio is 1",
    )
    gradient_checkpointing: bool = Field(
        default=False, description="recompute activations in the backward pass (less memory)"
    )
    shared_prompts: bool = Field(
        default=True,
        description="samples that start with the same prompt (a group) compute it once, forward "
        "and backward, and continue from its cache: the same gradient, fewer tokens (padded "
        "micro-batches on one process without gradient checkpointing; elsewhere: off)",
    )
    device: str = Field(
        default="auto", description="auto: this rank's GPU when the run uses GPUs, else cpu"
    )


class OrchestratorConfig(_Strict):
    """Rollouts: how many, how sampled, which groups train."""

    examples_per_step: int = Field(default=4, ge=1, description="examples (groups) per step")
    rollouts_per_example: int = Field(
        default=4, ge=2, description="rollouts per example (the group size)"
    )
    max_tokens: int = Field(default=64, ge=1, description="completion token limit per model call")
    temperature: float = Field(default=1.0, gt=0, description="sampling temperature")
    max_concurrent: int = Field(default=32, ge=1, description="rollouts in flight at once")
    overlong: Literal["keep", "mask", "penalize"] = Field(
        default="keep",
        description="truncated completions (hit max_tokens): keep as they are, mask them out "
        "of the loss (DAPO's overlong filtering), or penalize (DAPO's soft overlong punishment: "
        "0 up to max_tokens - overlong_buffer tokens, then falling linearly to "
        "-overlong_penalty at max_tokens; a rollout's length is its longest model turn)",
    )
    overlong_penalty: float = Field(
        default=1.0, description="the penalty at max_tokens (overlong = penalize)"
    )
    overlong_buffer: int | None = Field(
        default=None, ge=1, description="L_cache (overlong = penalize; none: max_tokens // 5)"
    )
    filter_zero_advantage: bool = Field(
        default=True,
        description="leave groups whose rollouts all have the same advantage (they teach "
        "nothing) out of the batch and its token count",
    )
    dynamic_sampling: bool = Field(
        default=False, description="refill the filtered batch from further examples"
    )
    max_sampling_rounds: int = Field(
        default=3, ge=1, description="dynamic sampling: rounds of refilling at most"
    )
    report_groups: int = Field(
        default=2,
        ge=0,
        description="groups recorded per step for vf-report (tokens, masks, advantages, both "
        "logprobs); 0: off",
    )
    env_workers: int | str = Field(
        default="auto",
        description="where the environment's code runs: worker processes (a number, auto: one "
        "per core, ray / ray:N: Ray actors), as vf-eval does; none: in the orchestrator's "
        "process. auto runs in process an environment that was not loaded by id",
    )

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
    """The inference server the rollouts sample from, and how new weights reach it."""

    backend: Literal["vf-serve", "vllm"] = Field(
        default="vf-serve",
        description="vf-serve: the built-in server (CPU, one GPU); vllm: vLLM's OpenAI server "
        "(CUDA), with the weight-update API added",
    )
    dtype: str = Field(default="float32", description="the server's dtype")
    max_batch_size: int = Field(default=32, description="vf-serve: sequences decoded together")
    device: str = Field(
        default="cpu",
        description="cuda:1: the server on its own GPU (vLLM: CUDA_VISIBLE_DEVICES=1)",
    )
    gpu_memory_utilization: float = Field(
        default=0.4, gt=0, le=1, description="vLLM's share of the GPU; leave the trainer room"
    )
    max_model_len: int | None = Field(
        default=None, description="vLLM's context (none: the model's max_position_embeddings)"
    )
    extra_args: list[str] = Field(
        default_factory=list, description="passed to the server's command line"
    )
    startup_timeout_s: float = Field(
        default=600, description="seconds the server may take to start"
    )
    weight_transport: Literal["filesystem", "gloo", "nccl"] = Field(
        default="filesystem",
        description="filesystem: safetensors + reload (works everywhere); gloo / nccl: a "
        "process group between trainer and server (nccl needs them on different GPUs; gloo "
        "also works across one GPU)",
    )
    weight_transport_host: str = Field(
        default="127.0.0.1", description="gloo / nccl: the address the process group meets at"
    )


class EvalConfig(_Strict):
    """Held-out reward while training (the environment's eval split; its train split if it has
    none): before the first step, every ``every`` steps and after the last. 0: off."""

    every: int = Field(default=0, ge=0, description="steps between held-out evals; 0: off")
    examples: int = Field(default=32, ge=1, description="held-out examples per eval")
    rollouts_per_example: int = Field(default=1, ge=1, description="rollouts per example")
    temperature: float | None = Field(
        default=None, description="sampling temperature (none: the training temperature)"
    )


class RLConfig(_Strict):
    model: str = Field(
        default=DEFAULT_MODEL, description="embedded model name or a local HF model directory"
    )
    env_id: str = Field(default="reverse-text", description="the environment to train on")
    env_args: dict[str, Any] = Field(
        default_factory=dict, description="keyword arguments of load_environment"
    )
    output_dir: str = Field(default="outputs/rl/run", description="where the run is written")
    steps: int = Field(default=10, ge=1, description="optimizer steps (batches) to train")
    max_off_policy_steps: int = Field(
        default=1, ge=0, description="how many policy versions a sample may lag the trainer"
    )
    checkpoint_every: int = Field(default=0, ge=0, description="steps between checkpoints; 0: off")
    keep_checkpoints: int = Field(
        default=2, ge=0, description="newest N kept in output_dir/checkpoints; 0: all"
    )
    seed: int = Field(default=0, description="seed of example order and sampling")
    report_to: list[Tracker] = Field(
        default_factory=list,
        description="metrics also to TensorBoard (output_dir/tensorboard) and W&B (offline "
        "unless WANDB_MODE)",
    )
    orchestrator: OrchestratorConfig = Field(
        default_factory=OrchestratorConfig, description=OrchestratorConfig.__doc__
    )
    trainer: TrainerConfig = Field(default_factory=TrainerConfig, description=TrainerConfig.__doc__)
    inference: InferenceConfig = Field(
        default_factory=InferenceConfig, description=InferenceConfig.__doc__
    )
    eval: EvalConfig = Field(
        default_factory=EvalConfig, description="held-out reward while training"
    )

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
