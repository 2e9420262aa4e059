"""One served model: request fan-out (``n``), output assembly (text, finish reasons, logprobs,
Hermes-style tool calls), usage; its prompts are ``verifiers.serve.prompts``'s."""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from collections.abc import Callable
from typing import Any

from verifiers.asgi.json_api import APIError
from verifiers.serve.engine import Engine, Sequence
from verifiers.serve.prompts import Prompts
from verifiers.serve.protocol import SamplingParams
from verifiers.weights.access import WeightAccess
from verifiers.weights.receiver import BroadcastReceiver
from verifiers.weights.served import WeightFiles

Started = list[tuple[Sequence, asyncio.Queue]]  # a request's sequences and their event queues
_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


class ModelService:
    """Request fan-out (``n``), output assembly; one per served model."""

    def __init__(
        self,
        engine: Engine,
        name: str,
        aliases: tuple[str, ...] = (),
        access: WeightAccess | None = None,
    ) -> None:
        self.engine = engine
        self.access = access or WeightAccess(None, [])  # no secret: weight updates off
        self.tokenizer = engine.tokenizer
        self.name = name
        self.prompts = Prompts(
            self.tokenizer,
            name,
            {name, name.lower(), *aliases},
            engine.max_model_len,
            engine.vocab_size,
        )
        self.policy_version = 0
        self.weights_path: str | None = None
        self.created = int(time.time())
        self.receiver = BroadcastReceiver(self)  # weights over a process group, from a trainer
        # POST /v1/weights/load: full or adapter, every file read from a trusted directory
        self.weight_files = WeightFiles(engine.model, self.access.trusted)

    def advance(self, version: int | None, path: str) -> None:
        """New weights are in: the trainer's version for them, or one more than before."""
        self.policy_version = version if version is not None else self.policy_version + 1
        self.weights_path = path

    # --- running sequences -----------------------------------------------------------------------
    def start(
        self,
        prompt_ids: list[int],
        params: SamplingParams,
        n: int,
        on_finished: Callable[[], None] | None = None,
        scope: str | None = None,
    ) -> Started:
        """Submit ``n`` sequences; ``on_finished`` runs (on the loop) once all of them ended,
        however they ended (done, error, or cancelled by a client that went away). ``scope``:
        whose kept prefills they may use (the anonymous client's; ``None`` for trusted callers)."""
        loop = asyncio.get_running_loop()
        started = []
        left = [n]

        def ended() -> None:
            left[0] -= 1
            if not left[0] and on_finished is not None:
                on_finished()

        for i in range(n):
            events: asyncio.Queue = asyncio.Queue()
            p = (
                params
                if params.seed is None or i == 0
                else SamplingParams(**{**params.__dict__, "seed": params.seed + i})
            )

            def emit(kind: str, payload: Any, events: asyncio.Queue = events) -> None:
                loop.call_soon_threadsafe(events.put_nowait, (kind, payload))
                if kind in ("done", "error"):
                    loop.call_soon_threadsafe(ended)

            started.append((self.engine.submit(Sequence(prompt_ids, p, emit, scope=scope)), events))
        return started

    @staticmethod
    def cancel(started: Started) -> None:
        """Sequences nobody waits for any more: the engine ends them at its next step (or before
        they start), and ``start``'s ``on_finished`` runs then, releasing their budget."""
        for seq, _ in started:
            seq.cancelled = True

    async def finish(self, seq: Sequence, events: asyncio.Queue) -> None:
        while True:
            kind, payload = await events.get()
            if kind == "done":
                return
            if kind == "error":
                raise APIError(500, f"generation failed: {payload}", "server_error")

    def output_text(self, seq: Sequence) -> tuple[str, str]:
        """Decoded text (EOS and special tokens removed, cut at a stop string) and finish reason."""
        text = self.tokenizer.decode(seq.out_ids, skip_special_tokens=True)
        reason = seq.finish_reason or "stop"
        for stop in seq.params.stop:
            index = text.find(stop)
            if index >= 0:
                text, reason = text[:index], "stop"
        return text, "length" if reason == "length" else "stop"

    def token_entry(
        self, token: int, logprob: float, top: list[tuple[int, float]] | None
    ) -> dict[str, Any]:
        piece = self.tokenizer.decode([token])
        entry: dict[str, Any] = {"token": piece, "logprob": logprob, "bytes": list(piece.encode())}
        entry["top_logprobs"] = [
            {
                "token": self.tokenizer.decode([t]),
                "logprob": lp,
                "bytes": list(self.tokenizer.decode([t]).encode()),
            }
            for t, lp in (top or [])
        ]
        return entry

    def envelope(
        self,
        rid: str,
        kind: str,
        choices: list[dict[str, Any]],
        prompt_ids: list[int],
        started: list[tuple[Sequence, Any]],
        with_token_ids: bool,
    ) -> dict[str, Any]:
        """The response body around the choices (shared by chat and text completions)."""
        body: dict[str, Any] = {
            "id": rid,
            "object": kind,
            "created": int(time.time()),
            "model": self.name,
            "choices": choices,
            "usage": self.usage(prompt_ids, [s for s, _ in started]),
            "policy_version": self.policy_version,
        }
        if with_token_ids:
            body["prompt_token_ids"] = prompt_ids
        return body

    def usage(self, prompt_ids: list[int], seqs: list[Sequence]) -> dict[str, int]:
        completion = sum(len(s.out_ids) for s in seqs)
        return {
            "prompt_tokens": len(prompt_ids),
            "completion_tokens": completion,
            "total_tokens": len(prompt_ids) + completion,
        }


def parse_tool_calls(text: str) -> tuple[str | None, list[dict[str, Any]]]:
    """Hermes-style ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks."""
    calls = []
    for block in _TOOL_CALL.findall(text):
        try:
            data = json.loads(block)
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict) and isinstance(data.get("name"), str):
            arguments = data.get("arguments", {})
            calls.append(
                {
                    "id": f"call_{uuid.uuid4().hex[:24]}",
                    "type": "function",
                    "function": {
                        "name": data["name"],
                        "arguments": arguments
                        if isinstance(arguments, str)
                        else json.dumps(arguments),
                    },
                }
            )
    if not calls:
        return text, []
    rest = _TOOL_CALL.sub("", text).strip()
    return rest or None, calls
