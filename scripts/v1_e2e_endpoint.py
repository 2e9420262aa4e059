"""A pytest plugin that points upstream's v1 e2e tests at a local endpoint: this SDK's scripted
OpenAI-compatible server on loopback (``OPENAI_BASE_URL``, a stand-in ``PRIME_API_KEY`` so the
``e2e`` tests do not skip), answering the way a model that follows the fixture prompts would.
``scripts/v1_anchor_tests.sh`` loads it with ``-p v1_e2e_endpoint`` for the e2e rows."""

from __future__ import annotations

import os
import re
import shlex
from contextlib import ExitStack
from typing import Any

from verifiers.testing import ModelServer, Reply

_servers = ExitStack()
WRITE = "Use the bash tool to write exactly the text '"
ECHO = "include this exact phrase in your final response: "
# echo-tool-v1, counter-tool-v1, tool-response-image-v1: "Call the `NAME` tool ..."
CALL = re.compile(
    r"Call the `(\w+)` tool (?:with the message \"([^\"]*)\"|(\d+) times|exactly once)"
)


def _text(content: Any) -> str:
    if isinstance(content, list):  # content parts: their text
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


def policy(request: dict[str, Any]) -> Reply | str:
    """echo-v1 / echo-user-sim-v1: the user's words back; echo-agentic-v1: one bash call
    writing the phrase, then done; the tool tasks: the tool called as the prompt says (with
    the message, N times one per turn, or once), then the answer the prompt asks for."""
    messages = request["messages"]
    results = [_text(m["content"]) for m in messages if m["role"] == "tool"]
    first = next((_text(m["content"]) for m in messages if m["role"] == "user"), "")
    called = CALL.search(first)
    if called:
        name, message, times = called.group(1), called.group(2), called.group(3)
        wanted = int(times) if times else 1
        if len(results) < wanted:
            return Reply(
                tool_calls=[
                    Reply.tool_call(name, {"message": message} if message is not None else {})
                ]
            )
        if message is not None:
            return f"<answer>{results[-1]}</answer>"
        return "<answer>done</answer>" if times else "done"
    if results:
        return "Done."
    prompt = _text(messages[-1]["content"])
    if WRITE in prompt:
        phrase = prompt.split(WRITE, 1)[1].split("'", 1)[0]
        command = f"printf %s {shlex.quote(phrase)} > answer.txt"
        return Reply(tool_calls=[Reply.tool_call("bash", {"command": command})])
    if ECHO in prompt:
        return prompt.split(ECHO, 1)[1]
    return prompt


def pytest_configure(config: Any) -> None:
    server = _servers.enter_context(ModelServer())
    server.set_handler(policy)
    os.environ["OPENAI_BASE_URL"] = server.base_url
    os.environ.setdefault("OPENAI_API_KEY", "local")
    os.environ.setdefault("PRIME_API_KEY", "local")


def pytest_unconfigure(config: Any) -> None:
    _servers.close()
