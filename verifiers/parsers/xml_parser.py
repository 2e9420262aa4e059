"""Parse and format XML-tagged fields (``<think>...</think><answer>...</answer>``)."""

from __future__ import annotations

import re
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from verifiers.parsers.parser import Parser, message_text
from verifiers.types import Messages

Field = str | tuple[str, ...] | list[str]


class XMLParser(Parser):
    """Fields are names or tuples of alternatives, the first being canonical: ``("code", "answer")``.

    ``parse`` returns a namespace with one attribute per alternative (None when absent).
    ``answer_field`` is the field that ``parse_answer`` returns.
    """

    def __init__(self, fields: list[Field], answer_field: str = "answer", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._fields: list[tuple[str, list[str]]] = []
        seen: set[str] = set()
        for spec in fields:
            if isinstance(spec, str):
                names = [spec]
            elif isinstance(spec, tuple | list) and spec and all(isinstance(n, str) for n in spec):
                names = list(spec)
            else:
                raise TypeError(f"XMLParser field must be a str or a tuple of str, got {spec!r}")
            for name in names:
                if name in seen:
                    raise ValueError(f"XMLParser field name {name!r} appears twice")
                seen.add(name)
            self._fields.append((names[0], names))
        self.answer_field = answer_field
        self._patterns = {
            name: re.compile(
                rf"<{re.escape(name)}>\s*(.*?)\s*(?:</{re.escape(name)}>|$)", re.DOTALL
            )
            for _, names in self._fields
            for name in names
        }

    def get_fields(self) -> list[str]:
        return [canonical for canonical, _ in self._fields]

    def parse(self, text: str, strip: bool = True, last: bool = False) -> SimpleNamespace:
        result: dict[str, str | None] = {}
        for _, names in self._fields:
            for name in names:
                matches = self._patterns[name].findall(text or "")
                value = (matches[-1] if last else matches[0]) if matches else None
                if value is not None and strip:
                    value = value.strip()
                result[name] = value
        return SimpleNamespace(**result)

    def parse_answer(self, completion: Messages) -> str | None:
        """The answer field from the last assistant message that has it."""
        texts = (
            [completion]
            if isinstance(completion, str)
            else [message_text(m) for m in self.get_assistant_messages(completion)]
        )
        for text in reversed(texts):
            parsed = self.parse(text, last=True)
            for canonical, names in self._fields:
                if canonical != self.answer_field and self.answer_field not in names:
                    continue
                for name in names:
                    value = getattr(parsed, name, None)
                    if value is not None:
                        return value
        return None

    def format(self, **kwargs: Any) -> str:
        """Build tagged text from field values (any alternative name is accepted)."""
        parts = []
        for canonical, names in self._fields:
            value = next((kwargs[n] for n in names if n in kwargs), None)
            if value is not None:
                parts.append(f"<{canonical}>\n{value}\n</{canonical}>")
        unknown = set(kwargs) - {n for _, names in self._fields for n in names}
        if unknown:
            raise ValueError(
                f"unknown XMLParser fields: {sorted(unknown)}; known: {self.get_fields()}"
            )
        return "\n".join(parts)

    def get_format_str(self) -> str:
        lines = []
        for canonical, names in self._fields:
            shown = canonical if len(names) == 1 else " | ".join(names)
            lines.append(
                f"<{canonical}>\n...\n</{canonical}>"
                if len(names) == 1
                else f"<[{shown}]>\n...\n</[{shown}]>"
            )
        return "\n".join(lines)

    def get_format_reward_func(self) -> Callable[..., float]:
        """Per assistant message: fraction of fields present with well-formed tags, averaged.

        A message scores 0 when its fields are out of the declared order or when text
        other than whitespace surrounds the tags.
        """

        def format_reward_func(completion: Messages, **kwargs: Any) -> float:
            texts = (
                [completion]
                if isinstance(completion, str)
                else [message_text(m) for m in self.get_assistant_messages(completion)]
            )
            if not texts:
                return 0.0
            return sum(self._format_score(t) for t in texts) / len(texts)

        return format_reward_func

    def _format_score(self, text: str) -> float:
        present = 0
        positions = []
        for _, names in self._fields:
            for name in names:
                match = re.search(rf"<{re.escape(name)}>(.*?)</{re.escape(name)}>", text, re.DOTALL)
                if match:
                    present += 1
                    positions.append(match.span())
                    break
        if not present:
            return 0.0
        if positions != sorted(positions):
            return 0.0
        outside = text[: positions[0][0]] + text[positions[-1][1] :]
        score = present / len(self._fields)
        return score if not outside.strip() else score * 0.5
