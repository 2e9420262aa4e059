"""The base parser: how an environment reads the model's text."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from verifiers.types import Messages


class Parser:
    """Extracts an answer from model output with ``extract_fn`` (identity by default)."""

    def __init__(self, extract_fn: Callable[[str], Any] = lambda x: x, **kwargs: Any) -> None:
        self.extract_fn = extract_fn
        for key, value in kwargs.items():
            setattr(self, key, value)

    def parse(self, text: str) -> Any:
        return self.extract_fn(text)

    def get_assistant_messages(self, completion: Messages) -> list[dict[str, Any]]:
        if isinstance(completion, str):
            return [{"role": "assistant", "content": completion}]
        return [m for m in completion if m.get("role") == "assistant"]

    def get_user_messages(self, completion: Messages) -> list[dict[str, Any]]:
        if isinstance(completion, str):
            return []
        return [m for m in completion if m.get("role") == "user"]

    def get_tool_messages(self, completion: Messages) -> list[dict[str, Any]]:
        if isinstance(completion, str):
            return []
        return [m for m in completion if m.get("role") == "tool"]

    def parse_answer(self, completion: Messages) -> str | None:
        """The answer in the last assistant message (or the whole text for completion-style)."""
        if isinstance(completion, str):
            return self.parse(completion)
        for message in reversed(self.get_assistant_messages(completion)):
            text = message_text(message)
            if text:
                return self.parse(text)
        return None

    def get_format_reward_func(self) -> Callable[..., float]:
        """Reward 1.0 when the output parses at all; subclasses check their own format."""

        def format_reward_func(completion: Messages, **kwargs: Any) -> float:
            return 1.0 if self.parse_answer(completion) is not None else 0.0

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
