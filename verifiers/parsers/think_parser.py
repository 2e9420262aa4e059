"""Parsers for reasoning models that wrap their thinking in ``<think>...</think>``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from verifiers.parsers.parser import Parser, message_text
from verifiers.types import Messages


class ThinkParser(Parser):
    """For models that always emit a think block their server does not strip: parses only what
    follows ``</think>``, and nothing ("") when it is missing."""

    def __init__(self, extract_fn: Callable[[str], Any] = lambda x: x, **kwargs: Any) -> None:
        super().__init__(extract_fn=extract_fn, **kwargs)
        self.logger.warning(
            "ThinkParser expects models that always write <think>...</think> and whose server does "
            "not strip it; without the tags every answer parses as empty. Do not use it with models "
            "whose chat template removes the think block (e.g. Qwen3, DeepSeek-R1)."
        )

    def parse(self, text: str) -> Any:
        text = text.split("</think>")[-1].strip() if "</think>" in text else ""
        return self.extract_fn(text.strip())

    def get_format_reward_func(self) -> Callable[..., float]:
        """1.0 per assistant message that starts with exactly one think block and says something
        after it; averaged over messages."""

        def follows_format(text: str) -> float:
            ok = (
                text.strip().startswith("<think>")
                and text.count("<think>") == 1
                and text.count("</think>") == 1
                and len(text.split("</think>")[-1]) > 0
            )
            return 1.0 if ok else 0.0

        def format_reward_func(completion: Messages, **kwargs: Any) -> float:
            messages = self.get_assistant_messages(completion)
            if not messages:
                return 0.0
            return sum(follows_format(message_text(m)) for m in messages) / len(messages)

        return format_reward_func


class MaybeThinkParser(Parser):
    """Drops everything up to the last ``</think>`` when present; plain answers pass through."""

    def parse(self, text: str) -> Any:
        return self.extract_fn(text.split("</think>")[-1].strip())
