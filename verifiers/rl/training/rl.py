"""vf-rl's run: train a model on an environment with GRPO-style RL (the command line is
``verifiers.cli.rl``'s).

Starts the inference server on the policy (vf-serve, or vLLM with inference.backend = "vllm"),
runs rollouts against it, trains in this process (FSDP2 over all ranks under torchrun), and ships
new weights to the server after every step, then exports the model.

Over 400 lines, not split: the run vf-rl makes, read top to bottom (the checks before anything
starts, the served model and the trainer wired together, the export); the config, the trainer
and the orchestrator are modules of their own.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any

from verifiers.heartbeat import Heartbeat
from verifiers.rl.configs.rl import InferenceConfig, RLConfig, summary
from verifiers.rl.run.command import load_policy, prepare_weights_dir, resume_or_follow


def held_out_eval(config: RLConfig, env: Any) -> Any:
    from verifiers.rl.training.loop import HeldOutEval

    spec = config.eval
    if not spec.every:
        return HeldOutEval()
    temperature = spec.temperature
    return HeldOutEval(
        every=spec.every,
        rows=env.dataset_rows("eval", n=spec.examples),
        rollouts_per_example=spec.rollouts_per_example,
        temperature=config.orchestrator.temperature if temperature is None else temperature,
        seed=config.seed,
    )


def trainer_device(config: RLConfig, cuda_available: bool) -> str:
    """``trainer.device``, or under "auto" this rank's GPU when the run uses GPUs, else CPU."""
    known = device_before_torch(config)
    if known is not None:
        return known
    if cuda_available:
        import torch

        return f"cuda:{torch.cuda.current_device()}"
    return "cpu"


def device_before_torch(config: RLConfig) -> str | None:
    """The trainer's device where the config alone decides it (None: it depends on the GPUs)."""
    if config.trainer.device != "auto":
        return config.trainer.device
    if config.inference.device.startswith("cuda") or config.inference.backend == "vllm":
        return None
    return "cpu"


def input_problem(config: RLConfig) -> str | None:
    """A model, environment or device combination that cannot run, said before torch loads
    (a mistyped id costs a second, not the imports of a trainer)."""
    from verifiers.errors import VFError
    from verifiers.loading.loader import locate_environment
    from verifiers.local_model.models import ModelNotAvailableError, find_model

    try:
        find_model(config.model)
        locate_environment(config.env_id)
    except (VFError, ModelNotAvailableError) as exc:
        return str(exc)
    device = device_before_torch(config)
    return device_problem(config, device) if device is not None else None


def device_problem(config: RLConfig, device: str) -> str | None:
    """Device and adapter combinations that cannot work, said before anything starts."""
    inference = config.inference
    if config.trainer.lora is not None and (
        inference.backend != "vf-serve" or inference.weight_transport != "filesystem"
    ):
        return (
            "trainer.lora pushes adapters to vf-serve through the filesystem transport (it merges "
            "them into its base); set inference.backend = 'vf-serve' and weight_transport = "
            "'filesystem', or train without LoRA"
        )
    if inference.backend == "vllm" and not inference.device.startswith("cuda"):
        return "inference.backend = 'vllm' needs inference.device = 'cuda' or 'cuda:N'"
    if inference.weight_transport == "nccl":
        same = _gpu_index(device) == _gpu_index(inference.device)
        if not device.startswith("cuda") or not inference.device.startswith("cuda") or same:
            return (
                "weight_transport = 'nccl' connects two different GPUs (NCCL refuses two "
                f"processes on one device); trainer on {device}, inference on "
                f"{inference.device}: use 'gloo' or 'filesystem', or put the server on its own GPU"
            )
    return None


