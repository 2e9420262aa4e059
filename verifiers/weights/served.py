"""What vf-serve loads from a weights directory (:class:`WeightFiles`): full weights as they
are, or an adapter merged into the base the server started with, each checked against the served
model's manifest before it is applied."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from verifiers.weights.access import opened
from verifiers.weights.files import (
    ADAPTER_CONFIG,
    ADAPTER_WEIGHTS,
    PEFT_PREFIX,
    WeightsFileError,
    adapter_scaling,
    is_adapter,
    merged_weights,
    read_safetensors,
)
from verifiers.weights.manifest import check_fits, manifest


class WeightFiles:
    """What vf-serve loads from a weights directory: full weights as they are, an adapter
    merged into the weights the served model had before its first adapter (kept once). Every
    file is read within ``trusted``, and what is read must fit the served model."""

    def __init__(self, model: Any, trusted: Sequence[Path] | None = None) -> None:
        self.model = model
        self.trusted = trusted
        self.base: dict[str, Any] = {}  # original weights of the modules adapters touched

    def read(self, path: str | Path, dtype: Any) -> dict[str, Any]:
        served = self.model.state_dict()
        if not is_adapter(path):
            state = {
                k: v.to(dtype) for k, v in read_safetensors(path, trusted=self.trusted).items()
            }
            check_fits(manifest(state), served)
            return state
        config, adapter = self._adapter(Path(path))
        try:
            scaling = adapter_scaling(config)
        except (KeyError, ValueError, TypeError, ZeroDivisionError) as exc:
            raise WeightsFileError(
                f"{Path(path) / ADAPTER_CONFIG} needs numbers r (not 0) and lora_alpha ({exc!r})"
            ) from exc
        for key in adapter:
            name = f"{key.removeprefix(PEFT_PREFIX).rsplit('.lora_', 1)[0]}.weight"
            if name not in self.base and name in served:
                self.base[name] = served[name].detach().clone()
        try:
            merged = merged_weights(self.base, adapter, scaling)
        except (KeyError, RuntimeError) as exc:  # a lora_B missing, shapes that do not multiply
            raise WeightsFileError(
                f"the adapter at {path} does not fit the served model: {exc}"
            ) from exc
        check_fits(manifest(merged), served)
        return merged

    def _adapter(self, path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
        with opened(path / ADAPTER_CONFIG, self.trusted) as name:
            try:
                config = json.loads(Path(name).read_bytes())
            except (ValueError, UnicodeDecodeError) as exc:
                raise WeightsFileError(f"{path / ADAPTER_CONFIG} is not JSON ({exc})") from exc
        if not isinstance(config, dict):
            raise WeightsFileError(f"{path / ADAPTER_CONFIG} is not a JSON object")
        return config, read_safetensors(path / ADAPTER_WEIGHTS, trusted=self.trusted)
