"""From a request body to what the engine runs: parse, validate, render, tokenize, and the
sampling parameters, each refused with a clear error where it cannot fit the served model.

``Prompts`` holds the tokenizer and the few numbers its checks need, and no engine (no torch),
so it pickles: a copy of it in a child process prepares the largest bodies (see
``verifiers.serve.lanes``) without holding the server's interpreter.
"""

from __future__ import annotations

import json
from typing import Any, Literal, NamedTuple

import orjson
from pydantic import ValidationError

from verifiers.asgi.json_api import APIError
from verifiers.serve.protocol import (
    ChatCompletionRequest,
    CompletionRequest,
    Reply,
    SamplingParams,
    check_brackets,
)

Kind = Literal["chat", "text"]
REQUESTS: dict[Kind, type[ChatCompletionRequest] | type[CompletionRequest]] = {
    "chat": ChatCompletionRequest,
    "text": CompletionRequest,
}


class Prepared(NamedTuple):
    """Only what answering needs: the parsed body is dropped where it was prepared."""

    reply: Reply
    prompt_ids: list[int]
    params: SamplingParams
    n: int


class Prompts:
    """How one served model's requests become token ids and sampling parameters."""

    def __init__(
        self, tokenizer: Any, name: str, names: set[str], max_model_len: int, vocab_size: int
    ) -> None:
        self.tokenizer = tokenizer
        self.name, self.names = name, names
        self.max_model_len, self.vocab_size = max_model_len, vocab_size
        # no token covers more text than the longest in the vocabulary: a prompt longer than
        # the context times that cannot fit, and is refused without tokenizing it
        self.longest_token = max((len(t) for t in tokenizer.get_vocab()), default=1)
        # every list in a request is counted against the context before its items are validated
        self.context = {"max_items": max_model_len}

    def prepare(self, body: bytes, kind: Kind) -> Prepared:
        req = self.parse(body, kind)
        prompt_ids = self.chat_prompt_ids(req) if kind == "chat" else self.text_prompt_ids(req)
        reply = req.reply()
        return Prepared(
            reply, prompt_ids, self.params(req, len(prompt_ids), reply.top_logprobs), req.n
        )

    def parse(self, body: bytes, kind: Kind) -> Any:
        check_brackets(body, self.max_model_len, self.max_prompt_chars)
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise APIError(400, f"request body is not valid JSON: {exc}") from exc
        try:
            parsed = REQUESTS[kind].model_validate(data, context=self.context)
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            param = ".".join(str(p) for p in first["loc"])
            raise APIError(400, f"invalid request: {param}: {first['msg']}", param=param) from exc
        self.check_model(parsed.model)
        return parsed

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
        return self.max_model_len * self.longest_token

    def check_fits(self, text: str, param: str) -> None:
        limit = self.max_prompt_chars
        if len(text) > limit:
            raise APIError(
                400,
                f"the prompt has {len(text)} characters; this model's context of "
                f"{self.max_model_len} tokens holds at most {limit}",
                param=param,
            )

    def text_prompt_ids(self, request: CompletionRequest) -> list[int]:
        if isinstance(request.prompt, list):
            ids = list(request.prompt)
            bad = next((t for t in ids if not 0 <= t < self.vocab_size), None)
            if not ids or bad is not None:
                problem = (
                    "is empty" if not ids else f"has token id {bad}, outside [0, {self.vocab_size})"
                )
                raise APIError(400, f"the prompt {problem}", param="prompt")
            return ids
        self.check_fits(request.prompt, "prompt")
        ids = self.tokenizer(request.prompt)["input_ids"]
        if not ids:
            raise APIError(400, "the prompt is empty", param="prompt")
        return ids

    def params(self, request: Any, prompt_len: int, top_logprobs: int) -> SamplingParams:
        limit = self.max_model_len
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
            except (ValueError, RecursionError):  # not JSON, too deep, too long a number
                pass  # the template gets the text as it came
    return out
