"""vf-rl: train a model on an environment with GRPO-style RL.

    vf-rl @ examples/rl/uppercase_cpu.toml [--steps 20] [--trainer.lr 2e-5] [--resume]

Starts the inference server on the policy (vf-serve, or vLLM with inference.backend = "vllm"),
runs rollouts against it, trains in this process (FSDP2 over all ranks under torchrun), and ships
new weights to the server after every step (inference.weight_transport: filesystem, gloo or
nccl). Writes metrics.jsonl, a metrics.png plot and checkpoints under ``output_dir``; --resume
continues from the latest checkpoint. If either side dies, the other is stopped and the reason
printed. Every setting, with its default:
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from verifiers.rl.config import InferenceConfig, RLConfig, summary


class UsageError(ValueError):
    """A command line or config file vf-rl cannot use (exit 2, one line)."""


def parse_overrides(
    argv: list[str], doc: str | None, defaults: dict[str, Any], example: str
) -> tuple[dict[str, Any], bool]:
    """``@ file.toml`` (or a bare .toml path), then ``--dotted.key value`` overrides and
    ``--resume``: the raw settings (validated by the caller's config model) and the resume flag.
    ``--help`` prints ``doc`` and ``defaults``."""
    data: dict[str, Any] = {}
    resume = False
    rest = list(argv)
    if rest and rest[0] == "@":
        rest.pop(0)
    if rest and rest[0].endswith(".toml"):
        path = Path(rest.pop(0))
        try:
            data = tomllib.loads(path.read_text())
        except FileNotFoundError:
            raise UsageError(f"no config file {path}; start from {example}") from None
        except tomllib.TOMLDecodeError as exc:
            raise UsageError(f"{path} is not valid TOML: {exc}") from None
    while rest:
        flag = rest.pop(0)
        if flag == "--resume":
            resume = True
            continue
        if flag in ("-h", "--help"):
            print(doc)
            print(json.dumps(defaults, indent=2))
            sys.exit(0)
        if not flag.startswith("--") or not rest:
            raise UsageError(f"expected '--key value', got {flag!r}")
        value = rest.pop(0)
        try:
            parsed: Any = json.loads(value)
        except json.JSONDecodeError:
            parsed = value
        target = data
        keys = flag[2:].replace("-", "_").split(".")
        for key in keys[:-1]:
            if isinstance(target.get(key), str):  # loss = "dapo", then --trainer.loss.clip_high
                target[key] = {"name": target[key]}
            target = target.setdefault(key, {})
        target[keys[-1]] = parsed
    return data, resume


def parse_args(argv: list[str]) -> tuple[RLConfig, bool]:
    data, resume = parse_overrides(
        argv, __doc__, RLConfig().model_dump(), "examples/rl/uppercase_cpu.toml"
    )
    return RLConfig.model_validate(data), resume


def eval_settings(config: RLConfig, env: Any) -> Any:
    from verifiers.rl.loop import EvalSettings

    spec = config.eval
    if not spec.every:
        return EvalSettings()
    temperature = spec.temperature
    return EvalSettings(
        every=spec.every,
        rows=env.dataset_rows("eval", n=spec.examples),
        rollouts_per_example=spec.rollouts_per_example,
        temperature=config.orchestrator.temperature if temperature is None else temperature,
        seed=config.seed,
    )


def trainer_device(config: RLConfig, cuda_available: bool) -> str:
    """``trainer.device``, or under "auto" this rank's GPU when the run uses GPUs, else CPU."""
    if config.trainer.device != "auto":
        return config.trainer.device
    if cuda_available and (
        config.inference.device.startswith("cuda") or config.inference.backend == "vllm"
    ):
        import torch

        return f"cuda:{torch.cuda.current_device()}"
    return "cpu"


def device_problem(config: RLConfig, device: str) -> str | None:
    """Device combinations that cannot work, said before anything starts."""
    inference = config.inference
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
    a parameter), a logits chunk (``logprob_chunk`` × vocab in fp32, with its gradient) and room
    for activations (a quarter more); vLLM takes ``gpu_memory_utilization`` of the whole GPU."""
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
    params = parameter_count(model_dir)
    logits = config.trainer.logprob_chunk * int(model.get("vocab_size", 0)) * 4 * 3
    needed = int((16 * params + logits) * 1.25)
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
    from verifiers.rl.trainer import Trainer

    return Trainer(
        model,
        config.trainer,
        total_steps=config.steps,
        temperature=config.orchestrator.temperature,
        max_completion_tokens=config.max_completion_tokens(),
        pad_id=pad_id,
        dist=dist,
    )


def prepare_weights_dir(model_dir: Path, weights: Path) -> None:
    """``weights`` as a complete model directory (config, tokenizer, chat template) that the
    trained weights are written into: ``vf-eval -m``, ``vf-serve`` and ``model =`` load it."""
    weights.mkdir(parents=True, exist_ok=True)
    for item in model_dir.iterdir():
        if item.is_file() and not item.name.endswith(".safetensors"):
            shutil.copy2(item, weights / item.name)


def run_dir_problem(out: Path, resume: bool) -> str | None:
    """Two runs never share one output dir: their metrics, plots and checkpoints would mix."""
    from verifiers.rl.loop import latest_checkpoint

    if resume:
        if latest_checkpoint(out) is None:
            return (
                f"--resume: no checkpoint in {out / 'checkpoints'} (set checkpoint_every to "
                "write them); run without --resume to start a new run"
            )
        return None
    if (out / "metrics.jsonl").exists() or latest_checkpoint(out) is not None:
        return (
            f"{out} already holds a run: continue it with --resume, or choose another --output_dir"
        )
    return None


def truncate_history(out: Path, step: int) -> None:
    """Drop the records of steps after the checkpoint a run resumes from (they are redone)."""
    for name, keep in (
        ("metrics.jsonl", lambda r: r["step"] < step),
        ("eval.jsonl", lambda r: r["step"] <= step),
    ):
        path = out / name
        if not path.exists():
            continue
        kept = []
        for line in path.read_text().splitlines():
            try:
                if keep(json.loads(line)):
                    kept.append(line)
            except (json.JSONDecodeError, KeyError, TypeError):
                continue
        path.write_text("".join(f"{line}\n" for line in kept))


def make_transport(
    inference: InferenceConfig,
    base_url: str,
    directory: Path,
    alive: Any,
    trainer_device: str = "cpu",
    secret: str | None = None,
) -> Any:
    from verifiers.weights.transport import BroadcastTransport, FilesystemTransport

    if inference.weight_transport == "filesystem":
        return FilesystemTransport(base_url, directory, alive, secret=secret)
    return BroadcastTransport(
        base_url,
        alive,
        backend=inference.weight_transport,
        device=trainer_device,  # rank 0 sends from the trainer's device
        host=inference.weight_transport_host,
        secret=secret,
    )


def command_main(
    prog: str,
    parse: Any,
    run: Any,
    argv: list[str] | None,
    before_run: Any = None,
) -> int:
    """A trainer command from argv to exit code: config mistakes are one line and exit 2,
    Ctrl-C says how to resume (130), and a torchrun worker exits without gloo's teardown."""
    # Two processes (trainer, inference server) share the cores: spinning OpenMP threads would
    # slow both many times over. Must be set before torch is imported.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        config, resume = parse(sys.argv[1:] if argv is None else argv)
    except ValidationError as exc:
        print(f"{prog}: invalid config: {exc}", file=sys.stderr)
        return 2
    except UsageError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    if before_run is not None:
        before_run(config)
    from rich.console import Console

    console = Console()
    try:
        code = run(config, resume, console)
    except KeyboardInterrupt:
        console.print(
            "[yellow]interrupted[/yellow]; continue with --resume (from the last checkpoint)"
        )
        code = 130
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # a torchrun worker: skip gloo's teardown
        from verifiers.rl.distributed import shutdown

        shutdown(exit_code=code)
    return code


