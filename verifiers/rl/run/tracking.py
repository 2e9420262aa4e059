"""Metrics to TensorBoard and Weights & Biases besides metrics.jsonl (``report_to``).

W&B runs offline unless ``WANDB_MODE`` says otherwise: the run is written under
``output_dir/wandb`` and ``wandb sync`` uploads it later, so no network is needed to train.
TensorBoard event files go to ``output_dir/tensorboard``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, cast

from verifiers.errors import VFError


class TrackerMissingError(VFError, RuntimeError):
    """A tracker named in ``report_to`` is not installed."""


class Trackers:
    def __init__(self, names: list[str], out: Path, name: str, config: dict[str, Any]) -> None:
        self.tensorboard: Any = None
        self.wandb: Any = None
        if "tensorboard" in names:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as exc:
                raise TrackerMissingError(
                    "report_to = ['tensorboard'] needs the tensorboard package: pip install "
                    "tensorboard (or drop it from report_to)"
                ) from exc
            self.tensorboard = SummaryWriter(log_dir=str(out / "tensorboard"))
        if "wandb" in names:
            try:
                import wandb
            except ImportError as exc:
                raise TrackerMissingError(
                    "report_to = ['wandb'] needs the wandb package: pip install wandb (or drop "
                    "it from report_to)"
                ) from exc
            self.wandb = wandb.init(
                project=os.environ.get("WANDB_PROJECT", "verifiers"),
                name=name,
                dir=str(out),
                config=config,
                # any name wandb takes (it checks, and knows aliases such as "dryrun")
                mode=cast(Any, os.environ.get("WANDB_MODE", "offline")),
                reinit="finish_previous",
            )
            # held-out evals finish out of step with training: each prefix has its own x-axis
            for prefix in ("train", "eval"):
                self.wandb.define_metric(f"{prefix}/step")
                self.wandb.define_metric(f"{prefix}/*", step_metric=f"{prefix}/step")

    def log(self, record: dict[str, Any], step: int, prefix: str = "train") -> None:
        numbers = {
            f"{prefix}/{k}": float(v)
            for k, v in record.items()
            if isinstance(v, int | float) and not isinstance(v, bool) and k != "step"
        }
        if self.tensorboard is not None:
            for key, value in numbers.items():
                self.tensorboard.add_scalar(key, value, step)
        if self.wandb is not None:
            self.wandb.log({**numbers, f"{prefix}/step": step})

    def close(self) -> None:
        if self.tensorboard is not None:
            self.tensorboard.close()
        if self.wandb is not None:
            self.wandb.finish()


def start_trackers(prog: str, config: Any, trainer: Any, console: Any) -> Trackers | None:
    """The run's trackers, or None after saying which one is missing (the followers stopped)."""
    from rich.markup import escape

    out = Path(config.output_dir)
    try:
        return Trackers(config.report_to, out, out.name, config.model_dump(mode="json"))
    except TrackerMissingError as exc:
        console.print(f"{prog}: {escape(str(exc))}", soft_wrap=True)
        trainer.stop_followers()
        return None
