"""The trained model as every tool expects it: ``save_pretrained``'s layout in bf16.

``weights/`` ends a run as config.json (dtype bfloat16), the tokenizer and chat template,
``model.safetensors`` or, above ``max_shard_size``, ``model-0000i-of-0000n.safetensors`` shards
with ``model.safetensors.index.json`` (written by huggingface_hub, as transformers writes them),
and a model card (README.md) naming the environment, its version and content hash, and the run.
While training, the same directory holds what the inference server reloads each step.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

INDEX = "model.safetensors.index.json"


def export_model(state: dict[str, Any], directory: Path, max_shard_size: str = "2GB") -> list[str]:
    """Write ``state`` as bf16 safetensors shards into ``directory`` (which already holds the
    config and tokenizer, see ``prepare_weights_dir``), replacing any weights there; the files
    written."""
    import torch
    from huggingface_hub import save_torch_state_dict

    for old in [*directory.glob("*.safetensors"), directory / INDEX]:
        old.unlink(missing_ok=True)
    bf16 = {
        k: (v.to(torch.bfloat16) if v.is_floating_point() else v).contiguous().cpu()
        for k, v in state.items()
    }
    save_torch_state_dict(bf16, directory, max_shard_size=max_shard_size)
    config_path = directory / "config.json"
    if config_path.exists():
        config = json.loads(config_path.read_text())
        config["dtype"] = "bfloat16"
        config.pop("torch_dtype", None)
        config_path.write_text(json.dumps(config, indent=2) + "\n")
    return sorted(p.name for p in directory.glob("model*.safetensors*"))


def model_card(
    *,
    base_model: str,
    env: Any,
    run: dict[str, Any],
    evals: list[dict[str, Any]],
) -> str:
    """README.md for the exported weights: what was trained, on what, and how well."""
    import verifiers

    env_id = getattr(env, "env_id", None) or "unknown"
    version = getattr(env, "env_version", None) or "unversioned (not installed as a package)"
    digest = getattr(env, "env_content_hash", None) or "n/a"
    lines = [
        "---",
        "library_name: transformers",
        f"base_model: {base_model}",
        "tags: [verifiers, reinforcement-learning]",
        "---",
        "",
        f"# {Path(str(run.get('output_dir', 'run'))).name}",
        "",
        f"Trained by `{run['command']}` (verifiers {verifiers.__version__}) from `{base_model}` on the "
        f"environment `{env_id}` {version} (content hash `{digest}`).",
        "",
        "| setting | value |",
        "|---|---|",
    ]
    for key, value in run.items():
        if key != "command":
            lines.append(f"| {key} | {value} |")
    if evals:
        first, last = evals[0], evals[-1]
        lines += [
            "",
            f"Held-out reward: {first['eval_reward']:.3f} at step {first['step']} → "
            f"{last['eval_reward']:.3f} at step {last['step']} "
            f"({last.get('eval_rollouts', '?')} rollouts, fixed seeds).",
        ]
    lines += [
        "",
        "Load it with `transformers.AutoModelForCausalLM.from_pretrained(DIR)`, serve it with "
        "`vf-serve DIR`, or evaluate it with `vf-eval ENV -m DIR`.",
        "",
    ]
    return "\n".join(lines)
