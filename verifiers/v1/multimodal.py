"""The renderer's multimodal sidecar (image tensors, their hashes and placeholder ranges).

Upstream takes these types from the ``renderers`` package of its training stack; the v1 graph
only carries them from a model call to the nodes that introduced each image and on to a
trainer, so this SDK declares the few fields it moves instead of depending on that stack.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class PlaceholderRange:
    offset: int
    length: int


@dataclass
class MultiModalData:
    """Per modality (``"image"``): the items (dicts of arrays), their hashes and placements."""

    mm_items: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    mm_hashes: dict[str, list[str]] = field(default_factory=dict)
    mm_placeholders: dict[str, list[PlaceholderRange]] = field(default_factory=dict)

    def is_empty(self) -> bool:
        return not any(self.mm_items.values())
