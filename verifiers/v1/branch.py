"""One root-to-leaf path of a trace's message graph, read as a training sample: the tokens,
the sampled-token mask, logprobs and advantages spread onto every token, and the sidecars
(images, MoE routing, kept-token masks) joined in token order."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from verifiers.v1.multimodal import MultiModalData
from verifiers.v1.nodes import MessageNode
from verifiers.v1.trace_parts import ModelCall
from verifiers.v1.types import KeptTokens, Messages, Usage

if TYPE_CHECKING:
    import numpy as np


class Branch(BaseModel):
    index: int
    nodes: list[MessageNode]
    calls: list[ModelCall] = Field(default_factory=list)

    @property
    def messages(self) -> Messages:
        return [node.message for node in self.nodes]

    @property
    def token_ids(self) -> list[int]:
        return [t for node in self.nodes for t in node.token_ids]

    @property
    def sampled_mask(self) -> list[bool]:
        return [m for node in self.nodes for m in node.mask]

    def spread(self, values: Callable[[MessageNode], list[float] | None]) -> list[float]:
        """A per-sampled-token node field laid onto ``token_ids``: each node's values on its
        sampled tokens in order, 0.0 elsewhere (and where a node has too few)."""
        out: list[float] = []
        for node in self.nodes:
            given = iter(values(node) or [])
            out.extend(next(given, 0.0) if sampled else 0.0 for sampled in node.mask)
        return out

    @property
    def logprobs(self) -> list[float]:
        return self.spread(lambda node: node.logprobs)

    @property
    def advantages(self) -> list[float] | None:
        """None when no node on the path was ever assigned advantages."""
        if all(node.advantages is None for node in self.nodes):
            return None
        return self.spread(lambda node: node.advantages)

    @property
    def multi_modal_data(self) -> MultiModalData | None:
        merged = MultiModalData()
        for node in self.nodes:
            mmd = node.multi_modal_data
            if mmd is None or mmd.is_empty():
                continue
            for modality, items in mmd.mm_items.items():
                merged.mm_items.setdefault(modality, []).extend(items)
            for modality, hashes in mmd.mm_hashes.items():
                merged.mm_hashes.setdefault(modality, []).extend(hashes)
        return None if merged.is_empty() else merged

    @property
    def routed_experts(self) -> np.ndarray | None:
        """uint8 ``[tokens, layers, top_k]`` aligned with ``token_ids``; None when any node
        with tokens lacks its rows."""
        nodes = [node for node in self.nodes if node.token_ids]
        if not nodes or any(node.routed_experts is None for node in nodes):
            return None
        import numpy as np  # only here: a run without routing arrays never imports it

        merged = np.concatenate([node.routed_experts for node in nodes], axis=0)
        return merged if merged.shape[0] == len(self.token_ids) else None

    @property
    def kept_tokens(self) -> KeptTokens | None:
        """Kept-set sizes per token (0 where none) and all kept ids, in token order."""
        if all(node.kept_tokens is None for node in self.nodes):
            return None
        import numpy as np  # only here: a run without kept-token masks never imports it

        ids: list[np.ndarray] = []
        counts: list[np.ndarray] = []
        for node in self.nodes:
            node_counts = np.zeros(len(node.mask), dtype=np.int32)
            if node.kept_tokens is not None and len(node.kept_tokens.counts):
                node_counts[np.nonzero(np.asarray(node.mask))[0]] = node.kept_tokens.counts
                ids.append(node.kept_tokens.ids)
            counts.append(node_counts)
        flat = np.concatenate(ids).astype(np.int32) if ids else np.zeros(0, dtype=np.int32)
        return KeptTokens(ids=flat, counts=np.concatenate(counts))

    @property
    def usage(self) -> Usage | None:
        return Usage.aggregate(c.usage for c in self.calls if c.usage is not None)

    @property
    def last_usage(self) -> Usage | None:
        return next((c.usage for c in reversed(self.calls) if c.usage is not None), None)

    @property
    def num_total_tokens(self) -> int:
        last = self.last_usage
        return last.total_tokens if last is not None else 0

    @property
    def num_output_tokens(self) -> int:
        usage = self.usage
        return usage.completion_tokens if usage is not None else 0

    @property
    def num_input_tokens(self) -> int:
        return self.num_total_tokens - self.num_output_tokens
