"""The base parser: how an environment reads the model's text (classic semantics)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from verifiers.types import ChatMessage, Message, Messages


class Parser:
    """``parse`` applies ``extract_fn`` (identity by default); ``parse_answer`` parses the last
    assistant message (or the text itself for completion-style rollouts)."""

    def __init__(self, extract_fn: Callable[[str], Any] = lambda x: x, **kwargs: Any) -> None:
        self.logger = logging.getLogger(f"verifiers.parsers.{type(self).__name__}")
        self.extract_fn = extract_fn
        for key, value in kwargs.items():
            setattr(self, key, value)

    def parse(self, text: str) -> Any:
        return self.extract_fn(text)

    @staticmethod
    def _by_role(completion: Messages, role: str) -> list[Message | ChatMessage]:
        if isinstance(completion, str):
            return [{"role": "assistant", "content": completion}] if role == "assistant" else []
        return [m for m in completion if m.get("role") == role]

    def get_assistant_messages(self, completion: Messages) -> list[Message | ChatMessage]:
        return self._by_role(completion, "assistant")

    def get_system_messages(self, completion: Messages) -> list[Message | ChatMessage]:
        return self._by_role(completion, "system")

    def get_user_messages(self, completion: Messages) -> list[Message | ChatMessage]:
        return self._by_role(completion, "user")

    def get_tool_messages(self, completion: Messages) -> list[Message | ChatMessage]:
        return self._by_role(completion, "tool")

    def parse_answer(self, completion: Messages) -> Any:
        """The parsed last assistant message (None when there is none)."""
        if isinstance(completion, str):
            return self.parse(completion)
        messages = self.get_assistant_messages(completion)
        if not messages:
            return None
        return self.parse(message_text(messages[-1]))

    def get_format_reward_func(self) -> Callable[..., float]:
        """The base parser has no format to check: always 1.0 (subclasses check theirs)."""

        def format_reward_func(completion: Messages, **kwargs: Any) -> float:
            return 1.0

        return format_reward_func


def message_text(message: Any) -> str:
    """The text of a chat message, joining multi-part (text/image) content."""
    content = (
        message.get("content") if isinstance(message, dict) else getattr(message, "content", None)
    )
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return str(content)