def _nccl_settings(config: RLConfig) -> None:
    if config.inference.weight_transport == "nccl":
        # vLLM runs NCCL with cuMem off; a trainer with it on can hang in the weight broadcast.
        # NCCL reads it once per process, so before torch (and any NCCL group) starts.
        os.environ.setdefault("NCCL_CUMEM_ENABLE", "0")


def main(argv: list[str] | None = None) -> int:
    return command_main("vf-rl", parse_args, run, argv, before_run=_nccl_settings)


def run(config: RLConfig, resume: bool, console: Any) -> int:
    import torch
    from rich.live import Live
    from rich.markup import escape
    from rich.table import Table
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import verifiers as vf
    from verifiers.clients import OpenAICompatibleClient
    from verifiers.errors import VFError
    from verifiers.local_models import ModelNotAvailableError, resolve_model_dir
    from verifiers.rl.batching import MissingTokensError, PackingError
    from verifiers.rl.distributed import init_from_env, shutdown
    from verifiers.rl.inference import start_inference
    from verifiers.rl.loop import LoopSettings, latest_checkpoint, plot, train
    from verifiers.rl.orchestrator import Orchestrator
    from verifiers.weights.access import new_secret
    from verifiers.weights.errors import InferenceServerError

    ctx = init_from_env()  # under torchrun: FSDP2 over all ranks; rank 0 also runs rollouts
    out = Path(config.output_dir)
    problem = run_dir_problem(out, resume)
    if problem:
        console.print(f"vf-rl: {escape(problem)}", soft_wrap=True)
        return 2
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
    policy = AutoModelForCausalLM.from_pretrained(model_dir, dtype="float32").to(device)
    try:
        trainer = make_trainer(config, policy, tokenizer.pad_token_id or 0, ctx)
    except PackingError as exc:
        console.print(f"vf-rl: {escape(str(exc))}", soft_wrap=True)
        return 2
    start_step = 0
    checkpoint = latest_checkpoint(out) if resume else None
    if checkpoint is not None:  # every rank loads its shards (DCP reshards to this world size)
        start_step = trainer.load_checkpoint(checkpoint)["step"]
    if ctx is not None and not ctx.is_main:
        trainer.follow()
        shutdown(exit_code=0)
    if checkpoint is not None:
        truncate_history(out, start_step)  # steps after the checkpoint are trained again
        console.print(f"resuming from {checkpoint} (step {start_step})")
    if config.checkpoint_every:
        kept = f"the newest {config.keep_checkpoints}" if config.keep_checkpoints else "all"
        console.print(
            f"checkpoints every {config.checkpoint_every} steps in {out / 'checkpoints'} ({kept} kept)"
        )
    # The weights dir is a complete model directory (vf-eval -m / vf-serve can load it).
    prepare_weights_dir(model_dir, out / "weights")
    log = out / "logs" / "inference.log"
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
        )
        if checkpoint is not None:
            weights.push(trainer)
        orchestrator = Orchestrator(
            env,
            OpenAICompatibleClient(server.base_url),
            "policy",
            seed=config.seed,
            health=alive,
            config=config.orchestrator,
            advantage=config.trainer.loss.advantage,
        )
        table = Table(title=f"vf-rl · {config.env_id} · {config.model}")
        for col in (
            "step",
            "reward",
            "loss",
            "samples",
            "stale",
            "lag",
            "gen s",
            "train s",
            "step s",
            "tok/s",
        ):
            table.add_column(col, justify="right")
        with Live(table, console=console, refresh_per_second=4):

            def on_step(r: dict[str, Any]) -> None:
                table.add_row(
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

            def on_eval(r: dict[str, Any]) -> None:
                console.print(
                    f"held-out reward after {r['step']} steps: {r['eval_reward']:.3f} "
                    f"± {r['eval_reward_std']:.3f} ({r['eval_rollouts']} rollouts, "
                    f"{r['eval_errors']} errors, {r['eval_s']:.1f} s)"
                )

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
                    eval=eval_settings(config, env),
                ),
                start_step=start_step,
                on_step=on_step,
                on_eval=on_eval,
            )
        if config.inference.weight_transport != "filesystem":  # the trained model, on disk too
            trainer.save_weights(out / "weights")
    except (InferenceServerError, MissingTokensError) as exc:
        console.print(f"[red]vf-rl: {escape(str(exc))}[/red]; training stopped")
        return 1
    finally:
        if weights is not None:
            weights.close()
        trainer.stop_followers()
        server.stop()
        if ctx is not None:
            shutdown()
    picture = plot(out)
    console.print(f"metrics: {out / 'metrics.jsonl'}" + (f"; plot: {picture}" if picture else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
