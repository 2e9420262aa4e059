"""The caller's side: run the groups of ``Environment.generate`` in environment workers.

``WorkerGroups`` is a ``GroupRunner`` (``verifiers.envs.generation``): each group goes to the
workers as one request carrying the rows, each rollout's index and sampling args (so seeds are
those of an in-process run) and a ``ClientConfig`` (never a live client), and comes back as full
rollout snapshots that read like in-process states (from a server that answers 0.1.11+'s
``RolloutOutput`` rows instead, verifiers' own ``ZMQEnvServer``, states read back from the rows:
the same conversation, reward and metrics, no token-level trajectory). A request that failed
(its worker died twice, it timed out) becomes an error on each of the group's rollouts.
``max_concurrent`` bounds the rollouts in flight across all workers, as it does in process.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Protocol

from verifiers.clients.config import ClientConfig
from verifiers.errors import InfraError
from verifiers.types import State
from verifiers.workers.protocol import Member, Response, RunGroupRequest
from verifiers.workers.snapshot import failed_state, from_output, restore

KEY_VAR = "VF_ENV_WORKER_API_KEY"
NO_KEY_VAR = "VF_NO_API_KEY"  # named by a config that has no key (never set anywhere)


class EnvWorkers(Protocol):
    """Something that runs groups: a local ``WorkerPool``, a ``RayPool`` or ``RemoteWorkers``."""

    async def run_group(self, request: RunGroupRequest) -> Response: ...
    async def close(self) -> None: ...
    def describe(self) -> dict[str, Any]: ...


class RolloutBudget:
    """At most ``limit`` rollouts in flight (no limit when ``limit`` <= 0).

    A group takes its rollouts' permits one by one under a lock, so groups are served in the
    order they asked and two groups never hold part of what each needs (no deadlock), and a
    release wakes only the one waiter it can serve (no thundering herd at c=256).
    """

    def __init__(self, limit: int | None) -> None:
        self.limit = limit if limit and limit > 0 else 0
        self._permits = asyncio.Semaphore(self.limit) if self.limit else None
        self._taking = asyncio.Lock()

    @asynccontextmanager
    async def hold(self, n: int) -> AsyncIterator[None]:
        if self._permits is None:
            yield
            return
        n = min(n, self.limit)
        async with self._taking:
            for _ in range(n):
                await self._permits.acquire()
        try:
            yield
        finally:
            for _ in range(n):
                self._permits.release()


def client_config_of(client: Any, message_type: str = "chat") -> ClientConfig:
    """The serializable config of what the caller passed (a ClientConfig, a base URL, this
    SDK's lean client, an ``openai.AsyncOpenAI``). A key the caller holds but does not name is
    put in ``VF_ENV_WORKER_API_KEY`` of this process, which local workers inherit."""
    if isinstance(client, ClientConfig):
        return client
    kind = "openai_completions" if message_type == "completion" else "openai_chat_completions"
    if isinstance(client, str):
        return ClientConfig(
            client_type=kind,
            api_base_url=client,
            api_key_var=NO_KEY_VAR,
            max_retries=3,
            timeout=600.0,
        )
    base_url = str(getattr(client, "base_url", "") or "")
    if not base_url:
        raise TypeError(
            f"environment workers need a client they can rebuild from settings; pass a base URL or "
            f"a vf.ClientConfig instead of a {type(client).__name__}"
        )
    key = getattr(client, "api_key", None)
    has_key = isinstance(key, str) and key not in ("", "EMPTY")
    if has_key:
        os.environ[KEY_VAR] = str(key)
    retry = getattr(client, "retry", None)
    return ClientConfig(
        client_type=kind,
        api_base_url=base_url.rstrip("/"),
        api_key_var=KEY_VAR if has_key else NO_KEY_VAR,
        extra_headers={
            k: v
            for k, v in (getattr(client, "headers", None) or {}).items()
            if k.lower() not in ("authorization", "content-type", "accept")
        },
        timeout=timeout_seconds(getattr(client, "timeout", None)),
        max_retries=getattr(retry, "max_retries", 3) if retry is not None else 3,
    )


def timeout_seconds(timeout: Any, default: float = 600.0) -> float:
    """A client's timeout as the seconds a worker's client waits: a number as it is; an
    ``httpx.Timeout`` (what a default ``AsyncOpenAI`` has: 600 s read, 5 s connect) by its
    longest phase; none set, ``default``."""
    if isinstance(timeout, int | float) and not isinstance(timeout, bool) and timeout > 0:
        return float(timeout)
    phases = [
        getattr(timeout, phase, None) for phase in ("read", "write", "connect", "pool", "timeout")
    ]
    seconds = [float(p) for p in phases if isinstance(p, int | float) and p > 0]
    return max(seconds) if seconds else default


class WorkerGroups:
    """Runs groups in environment workers (see the module docstring)."""

    def __init__(
        self,
        workers: EnvWorkers,
        client: ClientConfig,
        model: str,
        *,
        max_concurrent: int | None = None,
        max_retries: int = 0,
        timeout: float | None = None,
    ) -> None:
        self.workers, self.client, self.model = workers, client, model
        self.budget = RolloutBudget(max_concurrent)
        self.max_retries, self.timeout = max_retries, timeout

    def describe(self) -> dict[str, Any]:
        """The workers as they are now (restarts, groups isolated): what the run's metadata
        records when it ends."""
        return self.workers.describe()

    async def run(self, job: Any) -> list[State]:
        request = RunGroupRequest(
            group_inputs=[_plain_row(r) for r in job.rows],
            client_config=self.client,
            model=self.model,
            members=[
                Member(rollout_index=i, sampling_args=dict(a))
                for i, a in zip(job.indices, job.sampling_args, strict=True)
            ],
            score=job.score,
            max_retries=self.max_retries,
            timeout=self.timeout,
            output="state",
            step_slices=True,
        )
        async with self.budget.hold(len(job.rows)):
            response = await self.workers.run_group(request)
        if not response.success or response.outputs is None:
            error = InfraError(response.error or "the environment worker gave no outputs")
            return [
                failed_state(row, i, error) for row, i in zip(job.rows, job.indices, strict=True)
            ]
        return [
            _read(output, row, i)
            for output, row, i in zip(response.outputs, job.rows, job.indices, strict=True)
        ]


def _read(output: dict[str, Any], row: dict[str, Any], rollout_index: int) -> State:
    """One rollout's output as its state. A snapshot carries its row; a server that does not
    know ``output: "state"`` (verifiers' own ZMQEnvServer) answers 0.1.11+'s ``RolloutOutput``
    rows, read back against the rows sent. An output that cannot be read (a server's bug, a
    newer one's shape) is that rollout's error, not the run's end."""
    try:
        return restore(output) if "input" in output else from_output(row, rollout_index, output)
    except Exception as exc:
        error = InfraError(f"the environment worker's output could not be read: {exc}")
        return failed_state(row, rollout_index, error)


def _plain_row(row: dict[str, Any]) -> dict[str, Any]:
    from verifiers.messages.convert import to_plain

    return {**row, "prompt": to_plain(row.get("prompt"))}
