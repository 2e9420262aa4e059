"""Parsers for reasoning models that wrap their thinking in ``<think>...</think>``."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from verifiers.parsers.parser import Parser, message_text
from verifiers.types import Messages

_THINK_BLOCK = re.compile(r"^\s*<think>.*?</think>", re.DOTALL)


class ThinkParser(Parser):
    """Expects one leading think block; parses only what follows it (None when it is missing)."""

    def parse(self, text: str) -> Any:
        if "</think>" not in text:
            return None
        return self.extract_fn(text.split("</think>")[-1].strip())

    def get_format_reward_func(self) -> Callable[..., float]:
        def format_reward_func(completion: Messages, **kwargs: Any) -> float:
            texts = (
                [completion]
                if isinstance(completion, str)
                else [message_text(m) for m in self.get_assistant_messages(completion)]
            )
            if not texts:
                return 0.0
            good = 0
            for text in texts:
                match = _THINK_BLOCK.match(text)
                if (
                    match
                    and text.count("<think>") == 1
                    and text.count("</think>") == 1
                    and text[match.end() :].strip()
                ):
                    good += 1
            return good / len(texts)

        return format_reward_func


class MaybeThinkParser(Parser):
    """Strips a think block when present and parses the rest; plain answers pass through."""

    def parse(self, text: str) -> Any:
        if "</think>" in text:
            text = text.split("</think>")[-1]
        return self.extract_fn(text.strip())
