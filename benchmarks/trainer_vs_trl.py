"""vf-rl against TRL's GRPOTrainer: the same model, prompts and batch, in one invocation.

    pip install "trl==1.16.0"     # optional benchmark dependency (pip install -e ".[bench]")
    python benchmarks/trainer_vs_trl.py [--steps 6] [--model SmolLM2-135M-Instruct]

Each side trains ``--steps`` GRPO steps of ``--prompts`` prompts × ``--completions`` completions
(at most ``--max-tokens`` new tokens, temperature 1, lr 1e-6, no KL) on the uppercase task's rows,
in a subprocess of its own (the machine's cores are not shared): TRL 1.16 ``GRPOTrainer``
(generation with transformers, loss_type "grpo", gradient checkpointing off as in vf-rl: TRL's
default, on, would make it slower), then ``vf-rl`` synchronous
(``max_off_policy_steps = 0``) and asynchronous (``= 1``). The first step of each is warm-up and
not counted. Prints seconds per step and trained tokens per second (prompt + completion tokens of
every trained sequence, as TRL counts ``num_input_tokens_seen``) and the CPU seconds of each
side's whole process tree (start and model load included: a loaded machine slows wall time, not
work). Targets (issue 44): synchronous vf-rl at least 1.5× TRL's tokens/s, asynchronous at least 2×.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import stop_cleanly  # beside this script

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

TRL_SCRIPT = r"""
import json, sys, time
from pathlib import Path
from datasets import Dataset
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer
from difflib import SequenceMatcher

args = json.loads(sys.argv[1])
rows = json.loads(Path(args["rows"]).read_text())
dataset = Dataset.from_list(
    [{"prompt": [{"role": "system", "content": r["system"]}, {"role": "user", "content": r["question"]}],
      "answer": r["answer"]} for r in rows]
)

def similarity(completions, answer, **kwargs):
    return [SequenceMatcher(None, c[-1]["content"].strip(), a, autojunk=False).ratio()
            for c, a in zip(completions, answer)]

class Clock(TrainerCallback):
    def __init__(self):
        self.steps = []
        self.start = None
    def on_step_begin(self, a, state, control, **kw):
        self.start = time.perf_counter()
    def on_step_end(self, a, state, control, **kw):
        self.steps.append({"step_s": time.perf_counter() - self.start})
    def on_log(self, a, state, control, logs=None, **kw):
        if logs and "num_tokens" in logs and self.steps:
            self.steps[-1]["num_tokens"] = logs["num_tokens"]

clock = Clock()
config = GRPOConfig(
    output_dir=args["out"], max_steps=args["steps"], learning_rate=args["lr"],
    per_device_train_batch_size=args["prompts"] * args["completions"],
    num_generations=args["completions"], gradient_accumulation_steps=1,
    max_completion_length=args["max_tokens"], temperature=1.0, beta=0.0, loss_type="grpo",
    use_cpu=True, bf16=False, logging_steps=1, report_to=[], save_strategy="no",
    gradient_checkpointing=False,  # TRL's default is on; vf-rl's is off: compare like with like
    seed=0, dataloader_num_workers=0,
)
trainer = GRPOTrainer(model=args["model"], reward_funcs=[similarity], args=config,
                      train_dataset=dataset, callbacks=[clock])
trainer.train()
previous = 0
for record in clock.steps:
    total = record.get("num_tokens", previous)
    record["tokens"] = total - previous
    previous = total
Path(args["result"]).write_text(json.dumps(clock.steps))
"""


def rows_file(work: Path, n: int) -> Path:
    import verifiers as vf

    env = vf.load_environment("uppercase")
    rows = [
        {"system": env.system_prompt, "question": r["question"], "answer": r["answer"]}
        for r in env.dataset_rows("train", n=n)
    ]
    path = work / "rows.json"
    path.write_text(json.dumps(rows))
    return path


def children_cpu_s() -> float:
    """CPU seconds of every finished child process tree of this one (user + system)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_trl(args, model_dir: Path, work: Path) -> list[dict]:
    result = work / "trl.json"
    spec = {
        "model": str(model_dir),
        "rows": str(rows_file(work, args.prompts * args.steps)),
        "out": str(work / "trl-out"),
        "result": str(result),
        "steps": args.steps,
        "lr": 1e-6,
        "prompts": args.prompts,
        "completions": args.completions,
        "max_tokens": args.max_tokens,
    }
    subprocess.run([sys.executable, "-c", TRL_SCRIPT, json.dumps(spec)], check=True)
    return json.loads(result.read_text())


def run_vf_rl(args, model_dir: Path, work: Path, lag: int) -> list[dict]:
    out = work / f"vf-rl-{lag}"
    config = work / f"vf-rl-{lag}.toml"
    config.write_text(
        f'model = "{model_dir}"\nenv_id = "uppercase"\noutput_dir = "{out}"\n'
        f"steps = {args.steps}\nmax_off_policy_steps = {lag}\n"
        f"[orchestrator]\nexamples_per_step = {args.prompts}\n"
        f"rollouts_per_example = {args.completions}\nmax_tokens = {args.max_tokens}\n"
        "temperature = 1.0\nfilter_zero_advantage = false\n"  # TRL trains every group
        '[trainer]\nlr = 1e-6\nloss = "grpo"\n'
    )
    subprocess.run(
        [sys.executable, "-m", "verifiers.cli.rl", "@", str(config)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def summarize(steps: list[dict]) -> tuple[float, float]:
    counted = steps[1:] or steps  # the first step is warm-up
    seconds = statistics.fmean(s["step_s"] for s in counted)
    tokens = sum(s["tokens"] for s in counted) / sum(s["step_s"] for s in counted)
    return seconds, tokens


def main() -> None:
    stop_cleanly.install()
    from rich.console import Console
    from rich.table import Table

    from verifiers.local_model.models import DEFAULT_MODEL, resolve_model_dir

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--completions", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=48)
    args = parser.parse_args()
    model_dir, _ = resolve_model_dir(args.model)
    console = Console()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name, run in (
            ("TRL GRPOTrainer", lambda: run_trl(args, model_dir, work)),
            ("vf-rl sync", lambda: run_vf_rl(args, model_dir, work, 0)),
            ("vf-rl async (1 step)", lambda: run_vf_rl(args, model_dir, work, 1)),
        ):
            console.print(f"[bold]{name}[/bold]: {args.steps} steps …")
            start, cpu = time.perf_counter(), children_cpu_s()
            results[name] = (*summarize(run()), children_cpu_s() - cpu)
            console.print(f"  done in {time.perf_counter() - start:.0f} s")
    trl_tokens = results["TRL GRPOTrainer"][1]
    table = Table(
        title=(
            f"GRPO on CPU · {args.model} · {args.prompts} prompts × {args.completions} "
            f"completions · ≤{args.max_tokens} tokens · steps 2-{args.steps}"
        )
    )
    columns = ("trainer", "s / step", "trained tokens / s", "× TRL", "target", "CPU s (run)")
    for column in columns:
        table.add_column(column, justify="right")
    targets = {"TRL GRPOTrainer": "", "vf-rl sync": "≥ 1.5×", "vf-rl async (1 step)": "≥ 2×"}
    for name, (seconds, tokens, cpu) in results.items():
        table.add_row(
            name,
            f"{seconds:.1f}",
            f"{tokens:,.0f}",
            f"{tokens / trl_tokens:.2f}×",
            targets[name],
            f"{cpu:.0f}",
        )
    console.print(table)


if __name__ == "__main__":
    main()
