"""Weight transports: how a new policy gets from the trainer into the inference server.

Both speak to the server's HTTP API (vf-serve, or vLLM with ``verifiers.weights.vllm_routes``):

- ``FilesystemTransport``: safetensors written atomically to a directory, then
  ``POST /v1/weights/load``. Works everywhere, including a trainer and server on one GPU; a LoRA
  trainer writes only its adapter (peft's layout), which vf-serve merges into its base.
- ``BroadcastTransport``: a process group between trainer (rank 0) and server, set up once
  (``/v1/weights/broadcast/init``), then each update is ``/v1/weights/broadcast/update`` with the
  tensors broadcast alongside: no disk, no serialization. NCCL between GPUs, gloo on CPU.

``push`` returns the policy version the server now serves.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import httpx

from verifiers.weights.access import HEADER as WEIGHTS_HEADER
from verifiers.weights.errors import InferenceServerError


class WeightTransport(Protocol):
    def push(self, trainer: Any) -> int: ...

    def check(self) -> None: ...

    def close(self) -> None: ...


class _ServerLink:
    def __init__(
        self,
        base_url: str,
        server_alive: Callable[[], str | None] | None,
        secret: str | None = None,
        api_key: str | None = None,
    ) -> None:
        self.url = base_url.rstrip("/")
        self.server_alive = server_alive
        self.headers = {WEIGHTS_HEADER: secret} if secret else {}
        if api_key:  # a server with a key (vf-rl's own) answers no request without it
            self.headers["Authorization"] = f"Bearer {api_key}"

    def check(self) -> None:
        problem = self.server_alive() if self.server_alive else None
        if problem:
            raise InferenceServerError(problem)

    def post(self, path: str, body: dict[str, Any] | None, timeout: float, ok: int = 200) -> dict:
        """POST (GET without a body); a dead server or an unexpected status is an
        InferenceServerError that says which."""
        try:
            if body is None:
                resp = httpx.get(f"{self.url}{path}", timeout=timeout, headers=self.headers)
            else:
                resp = httpx.post(
                    f"{self.url}{path}", json=body, timeout=timeout, headers=self.headers
                )
        except httpx.HTTPError as exc:
            self.check()
            raise InferenceServerError(
                f"the inference server did not take the request to {path}: {exc}"
            ) from exc
        if resp.status_code != ok:
            raise InferenceServerError(
                f"the inference server refused {path} ({resp.status_code}): {resp.text[:500]}"
            )
        return resp.json()

    def close(self) -> None:
        return None


class FilesystemTransport(_ServerLink):
    def __init__(
        self,
        base_url: str,
        directory: Path,
        server_alive: Callable[[], str | None] | None = None,
        *,
        secret: str | None = None,
        api_key: str | None = None,
    ) -> None:
        super().__init__(base_url, server_alive, secret, api_key)
        self.directory = directory

    def push(self, trainer: Any) -> int:
        self.check()
        # what to load: the trainer says (its adapter/ under LoRA), else the directory itself
        path = trainer.save_weights(self.directory) or self.directory
        body = {"path": str(path), "policy_version": trainer.version}
        return int(self.post("/weights/load", body, timeout=300)["policy_version"])


class BroadcastTransport(_ServerLink):
    """The group is made on the first push (the manifest comes from the first exported state)."""

    def __init__(
        self,
        base_url: str,
        server_alive: Callable[[], str | None] | None = None,
        *,
        backend: str = "gloo",
        device: str = "cpu",
        host: str = "127.0.0.1",
        timeout_s: float = 300,
        secret: str | None = None,
        api_key: str | None = None,
    ) -> None:
        super().__init__(base_url, server_alive, secret, api_key)
        self.backend, self.device, self.host, self.timeout_s = backend, device, host, timeout_s
        self.group: Any = None
        self.store_file: Path | None = None  # where the group meets (a private directory)
        self.specs: list[Any] = []

    def push(self, trainer: Any) -> int:
        self.check()
        state = trainer.export_state()
        if self.group is None:
            self._connect(state)
        reply: dict[str, Any] = {}

        def request() -> None:
            try:
                reply["body"] = self.post(
                    "/weights/broadcast/update",
                    {"policy_version": trainer.version},
                    timeout=self.timeout_s,
                )
            except InferenceServerError as exc:
                reply["error"] = exc

        thread = threading.Thread(target=request, name="weight-update", daemon=True)
        thread.start()
        try:
            self.group.send(state, self.specs)
        except Exception as exc:  # the peer died or timed out mid-update: the group is unusable
            self.close()
            thread.join(timeout=5)
            self.check()
            raise InferenceServerError(
                f"broadcasting weights to the inference server failed: {reply.get('error') or exc}"
            ) from exc
        thread.join()
        if "error" in reply:
            self.close()
            raise reply["error"]
        return int(reply["body"]["policy_version"])

    def _connect(self, state: dict[str, Any]) -> None:
        from verifiers.weights.group import WeightGroup
        from verifiers.weights.manifest import manifest

        self.specs = manifest(state)
        world_size = 1 + self._inference_ranks()
        store, self.store_file = WeightGroup.private_store(world_size, self.timeout_s)
        body = {
            "host": self.host,
            "store_file": str(self.store_file),
            "rank": 1,
            "world_size": world_size,
            "backend": self.backend,
            "timeout_s": self.timeout_s,
            "tensors": [s.model_dump() for s in self.specs],
        }
        try:  # a group that is not made leaves no store behind
            self.post("/weights/broadcast/init", body, timeout=60, ok=202)
            self.group = WeightGroup.join(
                host=self.host,
                store_file=str(self.store_file),
                rank=0,
                world_size=world_size,
                backend=self.backend,
                device=self.device,
                timeout_s=self.timeout_s,
                store=store,
            )
        except InferenceServerError:
            self.close()
            raise
        except Exception as exc:
            self.close()
            self.check()
            raise InferenceServerError(
                f"the inference server did not join the weight group: {exc}"
            ) from exc

    def _inference_ranks(self) -> int:
        """vf-serve is one process; vLLM has one worker per GPU, each joins the group."""
        return int(self.post("/weights", None, timeout=30).get("inference_ranks", 1))

    def close(self) -> None:
        from verifiers.weights.group import WeightGroup

        if self.group is not None:
            self.group.close()
            self.group = None
        if self.store_file is not None:
            WeightGroup.remove_store(self.store_file)
            self.store_file = None
