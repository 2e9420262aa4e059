"""Streaming replies (server-sent events) for chat and text completions: each sequence's tokens
as they come, text held back while it could still become a stop string, and a client that goes
away stops costing compute."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import orjson

from verifiers.serve.engine import Sequence
from verifiers.serve.protocol import Reply
from verifiers.serve.service import ModelService, Started


def _sse(obj: Any) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


async def _events(service: ModelService, started: list[tuple[Sequence, asyncio.Queue]]):
    """(index, kind, payload) from all sequences as they come."""
    merged: asyncio.Queue = asyncio.Queue()

    async def pump(index: int, events: asyncio.Queue) -> None:
        while True:
            kind, payload = await events.get()
            await merged.put((index, kind, payload))
            if kind in ("done", "error"):
                return

    tasks = [asyncio.ensure_future(pump(i, q)) for i, (_, q) in enumerate(started)]
    remaining = len(started)
    try:
        while remaining:
            index, kind, payload = await merged.get()
            if kind in ("done", "error"):
                remaining -= 1
            yield index, kind, payload
    finally:
        for task in tasks:
            task.cancel()
        service.cancel(started)  # a client that went away stops costing compute


class _Detokenizer:
    """Incremental text for streaming; holds back text that could still become a stop string."""

    def __init__(self, service: ModelService, seq: Sequence) -> None:
        self.service, self.seq, self.sent, self.stopped = service, seq, 0, False

    def delta(self, final: bool) -> str:
        if self.stopped:
            return ""
        text = self.service.tokenizer.decode(self.seq.out_ids, skip_special_tokens=True)
        for stop in self.seq.params.stop:
            index = text.find(stop)
            if index >= 0:
                text, self.stopped = text[:index], True
        hold = (
            0 if final or self.stopped else max((len(s) for s in self.seq.params.stop), default=0)
        )
        if text.endswith("\ufffd") and not final:
            hold = max(hold, 1)  # an incomplete UTF-8 character
        end = max(self.sent, len(text) - hold)
        piece, self.sent = text[self.sent : end], end
        return piece


async def stream_chat(
    service: ModelService, reply: Reply, rid: str, prompt_ids: list[int], started: Started
) -> AsyncIterator[bytes]:
    created = int(time.time())
    base = {
        "id": rid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": service.name,
        "policy_version": service.policy_version,  # as when the stream started
    }
    detok = [_Detokenizer(service, s) for s, _ in started]
    for i in range(len(started)):
        yield _sse(
            {
                **base,
                "choices": [
                    {
                        "index": i,
                        "delta": {"role": "assistant", "content": ""},
                        "finish_reason": None,
                    }
                ],
            }
        )
    async for index, kind, payload in _events(service, started):
        if kind == "error":
            yield _sse(
                {"error": {"message": f"generation failed: {payload}", "type": "server_error"}}
            )
            break
        final = kind == "done"
        piece = detok[index].delta(final)
        choice: dict[str, Any] = {
            "index": index,
            "delta": {"content": piece} if piece else {},
            "finish_reason": None,
        }
        if kind == "token" and reply.logprobs:
            token, logprob, top = payload
            choice["logprobs"] = {"content": [service.token_entry(token, logprob, top)]}
        if reply.return_token_ids and kind == "token":
            choice["token_ids"] = [payload[0]]
        if final:
            choice["finish_reason"] = service.output_text(started[index][0])[1]
        if piece or final or "logprobs" in choice or "token_ids" in choice:
            yield _sse({**base, "choices": [choice]})
    if reply.stream_usage:
        yield _sse(
            {**base, "choices": [], "usage": service.usage(prompt_ids, [s for s, _ in started])}
        )
    yield b"data: [DONE]\n\n"


async def stream_text(
    service: ModelService, reply: Reply, rid: str, prompt_ids: list[int], started: Started
) -> AsyncIterator[bytes]:
    base = {
        "id": rid,
        "object": "text_completion",
        "created": int(time.time()),
        "model": service.name,
        "policy_version": service.policy_version,
    }
    detok = [_Detokenizer(service, s) for s, _ in started]
    async for index, kind, _payload in _events(service, started):
        if kind == "error":
            yield _sse({"error": {"message": "generation failed", "type": "server_error"}})
            break
        final = kind == "done"
        piece = detok[index].delta(final)
        if piece or final:
            reason = service.output_text(started[index][0])[1] if final else None
            yield _sse(
                {**base, "choices": [{"index": index, "text": piece, "finish_reason": reason}]}
            )
    yield b"data: [DONE]\n\n"
