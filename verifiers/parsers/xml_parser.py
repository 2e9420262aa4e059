"""Parse and format XML-tagged fields (``<think>...</think><answer>...</answer>``)."""

from __future__ import annotations

import re
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from verifiers.parsers.parser import Parser, message_text
from verifiers.types import Messages

Field = str | tuple[str, ...]


class XMLParser(Parser):
    """Fields are names or tuples of alternatives, the first being canonical: ``("code", "answer")``.

    ``parse`` returns a namespace with one attribute per alternative: the text between the opening
    and closing tag (None when the pair is absent). ``answer_field`` is what ``parse_answer``
    returns.
    """

    def __init__(
        self,
        fields: list[Field],
        answer_field: str = "answer",
        extract_fn: Callable[[str], Any] = lambda x: x,
        **kwargs: Any,
    ) -> None:
        super().__init__(extract_fn=extract_fn, **kwargs)
        self.answer_field = answer_field
        self._fields: list[tuple[str, list[str]]] = []
        seen: set[str] = set()
        for spec in fields:
            if isinstance(spec, str):
                names = [spec]
            elif isinstance(spec, tuple):
                if not spec:
                    raise ValueError("Field tuple cannot be empty.")
                if not all(isinstance(n, str) for n in spec):
                    raise TypeError("All alternatives in a tuple must be strings.")
                names = list(spec)
            else:
                raise TypeError("Each field must be a string or a tuple of strings.")
            if names[0] in seen:
                raise ValueError(f"Duplicate field name: {names[0]}")
            seen.add(names[0])
            self._fields.append((names[0], names))
        if "think" in seen:
            self.logger.warning(
                "XMLParser has a 'think' field: only for models that always write "
                "<think>...</think> and whose server does not strip it (not Qwen3 or DeepSeek-R1)."
            )
        self._patterns = {
            name: re.compile(rf"<{name}>\s*(.*?)\s*</{name}>", re.DOTALL)
            for _, names in self._fields
            for name in names
        }

    def get_fields(self) -> list[str]:
        return [canonical for canonical, _ in self._fields]

    def parse(self, text: str, strip: bool = True, last: bool = False) -> SimpleNamespace:
        """Each alternative's content: the first tag pair (or the last, with ``last=True``)."""
        result: dict[str, str | None] = {}
        for _, names in self._fields:
            for name in names:
                pattern = self._patterns[name]
                match = None
                if last:
                    for match in pattern.finditer(text):  # noqa: B007 - keep the last one
                        pass
                else:
                    match = pattern.search(text)
                result[name] = (
                    None if match is None else (match.group(1).strip() if strip else match.group(1))
                )
        return SimpleNamespace(**result)

    def parse_answer(self, completion: Messages) -> str | None:
        """``answer_field`` of the text (its last occurrence), or of the last assistant message
        that has it (its first occurrence there)."""
        if isinstance(completion, str):
            return getattr(self.parse(completion, last=True), self.answer_field, None)
        for message in reversed(self.get_assistant_messages(completion)):
            value = getattr(self.parse(message_text(message)), self.answer_field, None)
            if value is not None:
                return value
        return None

    def format(self, **kwargs: Any) -> str:
        """Tagged text from field values; every field needs a value (any alternative name)."""
        parts = []
        for canonical, names in self._fields:
            value = (
                kwargs[canonical]
                if canonical in kwargs
                else next((kwargs[n] for n in names if n in kwargs), None)
            )
            if value is None:
                raise ValueError(f"Missing value for field '{canonical}' (allowed: {names})")
            parts.append(f"<{canonical}>\n{value}\n</{canonical}>")
        return "\n".join(parts)

    def get_format_str(self) -> str:
        lines = []
        for canonical, names in self._fields:
            if len(names) > 1:
                options = " | ".join(names)
                lines.append(f"<[ {options} ]>\n...\n</[ {options} ]>")
            else:
                lines.append(f"<{canonical}>\n...\n</{canonical}>")
        return "\n".join(lines)

    def get_format_reward_func(self) -> Callable[..., float]:
        """Per assistant message, averaged: 0.4 x the share of field sets present, + 0.2 when
        every found field also parses unstripped, + 0.2 when it starts with a first-field tag,
        + 0.2 when it ends with a last-field closing tag."""

        def format_reward_func(completion: Messages, **kwargs: Any) -> float:
            messages = self.get_assistant_messages(completion)
            if not messages:
                return 0.0
            return sum(self._format_score(message_text(m)) for m in messages) / len(messages)

        return format_reward_func

    def _format_score(self, content: str) -> float:
        parsed = self.parse(content)
        unstripped = self.parse(content, strip=False)
        any_field, spacing_ok = False, True
        present_sets = 0
        for _, names in self._fields:
            set_present = False
            for name in names:
                if getattr(parsed, name) is not None:
                    any_field = set_present = True
                    if getattr(unstripped, name) is None:
                        spacing_ok = False
                elif f"<{name}>" in content or f"</{name}>" in content:
                    set_present = True  # a tag without a parsable pair still counts as present
            present_sets += set_present
        stripped = content.strip()
        score = 0.4 * present_sets / len(self._fields) if any_field else 0.0
        score += 0.2 if spacing_ok else 0.0
        score += 0.2 if any(stripped.startswith(f"<{n}>") for n in self._fields[0][1]) else 0.0
        score += 0.2 if any(stripped.endswith(f"</{n}>") for n in self._fields[-1][1]) else 0.0
        return score