def model_problem(
    config: RLConfig, model_dir: Path, device: str, gpu_bytes: int | None = None
) -> str | None:
    """What the model makes impossible, said before anything starts: a vLLM context longer than
    the model's positions, or one GPU shared by the trainer and a vLLM that reserves too much.

    On a shared GPU the trainer needs its fp32 weights, gradients and two Adam moments (16 bytes
    a parameter), the LM head's peak (``verifiers.rl.algorithm.head.head_budget_bytes``: one chunk of
    ``logprob_chunk`` positions, measured by benchmarks/lm_head_memory.py) and room for
    activations (a quarter more); vLLM takes ``gpu_memory_utilization`` of the whole GPU."""
    model = json.loads((model_dir / "config.json").read_text())
    inference = config.inference
    positions = model.get("max_position_embeddings")
    if (
        inference.backend == "vllm"
        and inference.max_model_len
        and positions
        and inference.max_model_len > positions
    ):
        return (
            f"inference.max_model_len = {inference.max_model_len} is longer than the model's "
            f"{positions} positions (vLLM refuses to start): use at most {positions}, or leave "
            "it unset"
        )
    shared = (
        inference.backend == "vllm"
        and device.startswith("cuda")
        and _gpu_index(device) == _gpu_index(inference.device)
    )
    if not shared:
        return None
    if gpu_bytes is None:
        import torch

        gpu_bytes = torch.cuda.get_device_properties(_gpu_index(device)).total_memory
    from verifiers.rl.algorithm.head import head_budget_bytes

    params = parameter_count(model_dir)
    positions = config.trainer.max_tokens_per_micro_batch
    head = head_budget_bytes(
        positions,
        config.trainer.logprob_chunk,
        int(model.get("vocab_size", 0)),
        int(model.get("hidden_size", 0)),
    )
    needed = int((16 * params + head) * 1.25)
    left = int(gpu_bytes * (1 - inference.gpu_memory_utilization))
    if needed > left:
        most = max(0.05, 1 - needed / gpu_bytes)
        return (
            f"the trainer and vLLM share {device}: vLLM reserves "
            f"{inference.gpu_memory_utilization:.0%} of {gpu_bytes / 2**30:.0f} GiB, leaving "
            f"{left / 2**30:.1f} GiB, and the trainer needs about {needed / 2**30:.1f} GiB "
            f"({params / 1e6:.0f}M parameters): set inference.gpu_memory_utilization to at most "
            f"{most:.2f}, or put vLLM on its own GPU"
        )
    return None


def parameter_count(model_dir: Path) -> int:
    """Parameters of the model in ``model_dir``, built on the meta device (nothing allocated)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(model_dir))
    return sum(p.numel() for p in model.parameters())


def _gpu_index(device: str) -> int:
    return int(device.split(":", 1)[1]) if ":" in device else 0


def make_trainer(config: RLConfig, model: Any, pad_id: int = 0, dist: Any = None) -> Any:
    """The trainer exactly as the run's config describes it (what vf-rl trains with)."""
    from verifiers.rl.algorithm.trainer import Trainer

    return Trainer(
        model,
        config.trainer,
        total_steps=config.steps,
        temperature=config.orchestrator.temperature,
        pad_id=pad_id,
        dist=dist,
    )


def make_transport(
    inference: InferenceConfig,
    base_url: str,
    directory: Path,
    alive: Any,
    trainer_device: str = "cpu",
    secret: str | None = None,
    api_key: str | None = None,
) -> Any:
    from verifiers.weights.transport import BroadcastTransport, FilesystemTransport

    if inference.weight_transport == "filesystem":
        return FilesystemTransport(base_url, directory, alive, secret=secret, api_key=api_key)
    return BroadcastTransport(
        base_url,
        alive,
        backend=inference.weight_transport,
        device=trainer_device,  # rank 0 sends from the trainer's device
        host=inference.weight_transport_host,
        secret=secret,
        api_key=api_key,
    )


def nccl_settings(config: RLConfig) -> None:
    if config.inference.weight_transport == "nccl":
        # vLLM runs NCCL with cuMem off; a trainer with it on can hang in the weight broadcast.
        # NCCL reads it once per process, so before torch (and any NCCL group) starts.
        os.environ.setdefault("NCCL_CUMEM_ENABLE", "0")


