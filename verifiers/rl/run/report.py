"""A vf-rl run as one self-contained HTML page: what the trainer learned from, step by step.

``vf-report RUN_DIR`` on a vf-rl output directory (config.json + metrics.jsonl) writes
``RUN_DIR/training_report.html``: reward and held-out reward curves and the diagnostics beside
them (inline SVG, no script or network needed to read it), the per-step table, and for the groups
``samples.jsonl`` recorded (``orchestrator.report_groups`` per step) every sample's tokens,
coloured by advantage where they were trained and grey where masked (prompt, environment and
tool tokens), each with its inference and trainer logprob, and the group's rewards — enough to
see a reward hack in the tokens that earned it. Model text is escaped, never run.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape

from verifiers.rl.run.records import read_jsonl

REPORT_NAME = "training_report.html"
CHARTS = (
    ("reward", ("reward",), "eval_reward"),
    ("loss", ("loss",), None),
    ("entropy (nat/token)", ("entropy",), None),
    ("KL (k3 per token)", ("mismatch_kl", "ref_kl"), None),
    ("clipped / masked fraction", ("clip_fraction", "is_masked_fraction"), None),
    ("completion tokens", ("completion_tokens",), None),
)
COLUMNS = (
    "step",
    "reward",
    "loss",
    "entropy",
    "clip_fraction",
    "is_masked_fraction",
    "mismatch_kl",
    "grad_norm",
    "lr",
    "completion_tokens",
    "groups_trained",
    "samples",
    "step_s",
)


def is_training_run(path: str | Path) -> bool:
    path = Path(path)
    return (path / "metrics.jsonl").is_file() and (path / "config.json").is_file()


def line_chart(
    title: str, series: list[tuple[str, list[tuple[float, float]]]], width=420, height=180
) -> dict[str, Any]:
    """One chart as SVG primitives: polylines scaled into the box, with axis labels."""
    points = [p for _, pts in series for p in pts if math.isfinite(p[1])]
    if not points:
        return {"title": title, "empty": True}
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x0, x1 = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
    y0, y1 = min(ys), max(ys)
    if y1 - y0 < 1e-12:
        y0, y1 = y0 - 0.5, y1 + 0.5
    pad = 36

    def scale(x: float, y: float) -> str:
        px = pad + (x - x0) / (x1 - x0) * (width - 2 * pad)
        py = height - pad - (y - y0) / (y1 - y0) * (height - 2 * pad)
        return f"{px:.1f},{py:.1f}"

    lines = [
        {
            "label": label,
            "points": " ".join(scale(x, y) for x, y in pts if math.isfinite(y)),
            "dots": [scale(x, y).split(",") for x, y in pts if math.isfinite(y)],
        }
        for label, pts in series
        if pts
    ]
    return {
        "title": title,
        "empty": False,
        "width": width,
        "height": height,
        "pad": pad,
        "lines": lines,
        "y_range": (f"{y0:.3g}", f"{y1:.3g}"),
        "x_range": (f"{x0:g}", f"{x1:g}"),
    }


def charts(history: list[dict[str, Any]], evals: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for title, keys, eval_key in CHARTS:
        series = [
            (key.replace("_", " "), [(h["step"], float(h[key])) for h in history if key in h])
            for key in keys
        ]
        if eval_key and evals:
            series.append(("held-out", [(e["step"], float(e[eval_key])) for e in evals]))
        out.append(line_chart(title, series))
    return out


def token_cells(sample: dict[str, Any]) -> list[dict[str, Any]]:
    """Each token with its display class (trained: the advantage's sign; masked: context) and
    its logprobs, for the coloured view and its tooltips."""
    ids = sample["token_ids"]
    texts = sample.get("tokens") or [str(i) for i in ids]
    trainer = sample.get("trainer_logprobs") or [None] * len(ids)
    advantage = float(sample["advantage"])
    strength = min(1.0, abs(advantage) / 2)
    cells = []
    for text, mask, inference, own in zip(
        texts, sample["loss_mask"], sample["inference_logprobs"], trainer, strict=False
    ):
        trained = bool(mask)
        tip = "context (not trained)"
        if trained:
            tip = f"A {advantage:+.3f} · inference logprob {inference:.3f}"
            if own is not None:
                tip += f" · trainer {own:.3f} · ratio {math.exp(own - inference):.3f}"
        cells.append(
            {
                "text": text,
                "kind": ("pos" if advantage > 0 else "neg" if advantage < 0 else "zero")
                if trained
                else "ctx",
                "alpha": f"{0.15 + 0.6 * strength:.2f}" if trained else "0",
                "tip": tip,
            }
        )
    return cells


def logprob_pairs(sample: dict[str, Any]) -> dict[str, Any]:
    """Inference vs trainer logprobs of a sample's trained tokens: the mismatch, summarised."""
    trainer = sample.get("trainer_logprobs")
    if not trainer:
        return {"n": 0}
    pairs = [
        (inf, own)
        for inf, own, m in zip(
            sample["inference_logprobs"], trainer, sample["loss_mask"], strict=False
        )
        if m
    ]
    if not pairs:
        return {"n": 0}
    diffs = [abs(own - inf) for inf, own in pairs]
    return {
        "n": len(pairs),
        "mean_inference": sum(p[0] for p in pairs) / len(pairs),
        "mean_trainer": sum(p[1] for p in pairs) / len(pairs),
        "mean_abs_diff": sum(diffs) / len(diffs),
        "max_abs_diff": max(diffs),
    }


def groups_view(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    view = []
    for record in records:
        samples = []
        for index, sample in enumerate(record["samples"]):
            samples.append(
                {
                    "index": index,
                    "reward": sample["reward"],
                    "advantage": sample["advantage"],
                    "trained_tokens": sum(sample["loss_mask"]),
                    "cells": token_cells(sample),
                    "logprobs": logprob_pairs(sample),
                }
            )
        view.append(
            {
                "step": record["step"],
                "example_id": record.get("example_id"),
                "group_rewards": record.get("group_rewards", []),
                "samples": samples,
            }
        )
    return view


def render(run_dir: str | Path) -> str:
    run = Path(run_dir)
    config = json.loads((run / "config.json").read_text())
    history = read_jsonl(run / "metrics.jsonl")
    evals = read_jsonl(run / "eval.jsonl")
    groups = groups_view(read_jsonl(run / "samples.jsonl"))
    loss = (config.get("trainer") or {}).get("loss") or {}
    env = Environment(
        loader=PackageLoader("verifiers.rl.run", "templates"),
        autoescape=select_autoescape(default=True),
    )
    env.filters["cell"] = format_cell
    template = env.get_template("training_report.html.j2")
    return template.render(
        run=run.name,
        config=config,
        config_json=json.dumps(config, indent=2),
        loss=loss.get("name", "?"),
        history=history,
        columns=[c for c in COLUMNS if any(c in h for h in history)],
        evals=evals,
        charts=charts(history, evals),
        groups=groups,
        steps_with_groups=sorted({g["step"] for g in groups}),
    )


def write_training_report(run_dir: str | Path, out: str | Path | None = None) -> Path:
    from verifiers.processes.own_dir import write_own_file

    target = Path(out) if out else Path(run_dir) / REPORT_NAME
    write_own_file(target, render(run_dir))
    return target


def format_cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
