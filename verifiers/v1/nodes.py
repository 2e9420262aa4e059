"""One node of a trace's message graph: a message plus the tokens it adds to the sequence.

A node holds only its own delta (its leading template scaffold and its tokens; for a sampled
assistant message, the generation prompt and the completion), so concatenating the nodes of
a root-to-leaf path gives exactly the ``prompt_ids + completion_ids`` the model saw. ``mask``
marks the sampled tokens; ``logprobs`` and ``advantages`` cover those tokens only.

The array fields (images, MoE routing, kept-token masks) travel between processes as
``{"__nd__": True, dtype, shape, data: bytes}`` dicts and are left out of records on disk.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator
from pydantic.json_schema import SkipJsonSchema

from verifiers.v1.multimodal import MultiModalData, PlaceholderRange
from verifiers.v1.types import KeptTokens, Message


def encode_array(array: np.ndarray) -> dict[str, Any]:
    array = np.ascontiguousarray(array)
    return {
        "__nd__": True,
        "dtype": str(array.dtype),
        "shape": list(array.shape),
        "data": array.tobytes(),
    }


def decode_array(value: dict[str, Any]) -> np.ndarray:
    data = value["data"]
    if isinstance(data, str):  # a JSON round trip turned the bytes into text
        data = data.encode("latin-1")
    return np.frombuffer(data, dtype=np.dtype(value["dtype"])).reshape(value["shape"])


class MessageNode(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    parent: int | None = None
    """The index in ``Trace.nodes`` of the message before this one (None: a root)."""
    message: Message
    sampled: bool = False
    """True only for a message a model call produced (a prompt's fabricated assistant or tool
    message is not)."""
    timestamp: float = Field(default_factory=time.time)
    """When the node was created (at the commit of the turn that first brought it)."""
    token_ids: list[int] = Field(default_factory=list)
    mask: list[bool] = Field(default_factory=list)
    """Per token: sampled by the model (trainable)."""
    is_content: list[bool] = Field(default_factory=list)
    """Per token, when the renderer says: message body (True) or template scaffold."""
    logprobs: list[float] = Field(default_factory=list)
    """One per sampled token."""
    advantages: list[float] | None = None
    """One per sampled token, once a trainer assigns them (None: never assigned)."""
    multi_modal_data: SkipJsonSchema[MultiModalData | None] = None
    routed_experts: SkipJsonSchema[np.ndarray | None] = None
    """uint8 ``[len(token_ids), layers, top_k]``: the experts that processed each token."""
    kept_tokens: SkipJsonSchema[KeptTokens | None] = None

    @field_serializer("multi_modal_data")
    def _dump_mm(self, mmd: MultiModalData | None) -> dict[str, Any] | None:
        if mmd is None:
            return None
        return {
            "mm_hashes": {k: list(v) for k, v in mmd.mm_hashes.items()},
            "mm_placeholders": {
                k: [{"offset": p.offset, "length": p.length} for p in ranges]
                for k, ranges in mmd.mm_placeholders.items()
            },
            "mm_items": {
                k: [{name: encode_array(a) for name, a in item.items()} for item in items]
                for k, items in mmd.mm_items.items()
            },
        }

    @field_validator("multi_modal_data", mode="before")
    @classmethod
    def _load_mm(cls, value: Any) -> MultiModalData | None:
        if value is None or isinstance(value, MultiModalData):
            return value
        if not isinstance(value, dict):
            raise TypeError(f"multi_modal_data from {type(value).__name__}")
        return MultiModalData(
            mm_hashes={k: list(v) for k, v in (value.get("mm_hashes") or {}).items()},
            mm_placeholders={
                k: [PlaceholderRange(offset=p["offset"], length=p["length"]) for p in ranges]
                for k, ranges in (value.get("mm_placeholders") or {}).items()
            },
            mm_items={
                k: [{name: decode_array(a) for name, a in item.items()} for item in items]
                for k, items in (value.get("mm_items") or {}).items()
            },
        )

    @field_serializer("routed_experts")
    def _dump_routed(self, array: np.ndarray | None) -> dict[str, Any] | None:
        return None if array is None else encode_array(array)

    @field_validator("routed_experts", mode="before")
    @classmethod
    def _load_routed(cls, value: Any) -> np.ndarray | None:
        if value is None or isinstance(value, np.ndarray):
            return value
        if isinstance(value, dict) and value.get("__nd__"):
            return decode_array(value)
        raise TypeError(f"routed_experts from {type(value).__name__}")

    @field_serializer("kept_tokens")
    def _dump_kept(self, kept: KeptTokens | None) -> dict[str, Any] | None:
        if kept is None:
            return None
        return {"ids": encode_array(kept.ids), "counts": encode_array(kept.counts)}

    @field_validator("kept_tokens", mode="before")
    @classmethod
    def _load_kept(cls, value: Any) -> KeptTokens | None:
        if value is None or isinstance(value, KeptTokens):
            return value
        if isinstance(value, dict):
            return KeptTokens(ids=decode_array(value["ids"]), counts=decode_array(value["counts"]))
        raise TypeError(f"kept_tokens from {type(value).__name__}")


def leaf_ids(nodes: list[MessageNode]) -> list[int]:
    """The nodes no node follows: one per branch."""
    parents = {node.parent for node in nodes if node.parent is not None}
    return [nid for nid in range(len(nodes)) if nid not in parents]