def run(config: RLConfig, resume: bool, console: Any) -> int:
    import torch
    from rich.markup import escape
    from transformers import AutoTokenizer

    import verifiers as vf
    from verifiers.errors import VFError
    from verifiers.local_model.models import ModelNotAvailableError, resolve_model_dir
    from verifiers.rl.algorithm.batching import PackingError
    from verifiers.rl.run.distributed import init_from_env

    ctx = init_from_env()  # under torchrun: FSDP2 over all ranks; rank 0 also runs rollouts
    out = Path(config.output_dir)  # command_main checked it is free (or resumable)
    out.mkdir(parents=True, exist_ok=True)
    try:  # what the user named must exist: say so in one line, not a traceback
        model_dir, _ = resolve_model_dir(config.model)
        env = vf.load_environment(config.env_id, **config.env_args)
    except (VFError, ModelNotAvailableError, TypeError) as exc:
        console.print(f"vf-rl: {escape(str(exc))}", soft_wrap=True)
        return 2
    device = trainer_device(config, torch.cuda.is_available())
    problem = device_problem(config, device) or model_problem(config, model_dir, device)
    if problem:
        console.print(f"vf-rl: {problem}", soft_wrap=True)
        return 2
    (out / "config.json").write_text(config.model_dump_json(indent=2))  # what actually runs
    console.print(f"{escape(summary(config))}\nconfig: {out / 'config.json'}", soft_wrap=True)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    try:
        trainer = make_trainer(
            config, load_policy(model_dir, device), tokenizer.pad_token_id or 0, ctx
        )
    except (PackingError, ValueError) as exc:
        console.print(f"vf-rl: {escape(str(exc))}", soft_wrap=True)
        return 2
    start_step = resume_or_follow(trainer, out, resume, ctx, console)
    if config.checkpoint_every:
        kept = f"the newest {config.keep_checkpoints}" if config.keep_checkpoints else "all"
        console.print(
            f"checkpoints every {config.checkpoint_every} steps in {out / 'checkpoints'} ({kept} kept)"
        )
    # The weights dir is a complete model directory (vf-eval -m / vf-serve can load it).
    prepare_weights_dir(model_dir, out / "weights")
    return _serve_and_train(config, env, trainer, tokenizer, model_dir, device, start_step, console)


def _serve_and_train(
    config: RLConfig,
    env: Any,
    trainer: Any,
    tokenizer: Any,
    model_dir: Path,
    device: str,
    start_step: int,
    console: Any,
) -> int:
    """Start the inference server, run the loop, export the model: rank 0's part of a run."""
    from rich.markup import escape

    from verifiers.clients import OpenAICompatibleClient
    from verifiers.rl.algorithm.batching import MissingTokensError
    from verifiers.rl.run.distributed import shutdown
    from verifiers.rl.run.tracking import start_trackers
    from verifiers.rl.training.inference import start_inference
    from verifiers.rl.training.loop import LoopSettings, plot, train
    from verifiers.rl.training.orchestrator import Orchestrator
    from verifiers.weights.access import new_secret
    from verifiers.weights.errors import InferenceServerError

    out = Path(config.output_dir)
    log = out / "logs" / "inference.log"
    trackers = start_trackers("vf-rl", config, trainer, console)
    if trackers is None:
        return 2
    try:
        with console.status(f"starting the inference server ({config.inference.backend})"):
            server = start_inference(
                config.inference,
                model_dir,
                log,
                weights_dir=out / "weights",
                weights_secret=new_secret(),  # only this trainer may change the served weights
            )
    except RuntimeError as exc:
        console.print(f"vf-rl: the inference server did not start: {escape(str(exc))}")
        trainer.stop_followers()
        trackers.close()
        return 1
    weights = None
    try:

        def alive() -> str | None:
            code = server.process.poll()
            return (
                None
                if code is None
                else f"the inference server exited (code {code}); its log: {log}"
            )

        weights = make_transport(
            config.inference,
            server.base_url,
            out / "weights",
            alive,
            trainer_device=device,
            secret=server.weights_secret,
            api_key=server.api_key,
        )
        if start_step:
            weights.push(trainer)
        orchestrator = Orchestrator(
            env,
            OpenAICompatibleClient(server.base_url, server.api_key),  # its one client
            "policy",
            seed=config.seed,
            health=alive,
            config=config.orchestrator,
            advantage=config.trainer.loss.advantage,
        )
        with _progress_table(config, console) as (on_step, on_eval, on_eval_start):

            def after_step(record: dict[str, Any]) -> None:
                on_step(record)
                trackers.log(record, record["step"])

            def after_eval(record: dict[str, Any]) -> None:
                on_eval(record)
                trackers.log(record, record["step"], prefix="eval")

            train(
                orchestrator,
                trainer,
                weights,
                LoopSettings(
                    steps=config.steps,
                    max_off_policy_steps=config.max_off_policy_steps,
                    checkpoint_every=config.checkpoint_every,
                    output_dir=out,
                    keep_checkpoints=config.keep_checkpoints,
                    eval=held_out_eval(config, env),
                    decode=lambda ids: [tokenizer.decode([i]) for i in ids],
                ),
                start_step=start_step,
                on_step=after_step,
                on_eval=after_eval,
                on_eval_start=on_eval_start,
            )
        exported = export_run(config, env, trainer, out)
    except (InferenceServerError, MissingTokensError) as exc:
        console.print(f"[red]vf-rl: {escape(str(exc))}[/red]; training stopped")
        return 1
    finally:
        if weights is not None:
            weights.close()
        trainer.stop_followers()
        server.stop()
        trackers.close()
        if trainer.dist is not None:
            shutdown()
    picture = plot(out)
    console.print(
        f"weights: {out / 'weights'} ({', '.join(exported)}; vf-eval ENV -m {out / 'weights'}); "
        f"metrics: {out / 'metrics.jsonl'}"
        + (f"; plot: {picture}" if picture else "")
        + f"; report: vf-report {out}",
        soft_wrap=True,
    )
    return 0


