"""Weights over a process group: the inference side of ``verifiers.weights.group``.

``POST /v1/weights/broadcast/init`` checks the trainer's manifest against the served model and
starts joining the group (the trainer, rank 0, joins at the same time; the join completes when
both have); ``POST /v1/weights/broadcast/update`` receives one full set of tensors, in manifest
order, then swaps them in between two decoding steps and bumps the policy version.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import orjson
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from verifiers.asgi.json_api import APIError, _error, _json, read_body
from verifiers.weights.protocol import BroadcastInitRequest, BroadcastUpdateRequest

log = logging.getLogger("verifiers.serve")


class BroadcastReceiver:
    """One weight group at a time, for the one process this server is (rank 1 of 2)."""

    def __init__(self, service: Any) -> None:
        self.service = service
        self.group: Any = None
        self.specs: list[Any] = []
        self.joined = threading.Event()
        self.generation = 0  # each init starts a new one; a stale join discards its group
        self.join_error: str | None = None
        self.busy = asyncio.Lock()

    async def init(self, request: Request) -> Response:
        from verifiers.weights.manifest import TensorSpec, check_fits

        try:
            req = BroadcastInitRequest.model_validate(orjson.loads(await read_body(request)))
            specs = [TensorSpec.model_validate(t) for t in req.tensors]
        except (ValidationError, orjson.JSONDecodeError) as exc:
            return _error(APIError(400, f"invalid request: {exc}"))
        except APIError as exc:
            return _error(exc)
        if req.world_size != 2 or req.rank != 1:
            return _error(
                APIError(400, "this server is one inference rank: use world_size 2, rank 1")
            )
        if self.busy.locked():
            return _error(APIError(409, "a weight update is in progress"))
        # A newer init wins: a join still pending (a stuck or abandoned trainer) or a previous
        # group (a restarted trainer) is dropped, so nothing can lock the trainer out.
        self.close()
        try:
            check_fits(specs, self.service.engine.model.state_dict())
        except ValueError as exc:
            return _error(APIError(400, str(exc), param="tensors"))
        self.specs, self.join_error = specs, None
        self.generation += 1
        self.joined.clear()
        threading.Thread(
            target=self._join, args=(req, self.generation), daemon=True, name="weight-group"
        ).start()
        return _json({"status": "joining", "tensors": len(specs)}, 202)

    def _join(self, req: BroadcastInitRequest, generation: int) -> None:
        from verifiers.weights.group import WeightGroup

        try:
            group = WeightGroup.join(
                host=req.host,
                store_file=req.store_file,
                rank=req.rank,
                world_size=req.world_size,
                backend=req.backend,
                device=next(self.service.engine.model.parameters()).device,
                timeout_s=req.timeout_s,
            )
            if generation != self.generation:  # a newer init replaced this one meanwhile
                group.close()
                return
            self.group = group
            log.info(
                "joined the trainer's weight group (%s, %d tensors)", req.backend, len(self.specs)
            )
        except Exception as exc:  # reported to the trainer by the next update call
            if generation != self.generation:
                return
            self.join_error = f"{type(exc).__name__}: {exc}"
            self.specs = []
            log.error("could not join the trainer's weight group: %s", self.join_error)
        finally:
            if generation == self.generation:
                self.joined.set()

    async def update(self, request: Request) -> Response:
        try:
            req = BroadcastUpdateRequest.model_validate(
                orjson.loads(await read_body(request) or b"{}")
            )
        except (ValidationError, orjson.JSONDecodeError) as exc:
            return _error(APIError(400, f"invalid request: {exc}"))
        except APIError as exc:
            return _error(exc)
        if not self.specs and self.group is None:
            message = self.join_error or "no weight group: call /v1/weights/broadcast/init first"
            return _error(APIError(409, message))
        if self.busy.locked():
            return _error(APIError(409, "a weight update is already in progress"))
        async with self.busy:
            await asyncio.to_thread(self.joined.wait)
            if self.group is None:
                return _error(APIError(409, f"joining the weight group failed: {self.join_error}"))
            try:
                state = await asyncio.to_thread(self.group.receive, self.specs)
            except Exception as exc:
                # a broken group cannot be resynchronised: drop it; the trainer must init again
                self.close()
                return _error(
                    APIError(500, f"receiving weights failed: {exc}", kind="server_error")
                )
            await asyncio.to_thread(self.service.engine.swap_weights, state)
        self.service.advance(req.policy_version, "broadcast")
        return _json({"policy_version": self.service.policy_version, "tensors": len(state)})

    def close(self) -> None:
        if self.group is not None:
            self.group.close()
        self.group, self.specs = None, []
