"""One served model: prompt rendering and tokenizing, request fan-out (``n``), output assembly
(text, finish reasons, logprobs, Hermes-style tool calls), usage."""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from collections.abc import Callable
from typing import Any

from verifiers.asgi.json_api import APIError
from verifiers.serve.engine import Engine, SamplingParams, Sequence
from verifiers.serve.protocol import ChatCompletionRequest, CompletionRequest
from verifiers.weights.access import WeightAccess
from verifiers.weights.files import WeightFiles
from verifiers.weights.receiver import BroadcastReceiver

Started = list[tuple[Sequence, asyncio.Queue]]  # a request's sequences and their event queues
_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


class ModelService:
    """Prompt rendering, request fan-out (``n``), output assembly; one per served model."""

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
        # no token covers more text than the longest in the vocabulary: a prompt longer than
        # the context times that cannot fit, and is refused without tokenizing it
        self.longest_token = max((len(t) for t in self.tokenizer.get_vocab()), default=1)
        self.name = name
        self.names = {name, name.lower(), *aliases}
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

    # --- prompts -------------------------------------------------------------------------------
    def check_model(self, model: str) -> None:
        if model not in self.names and model.lower() not in self.names:
            raise APIError(
                404,
                f"model {model!r} is not served here; this server serves {self.name!r}",
                "not_found_error",
                "model",
            )

    def chat_prompt_ids(self, request: ChatCompletionRequest) -> list[int]:
        messages = [_template_message(m) for m in request.messages]
        try:
            text = self.tokenizer.apply_chat_template(
                messages, tools=request.tools, add_generation_prompt=True, tokenize=False
            )
        except Exception as exc:  # a template that rejects these messages
            raise APIError(
                400, f"the chat template cannot render these messages: {exc}", param="messages"
            ) from exc
        self.check_fits(text, "messages")
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    @property
    def max_prompt_chars(self) -> int:
        """The longest prompt text the context could hold, at the longest token's length."""
        return self.engine.max_model_len * self.longest_token

    def check_fits(self, text: str, param: str) -> None:
        limit = self.max_prompt_chars
        if len(text) > limit:
            raise APIError(
                400,
                f"the prompt has {len(text)} characters; this model's context of "
                f"{self.engine.max_model_len} tokens holds at most {limit}",
                param=param,
            )

    def text_prompt_ids(self, request: CompletionRequest) -> list[int]:
        if isinstance(request.prompt, list):
            ids = list(request.prompt)
            vocab = self.engine.vocab_size
            bad = next((t for t in ids if not 0 <= t < vocab), None)
            if not ids or bad is not None:
                problem = "is empty" if not ids else f"has token id {bad}, outside [0, {vocab})"
                raise APIError(400, f"the prompt {problem}", param="prompt")
            return ids
        self.check_fits(request.prompt, "prompt")
        ids = self.tokenizer(request.prompt)["input_ids"]
        if not ids:
            raise APIError(400, "the prompt is empty", param="prompt")
        return ids

    def params(self, request: Any, prompt_len: int, top_logprobs: int) -> SamplingParams:
        limit = self.engine.max_model_len
        if prompt_len >= limit:
            raise APIError(
                400,
                f"This model's maximum context length is {limit} tokens; the prompt has {prompt_len} tokens.",
                param="messages",
            )
        max_tokens = request.limit or (limit - prompt_len)
        if prompt_len + max_tokens > limit:
            raise APIError(
                400,
                f"This model's maximum context length is {limit} tokens; the prompt has {prompt_len} tokens "
                f"and max_tokens is {max_tokens}. Lower max_tokens or shorten the prompt.",
                param="max_tokens",
            )
        return SamplingParams(
            max_tokens=max_tokens,
            temperature=request.temperature,
            top_p=request.top_p,
            top_k=max(request.top_k, 0),
            stop=request.stop,
            seed=request.seed,
            top_logprobs=top_logprobs,
            ignore_eos=request.ignore_eos,
        )

    # --- running sequences -----------------------------------------------------------------------
    def start(
        self,
        prompt_ids: list[int],
        params: SamplingParams,
        n: int,
        on_finished: Callable[[], None] | None = None,
    ) -> Started:
        """Submit ``n`` sequences; ``on_finished`` runs (on the loop) once all of them ended,
        however they ended (done, error, or cancelled by a client that went away)."""
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

            started.append((self.engine.submit(Sequence(prompt_ids, p, emit)), events))
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


def _template_message(message: dict[str, Any]) -> dict[str, Any]:
    out = dict(message)
    content = out.get("content")
    if isinstance(content, list):
        out["content"] = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    elif content is None:
        out["content"] = ""
    for call in out.get("tool_calls") or []:
        function = call.get("function") or {}
        if isinstance(function.get("arguments"), str):
            try:
                function["arguments"] = json.loads(function["arguments"])
            except json.JSONDecodeError:
                pass
    return out


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
