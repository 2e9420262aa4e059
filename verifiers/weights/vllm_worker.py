"""The vLLM side of weight updates: methods mixed into every vLLM worker.

vLLM loads this with ``--worker-extension-cls verifiers.weights.vllm_worker.WeightUpdateExtension``
and runs its methods in every worker (one per tensor-parallel rank) through
``EngineClient.collective_rpc``; ``verifiers.weights.vllm_routes`` is the HTTP front that calls them.
Tensors are fed to ``model.load_weights`` one at a time, in checkpoint (Hugging Face) names:
vLLM's loader maps them onto its fused/sharded parameters, so each TP rank takes its own slice
of the full tensor. The engine runs no forward pass while a collective RPC is in progress, so no
request sees a half-updated model. Every update is first checked against the served checkpoint's
own manifest (names and shapes from its safetensors headers): weights of another model are
refused before a single tensor is applied.
"""

from __future__ import annotations

from typing import Any


class WeightUpdateExtension:
    # set by vLLM on the worker this class is mixed into
    device: Any
    model_runner: Any
    model_config: Any
    vllm_config: Any

    def verifiers_join_weight_group(
        self,
        host: str,
        store_file: str,
        first_rank: int,
        world_size: int,
        backend: str,
        timeout_s: float,
        tensors: list[dict[str, Any]],
    ) -> int:
        """Join the trainer's weight group as rank ``first_rank`` + this worker's rank."""
        from verifiers.weights.group import WeightGroup
        from verifiers.weights.manifest import TensorSpec

        rank = first_rank + self._verifiers_worker_rank()
        specs = [TensorSpec.model_validate(t) for t in tensors]
        self._verifiers_check(specs)
        self._verifiers_specs = specs
        self._verifiers_group: WeightGroup | None = WeightGroup.join(
            host=host,
            store_file=store_file,
            rank=rank,
            world_size=world_size,
            backend=backend,
            device=self.device,
            timeout_s=timeout_s,
        )
        return rank

    def verifiers_receive_weights(self) -> int:
        """One update: every tensor of the manifest, received and loaded in order."""
        group = getattr(self, "_verifiers_group", None)
        if group is None:
            raise RuntimeError("no weight group on this worker: join one first")
        model = self.model_runner.model
        for spec in self._verifiers_specs:
            tensor = group.broadcast(spec.empty(self.device))
            model.load_weights(weights=[(spec.name, tensor)])
            del tensor
        if self.device.type == "cuda":
            import torch

            torch.cuda.synchronize(self.device)
        return len(self._verifiers_specs)

    def verifiers_load_weights_from_path(self, path: str, trusted: list[str] | None = None) -> int:
        """The filesystem transport: every ``*.safetensors`` file under ``path``, each of which
        must lie under one of the ``trusted`` directories (the server's), links resolved."""
        from pathlib import Path

        from verifiers.weights.files import iter_safetensors
        from verifiers.weights.manifest import safetensors_manifest

        roots = None if trusted is None else [Path(d) for d in trusted]
        self._verifiers_check(safetensors_manifest(path, roots))
        loaded = 0
        model = self.model_runner.model
        for name, tensor in iter_safetensors(path, str(self.device), roots):
            model.load_weights(weights=[(name, tensor)])
            loaded += 1
        return loaded

    def verifiers_close_weight_group(self) -> None:
        group = getattr(self, "_verifiers_group", None)
        if group is not None:
            group.close()
        self._verifiers_group = None

    def verifiers_check_manifest(self, tensors: list[dict[str, Any]]) -> int:
        """Refuse (ValueError) tensors that are not the served model's, before any is applied."""
        from verifiers.weights.manifest import TensorSpec

        specs = [TensorSpec.model_validate(t) for t in tensors]
        self._verifiers_check(specs)
        return len(specs)

    def _verifiers_check(self, specs: list[Any]) -> None:
        from verifiers.weights.manifest import check_fits, safetensors_manifest

        served = {
            spec.name: spec.shape for spec in safetensors_manifest(self._verifiers_model_dir())
        }
        if not served:
            raise ValueError(
                f"the served model at {self._verifiers_model_dir()} has no safetensors weights to "
                "check updates against"
            )
        check_fits(specs, served)

    def _verifiers_model_dir(self) -> str:
        """The checkpoint directory vLLM loaded (``--model``)."""
        config = getattr(self, "model_config", None) or self.vllm_config.model_config
        return str(config.model)

    def _verifiers_worker_rank(self) -> int:
        from vllm.distributed.parallel_state import get_world_group

        return get_world_group().rank
