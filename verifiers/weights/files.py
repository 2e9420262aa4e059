"""Weights on disk: the one safetensors reader, and LoRA adapters in peft's layout.

A weights directory is either a model's ``*.safetensors`` (one file or shards) or a peft adapter
(``adapter_config.json`` + ``adapter_model.safetensors``). vf-serve loads both through
:class:`WeightFiles`: an adapter is merged into the base the server started with, W = W₀ +
(α/r)·B·A (α/√r with rsLoRA), so the trainer pushes only the adapters. The trainer's merged
export uses the same :func:`merged_weights`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
PEFT_PREFIX = "base_model.model."


def safetensors_files(path: str | Path) -> list[Path]:
    """The ``*.safetensors`` files at ``path`` (a directory or one file), in name order."""
    path = Path(path)
    files = sorted(path.glob("*.safetensors")) if path.is_dir() else [path]
    if not files or not all(f.is_file() for f in files):
        raise FileNotFoundError(f"no safetensors weights at {path}")
    return files


def iter_safetensors(path: str | Path, device: str = "cpu") -> Iterator[tuple[str, Any]]:
    """``(name, tensor)`` for every tensor of the safetensors files at ``path``, one at a time
    (a server applying them holds one tensor more than its model, not a second model)."""
    from safetensors import safe_open

    for file in safetensors_files(path):
        with safe_open(str(file), framework="pt", device=str(device)) as handle:
            for name in handle.keys():
                yield name, handle.get_tensor(name)


def read_safetensors(path: str | Path, device: str = "cpu") -> dict[str, Any]:
    """Every tensor of the safetensors files at ``path``."""
    return dict(iter_safetensors(path, device))


def is_adapter(path: str | Path) -> bool:
    return (Path(path) / ADAPTER_CONFIG).is_file()


def adapter_scaling(config: Mapping[str, Any]) -> float:
    """peft's scaling of B·A: lora_alpha / r, or / √r with rsLoRA."""
    rank, alpha = int(config["r"]), float(config["lora_alpha"])
    return alpha / math.sqrt(rank) if config.get("use_rslora") else alpha / rank


def merged_weights(
    base: Mapping[str, Any], adapter: Mapping[str, Any], scaling: float
) -> dict[str, Any]:
    """The weights an adapter changes, merged: ``{name: W₀ + scaling·B·A}`` in W₀'s dtype, for
    each ``…lora_A.weight`` / ``…lora_B.weight`` pair (peft's names; W₀ by the plain model's)."""
    merged = {}
    for key, down in adapter.items():
        if not key.endswith(".lora_A.weight"):
            continue
        module = key.removesuffix(".lora_A.weight")
        up = adapter[f"{module}.lora_B.weight"]
        name = f"{module.removeprefix(PEFT_PREFIX)}.weight"
        if name not in base:
            raise KeyError(f"the adapter changes {name}, which the base model does not have")
        w0 = base[name]
        delta = up.to(w0.device).float() @ down.to(w0.device).float()
        merged[name] = (w0.float() + scaling * delta).to(w0.dtype)
    return merged


class WeightFiles:
    """What vf-serve loads from a weights directory: full weights as they are, an adapter
    merged into the weights the served model had before its first adapter (kept once)."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.base: dict[str, Any] = {}  # original weights of the modules adapters touched

    def read(self, path: str | Path, dtype: Any) -> dict[str, Any]:
        if not is_adapter(path):
            return {k: v.to(dtype) for k, v in read_safetensors(path).items()}
        config = json.loads((Path(path) / ADAPTER_CONFIG).read_text())
        adapter = read_safetensors(Path(path) / ADAPTER_WEIGHTS)
        served = self.model.state_dict()
        for key in adapter:
            name = f"{key.removeprefix(PEFT_PREFIX).rsplit('.lora_', 1)[0]}.weight"
            if name not in self.base and name in served:
                self.base[name] = served[name].detach().clone()
        return merged_weights(self.base, adapter, adapter_scaling(config))
