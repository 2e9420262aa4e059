"""Weights on disk: the one safetensors reader, and LoRA adapters in peft's layout.

A weights directory is either a model's ``*.safetensors`` (one file or shards) or a peft adapter
(``adapter_config.json`` + ``adapter_model.safetensors``). vf-serve loads both through
:class:`verifiers.weights.served.WeightFiles`: an adapter is merged into the base the server started with, W = W₀ +
(α/r)·B·A (α/√r with rsLoRA), so the trainer pushes only the adapters. The trainer's merged
export uses the same :func:`merged_weights`.

A server reads with ``trusted`` roots: every file it opens must lie under one
(:func:`verifiers.weights.access.opened`), and one that is not usable weights is a
:class:`WeightsFileError`, never a crash.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from verifiers.errors import VFError
from verifiers.weights.access import opened

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
PEFT_PREFIX = "base_model.model."


class WeightsFileError(VFError, ValueError):
    """A weights file that cannot be used as such (not safetensors, a broken adapter config,
    tensors the served model does not have): the request that named it is wrong."""


def safetensors_files(path: str | Path) -> list[Path]:
    """The ``*.safetensors`` files at ``path`` (a directory or one file), in name order."""
    path = Path(path)
    files = sorted(path.glob("*.safetensors")) if path.is_dir() else [path]
    if not files or not all(f.is_file() for f in files):
        raise FileNotFoundError(f"no safetensors weights at {path}")
    return files


def iter_safetensors(
    path: str | Path, device: str = "cpu", trusted: Sequence[Path] | None = None
) -> Iterator[tuple[str, Any]]:
    """``(name, tensor)`` for every tensor of the safetensors files at ``path``, one at a time
    (a server applying them holds one tensor more than its model, not a second model)."""
    for file in safetensors_files(path):
        with safetensors_file(file, trusted, device) as handle:
            for name in handle.keys():
                yield name, handle.get_tensor(name)


@contextmanager
def safetensors_file(
    file: Path, trusted: Sequence[Path] | None = None, device: str = "cpu"
) -> Iterator[Any]:
    """``safe_open`` of one file, opened within ``trusted``; a file that is not safetensors is
    a :class:`WeightsFileError`."""
    from safetensors import SafetensorError, safe_open

    with opened(file, trusted) as name:
        try:
            handle = safe_open(name, framework="pt", device=str(device))
        except SafetensorError as exc:
            raise WeightsFileError(f"{file} is not a safetensors file ({exc})") from exc
        with handle:
            yield handle


def read_safetensors(
    path: str | Path, device: str = "cpu", trusted: Sequence[Path] | None = None
) -> dict[str, Any]:
    """Every tensor of the safetensors files at ``path``."""
    return dict(iter_safetensors(path, device, trusted))


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
