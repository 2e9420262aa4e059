"""What a weight update holds, as names, dtypes and shapes (a manifest), and the check that it
fits the served model before a single tensor is applied: shared by the file transport (vf-serve
reading a directory), the process-group transport (both sides agree on the order of broadcasts)
and vLLM's workers."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from pydantic import BaseModel

from verifiers.weights.files import WeightsFileError, safetensors_file, safetensors_files


class TensorSpec(BaseModel):
    name: str
    dtype: str  # "float32", "bfloat16", ...
    shape: list[int]

    def empty(self, device: torch.device | str) -> torch.Tensor:
        return torch.empty(self.shape, dtype=getattr(torch, self.dtype), device=device)


def manifest(state: dict[str, torch.Tensor]) -> list[TensorSpec]:
    return [
        TensorSpec(name=name, dtype=str(t.dtype).removeprefix("torch."), shape=list(t.shape))
        for name, t in state.items()
    ]


def check_manifest(specs: list[TensorSpec], model_state: dict[str, Any]) -> list[str]:
    """Problems that would make an update load wrong or partial weights (empty: fine).

    ``model_state`` maps the served model's checkpoint names to tensors or to shapes."""
    problems = []
    for spec in specs:
        target = model_state.get(spec.name)
        shape = None if target is None else list(getattr(target, "shape", target))
        if target is None:
            problems.append(f"{spec.name}: not a weight of the served model")
        elif shape != spec.shape:
            problems.append(f"{spec.name}: shape {spec.shape}, served model has {shape}")
        elif not hasattr(torch, spec.dtype) or not isinstance(
            getattr(torch, spec.dtype), torch.dtype
        ):
            problems.append(f"{spec.name}: unknown dtype {spec.dtype!r}")
    return problems


def check_fits(specs: list[TensorSpec], model_state: dict[str, Any]) -> None:
    """Refuse (``WeightsFileError``, a ValueError) an update ``check_manifest`` finds problems
    with, naming the first few: before a single tensor of it is applied."""
    problems = check_manifest(specs, model_state)
    if problems:
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise WeightsFileError(
            "the weights do not fit the served model: " + "; ".join(problems[:5]) + more
        )


def safetensors_manifest(path: Any, trusted: Sequence[Path] | None = None) -> list[TensorSpec]:
    """Names, dtypes and shapes of every tensor in the ``*.safetensors`` files at ``path`` (a
    file or a directory, each file opened within ``trusted``), read from their headers: nothing
    is loaded."""
    specs = []
    for file in safetensors_files(path):
        with safetensors_file(file, trusted) as handle:
            for name in handle.keys():
                piece = handle.get_slice(name)
                dtype = _SAFETENSORS_DTYPES.get(piece.get_dtype(), piece.get_dtype().lower())
                specs.append(TensorSpec(name=name, dtype=dtype, shape=list(piece.get_shape())))
    return specs


_SAFETENSORS_DTYPES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16", "F64": "float64"}