def export_run(config: RLConfig, env: Any, trainer: Any, out: Path) -> list[str]:
    """``weights/`` as the finished model: bf16 shards (LoRA merged) and a model card."""
    from verifiers.rl.run.export import export_model, model_card
    from verifiers.rl.run.records import run_records

    state = trainer.merged_state()  # a collective under FSDP2: every rank takes part
    if state is None:
        return []
    files = export_model(state, out / "weights")
    loss = config.trainer.loss
    lora = config.trainer.lora
    run = {
        "command": "vf-rl",
        "output_dir": str(out),
        "steps": config.steps,
        "loss": loss.name,
        "learning rate": config.trainer.lr,
        "examples × rollouts per step": (
            f"{config.orchestrator.examples_per_step} × {config.orchestrator.rollouts_per_example}"
        ),
        "adapters": f"LoRA r {lora.rank}, α {lora.alpha} (merged)" if lora else "none (full)",
        "seed": config.seed,
    }
    _, evals = run_records(out)
    card = model_card(base_model=config.model, env=env, run=run, evals=evals)
    (out / "weights" / "README.md").write_text(card)
    return files


@contextlib.contextmanager
def _progress_table(config: RLConfig, console: Any) -> Any:
    """A live table of the steps as they finish, a line per held-out eval, and under the table
    what the run is doing now and for how long (the first step and a held-out eval can each
    take minutes)."""
    from rich.console import Group
    from rich.live import Live
    from rich.table import Table
    from rich.text import Text

    class Activity:
        def __init__(self) -> None:
            self.what, self.since = "step 0: generating rollouts, then training", time.monotonic()

        def now(self, what: str) -> None:
            self.what, self.since = what, time.monotonic()

        def __rich__(self) -> Text:
            return Text(f"{self.what} ({time.monotonic() - self.since:.0f} s)", style="dim")

    activity = Activity()

    table = Table(title=f"vf-rl · {config.env_id} · {config.model}")
    columns = ("step", "reward", "loss", "samples", "stale", "lag", "gen s", "train s", "step s")
    for col in (*columns, "tok/s"):
        table.add_column(col, justify="right")

    plain = not console.is_terminal  # a log file: rich's Live draws nothing there until the end

    def on_step(r: dict[str, Any]) -> None:
        cells = (
            str(r["step"]),
            f"{r['reward']:.3f}",
            f"{r.get('loss', 0):.4f}",
            str(r["samples"]),
            str(r["stale_dropped"]),
            str(r["max_lag"]),
            f"{r['generation_s']:.1f}",
            f"{r['train_s']:.1f}",
            f"{r['step_s']:.1f}",
            f"{r['tokens_per_s']:,.0f}",
        )
        table.add_row(*cells)
        if plain:
            named = zip((*columns, "tok/s"), cells, strict=True)
            console.print(" · ".join(f"{col} {cell}" for col, cell in named), highlight=False)
        activity.now(f"step {r['step'] + 1}: generating rollouts, then training")

    def on_eval(r: dict[str, Any]) -> None:
        console.print(
            f"held-out reward after {r['step']} steps: {r['eval_reward']:.3f} "
            f"± {r['eval_reward_std']:.3f} ({r['eval_rollouts']} rollouts, "
            f"{r['eval_errors']} errors, {r['eval_s']:.1f} s)"
        )

    def on_eval_start(step: int, rollouts: int) -> None:
        activity.now(f"held-out eval after {step} steps: {rollouts} rollouts (beside training)")
        if plain:
            console.print(str(activity.__rich__()), highlight=False)

    if plain:
        console.print(table.title, highlight=False)
        console.print(str(activity.__rich__()), highlight=False)
        with Heartbeat(console, lambda: str(activity.__rich__())):
            yield on_step, on_eval, on_eval_start
        return
    with Live(Group(table, activity), console=console, refresh_per_second=4):
        yield on_step, on_eval, on_eval_start
