"""One node of a trace's message graph: a message plus the tokens it adds to the sequence.

A node holds only its own delta (its leading template scaffold and its tokens; for a sampled
assistant message, the generation prompt and the completion), so concatenating the nodes of
a root-to-leaf path gives exactly the ``prompt_ids + completion_ids`` the model saw. ``mask``
marks the sampled tokens; ``logprobs`` and ``advantages`` cover those tokens only.

The array fields (images, MoE routing, kept-token masks) travel between processes as
``{"__nd__": True, dtype, shape, data: bytes}`` dicts and are left out of records on disk.
numpy is imported only when an array is met: its 7,000 objects are a seventh of what every
full garbage collection of an eval run walks, and a run without token sidecars needs none.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator
from pydantic.json_schema import SkipJsonSchema

from verifiers.v1.multimodal import MultiModalData, PlaceholderRange
from verifiers.v1.types import KeptTokens, Message

if TYPE_CHECKING:
    import numpy as np

    NDArray = np.ndarray
else:
    NDArray = Any  # checked by ``_load_routed``, which imports numpy only for a value


def is_array(value: Any) -> bool:
    """Whether ``value`` is a numpy array (never one when numpy was not imported)."""
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, numpy.ndarray)


def encode_array(array: np.ndarray) -> dict[str, Any]:
    import numpy as np

    array = np.ascontiguousarray(array)
    return {
        "__nd__": True,
        "dtype": str(array.dtype),
        "shape": list(array.shape),
        "data": array.tobytes(),
    }


def decode_array(value: dict[str, Any]) -> np.ndarray:
    import numpy as np

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
    routed_experts: SkipJsonSchema[NDArray | None] = None
    """uint8 ``[len(token_ids), layers, top_k]``: the experts that processed each token."""
    kept_tokens: SkipJsonSchema[KeptTokens | None] = None

    @field_serializer("multi_modal_data", when_used="unless-none")  # None: no Python call
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

    @field_serializer("routed_experts", when_used="unless-none")  # None: no Python call
    def _dump_routed(self, array: np.ndarray | None) -> dict[str, Any] | None:
        return None if array is None else encode_array(array)

    @field_validator("routed_experts", mode="before")
    @classmethod
    def _load_routed(cls, value: Any) -> np.ndarray | None:
        if value is None or is_array(value):
            return value
        if isinstance(value, dict) and value.get("__nd__"):
            return decode_array(value)
        raise TypeError(f"routed_experts from {type(value).__name__}")

    @field_serializer("kept_tokens", when_used="unless-none")  # None: no Python call
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


def new_node(
    parent: int | None,
    message: Message,
    token_ids: list[int],
    mask: list[bool],
    is_content: list[bool],
    logprobs: list[float],
    sampled: bool = False,
) -> MessageNode:
    """A node of values the graph already holds typed, as ``MessageNode.model_construct``
    makes it (nothing validated or copied: a turn's token lists can be long) without its
    per-field default lookups, a visible share of a v1 rollout's CPU (every field is set
    here; the fields given count as set)."""
    node = MessageNode.__new__(MessageNode)
    fields = {  # in declaration order, which a dump follows
        "parent": parent,
        "message": message,
        "sampled": sampled,
        "timestamp": time.time(),
        "token_ids": token_ids,
        "mask": mask,
        "is_content": is_content,
        "logprobs": logprobs,
        "advantages": None,
        "multi_modal_data": None,
        "routed_experts": None,
        "kept_tokens": None,
    }
    object.__setattr__(node, "__dict__", fields)
    given = {"parent", "message", "timestamp", "token_ids", "mask", "is_content", "logprobs"}
    if sampled:
        given.add("sampled")
    object.__setattr__(node, "__pydantic_fields_set__", given)
    object.__setattr__(node, "__pydantic_extra__", None)
    object.__setattr__(node, "__pydantic_private__", None)
    return node


def leaf_ids(nodes: list[MessageNode]) -> list[int]:
    """The nodes no node follows: one per branch."""
    parents = {node.parent for node in nodes if node.parent is not None}
    return [nid for nid in range(len(nodes)) if nid not in parents]
