"""What a worker does with a request: run the group in its environment, answer with outputs.

The same code serves a worker process (``verifiers.workers.process``) and a Ray actor
(``verifiers.workers.ray_pool``). The environment is loaded once, by id, with
``vf.load_environment`` (only serializable settings cross the wire, never an environment or a
live client); a client is made per distinct ``ClientConfig`` and reused. Groups run exactly as
they do in the caller's process (``verifiers.envs.generation.LocalGroups``), so results are the
same for the same seeds against the same server.
"""

from __future__ import annotations

import asyncio
from typing import Any

from verifiers.clients.config import ClientConfig
from verifiers.errors import InfraError
from verifiers.workers.protocol import (
    Member,
    Response,
    RunGroupRequest,
    RunRolloutRequest,
    parse_request,
)
from verifiers.workers.snapshot import failed_state, snapshot


def client_for(config: ClientConfig) -> Any:
    """The client for a config: the lean chat-completions transport (as ``vf-eval`` uses in
    process, so the dict-era engine sees the server's own JSON), else the config's vf.Client."""
    from verifiers.clients import make_client
    from verifiers.clients.openai_chat_completions_client import transport_from_config

    if config.client_type == "openai_chat_completions":
        return transport_from_config(config)
    return make_client(config)


class WorkerRuntime:
    """One environment and its clients, answering requests (async, many at once)."""

    def __init__(
        self, env_id: str, env_args: dict[str, Any] | None = None, env: Any = None
    ) -> None:
        """``env``: the environment already loaded as ``env_id`` (a worker forked from the
        caller right after it loaded it), else it is loaded here."""
        from verifiers.loading.loader import load_environment

        self.env = env if env is not None else load_environment(env_id, **(env_args or {}))
        self._clients: dict[str, Any] = {}

    def client(self, config: ClientConfig) -> Any:
        key = config.model_dump_json()
        if key not in self._clients:
            self._clients[key] = client_for(config)
        return self._clients[key]

    async def handle(self, payload: dict[str, Any]) -> Response:
        try:
            request = parse_request(payload)
        except Exception as exc:  # a malformed request is answered, never fatal
            return Response(success=False, error=f"bad request: {type(exc).__name__}: {exc}")
        if isinstance(request, RunRolloutRequest):
            response = await self.run_group(request.as_group())
            return Response(
                success=response.success,
                error=response.error,
                output=response.outputs[0] if response.outputs else None,
            )
        if isinstance(request, RunGroupRequest):
            return await self.run_group(request)
        return Response()  # health

    async def run_group(self, request: RunGroupRequest) -> Response:
        from verifiers.results.outputs import state_to_output

        members = request.members or [
            Member(rollout_index=i, sampling_args=request.sampling_args)
            for i in range(len(request.group_inputs))
        ]
        rows = list(request.group_inputs)
        indices = [m.rollout_index for m in members]
        run = self.env._run_worker_group(
            self.client(request.client_config),
            request.model,
            rows,
            indices,
            [m.sampling_args for m in members],
            score=request.score,
            max_retries=request.max_retries,
        )
        try:
            states = await (asyncio.wait_for(run, request.timeout) if request.timeout else run)
        except TimeoutError:
            error = InfraError(f"the group did not finish within its {request.timeout:g}s timeout")
            states = [
                failed_state(row, i, error) for row, i in zip(rows, indices, strict=True)
            ]
        if request.output == "state":
            return Response(outputs=[snapshot(s, request.step_slices) for s in states])
        columns, release = request.state_columns or [], self.env.release
        return Response(outputs=[state_to_output(s, columns, release) for s in states])

    async def close(self) -> None:
        for client in self._clients.values():
            closer = getattr(client, "aclose", None)
            if closer is not None:
                await closer()
        await self.env.end_run()
        await self.env._teardown()
