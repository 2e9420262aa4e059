"""Prompts' prefills kept for later requests of the same prompt (vf-serve's engine).

GRPO asks for each prompt ``rollouts_per_example`` times, in requests that do not arrive
together; each prefill after the first is then a copy of a kept one instead of a forward. Kept
per client on a server without a key (``CacheKey``): another client's request of the same
prompt computes it anew. Kept
until the weights change, within a byte budget, least recently used out first.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import torch

Prefilled = tuple[list[tuple[torch.Tensor, torch.Tensor]], torch.Tensor]
"""A prompt's prefill: per layer (keys, values) ``[1, H, n, D]``, and its last logits ``[V]``."""
CacheKey = tuple[str | None, tuple[int, ...]]
"""Whose prefill (the client's scope, ``None`` for a server's trusted callers) and its prompt:
a prefill served from the cache is faster, so one kept for everyone would tell any client which
prompts another one sent."""


class PromptCache:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict[CacheKey, Prefilled] = OrderedDict()

    def get(self, prompt: CacheKey) -> Prefilled | None:
        entry = self._entries.get(prompt)
        if entry is not None:
            self._entries.move_to_end(prompt)
        return entry

    def put(self, prompt: CacheKey, prefilled: Prefilled) -> None:
        if prompt in self._entries or _size(prefilled) > self.max_bytes:
            return
        self._entries[prompt] = prefilled
        self.bytes += _size(prefilled)
        while self.bytes > self.max_bytes:
            _, oldest = self._entries.popitem(last=False)
            self.bytes -= _size(oldest)

    def clear(self) -> None:
        self._entries.clear()
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._entries)


def _size(prefilled: Prefilled) -> int:
    kv, logits = prefilled
    return logits.nbytes + sum(k.nbytes + v.nbytes for k, v in kv)


def unpadded(cache: Any, logits: torch.Tensor, prompts: list[tuple[int, ...]]) -> list[Prefilled]:
    """Each row of a left-padded prefill (``cache``'s layers, ``logits`` ``[B, V]``) as its
    prompt's own prefill, without the padding (copies: the batch's cache can go)."""
    width = cache.layers[0].keys.shape[-2]
    out = []
    for i, prompt in enumerate(prompts):
        start = width - len(prompt)
        kv = [
            (layer.keys[i : i + 1, :, start:].clone(), layer.values[i : i + 1, :, start:].clone())
            for layer in cache.layers
        ]
        out.append((kv, logits[i].clone()))
    return out


def batched(
    entries: list[Prefilled], width: int
) -> tuple[list[tuple[torch.Tensor, torch.Tensor]], torch.Tensor]:
    """The prefills as one left-padded batch: per layer (keys, values) ``[B, H, width, D]``,
    and the last logits ``[B, V]``."""

    def stacked(layer: int, part: int) -> torch.Tensor:
        return torch.cat([_left_pad(kv[layer][part], width) for kv, _ in entries], dim=0)

    layers = [(stacked(layer, 0), stacked(layer, 1)) for layer in range(len(entries[0][0]))]
    return layers, torch.stack([logits for _, logits in entries])


def _left_pad(tensor: torch.Tensor, width: int) -> torch.Tensor:
    missing = width - tensor.shape[-2]
    if missing <= 0:
        return tensor
    pad = tensor.new_zeros((*tensor.shape[:-2], missing, tensor.shape[-1]))
    return torch.cat([pad, tensor], dim=-2)
