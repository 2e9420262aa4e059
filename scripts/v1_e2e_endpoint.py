"""A pytest plugin that points upstream's v1 e2e tests at a local endpoint: this SDK's scripted
OpenAI-compatible server on loopback (``OPENAI_BASE_URL``, a stand-in ``PRIME_API_KEY`` so the
``e2e`` tests do not skip), answering the way a model that follows the fixture prompts would.
``scripts/v1_anchor_tests.sh`` loads it with ``-p v1_e2e_endpoint`` for the e2e rows."""

from __future__ import annotations

import os
import shlex
from contextlib import ExitStack
from typing import Any

from verifiers.testing import ModelServer, Reply

_servers = ExitStack()
WRITE = "Use the bash tool to write exactly the text '"
ECHO = "include this exact phrase in your final response: "


def policy(request: dict[str, Any]) -> Reply | str:
    """echo-v1: the phrase back; echo-agentic-v1: one bash call writing the phrase, then done."""
    messages = request["messages"]
    if any(m["role"] == "tool" for m in messages):
        return "Done."
    prompt = str(messages[-1]["content"])
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
