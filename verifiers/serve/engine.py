"""Continuous batching for a Hugging Face causal LM on CPU (or one GPU).

One engine thread owns the model. Each loop iteration admits waiting requests (one batched
prefill, left-padded), merges their KV caches into the running batch, and runs one forward pass
for every running sequence. Finished sequences leave the batch at once, so a short request never
waits for a long one, and a new request waits at most one decoding step to join.

Positions come from the attention mask (``cumsum - 1``), so left padding and merged caches of
different lengths rotate keys exactly as an unpadded run would.

A prompt's prefill (its KV cache and last logits) is kept for its client's later requests of it
until the weights change (``verifiers.serve.prompt_cache``): each distinct prompt is computed once.
"""

from __future__ import annotations

import inspect
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from verifiers.serve.prompt_cache import CacheKey, Prefilled, PromptCache, batched, unpadded
from verifiers.serve.protocol import SamplingParams

__all__ = ["Engine", "SamplingParams", "Sequence"]
logger = logging.getLogger("verifiers.serve")


@dataclass
class Sequence:
    """One generation request inside the engine. ``emit`` is called from the engine thread."""

    prompt_ids: list[int]
    params: SamplingParams
    emit: Callable[[str, Any], None]
    id: int = field(default_factory=itertools.count().__next__)
    out_ids: list[int] = field(default_factory=list)
    out_logprobs: list[float] = field(default_factory=list)
    out_top: list[list[tuple[int, float]]] = field(default_factory=list)
    generator: torch.Generator | None = None
    cancelled: bool = False
    finish_reason: str | None = None
    scope: str | None = None  # whose kept prefills it may use: its client's (prompt_cache)


class Engine:
    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        max_batch_size: int = 32,
        max_model_len: int | None = None,
        prompt_cache_bytes: int = 256 * 2**20,
    ) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        config = model.config
        self.max_model_len = max_model_len or int(getattr(config, "max_position_embeddings", 2048))
        # token ids a request may contain: rows of the input embedding
        self.vocab_size = int(model.get_input_embeddings().weight.shape[0])
        eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        if tokenizer.eos_token_id is not None:
            eos_ids.add(tokenizer.eos_token_id)
        self.eos_ids = eos_ids
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.device = next(model.parameters()).device
        # transformers 5 renamed the forward's ``past_key_values`` argument to ``cache``.
        params = inspect.signature(type(model).forward).parameters
        self._cache_arg = "cache" if "cache" in params else "past_key_values"
        self.waiting: queue.Queue[Sequence | None] = queue.Queue()  # None: wake up to stop
        self.running: list[Sequence] = []
        self._cache: Any = None
        self._mask: torch.Tensor | None = None
        self._last: torch.Tensor | None = None
        self.prompts = PromptCache(prompt_cache_bytes)  # prefills kept for the same prompt
        self._stop = threading.Event()
        self._lock = threading.Lock()  # held during forward passes; weight updates take it too
        self.steps = 0
        self._thread = threading.Thread(target=self._loop, name="vf-engine", daemon=True)
        self._thread.start()

    # --- public, thread-safe -----------------------------------------------------------------------
    def submit(self, seq: Sequence) -> Sequence:
        if seq.params.seed is not None:
            seq.generator = torch.Generator(device="cpu").manual_seed(int(seq.params.seed))
        self.waiting.put(seq)
        return seq

    def shutdown(self) -> None:
        self._stop.set()
        self.waiting.put(None)
        self._thread.join(timeout=10)

    def swap_weights(self, state_dict: dict[str, torch.Tensor]) -> None:
        """Load new weights between decoding steps (running sequences continue on them)."""
        with self._lock, torch.no_grad():
            self.model.load_state_dict(state_dict, strict=False)
            self.prompts.clear()  # the kept prefills are the old weights'

    # --- engine thread -----------------------------------------------------------------------------
    def _loop(self) -> None:
        with torch.inference_mode():
            self._run()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._admit(block=not self.running)
                if self.running:
                    with self._lock:
                        self._decode_step()
            except Exception as exc:  # never leave callers hanging: fail every live request
                logger.exception("engine step failed")
                for seq in [*self.running, *self._drain()]:
                    seq.emit("error", f"{type(exc).__name__}: {exc}")
                self.running, self._cache, self._mask, self._last = [], None, None, None

    def _drain(self) -> list[Sequence]:
        out: list[Sequence] = []
        while True:
            try:
                seq = self.waiting.get_nowait()
            except queue.Empty:
                return out
            if seq is not None:
                out.append(seq)

    def _admit(self, block: bool) -> None:
        new: list[Sequence] = []
        if block:
            seq = self.waiting.get()
            if seq is None:
                return
            new.append(seq)
            time.sleep(0.002)  # let requests that arrive together share one prefill
        while len(self.running) + len(new) < self.max_batch_size:
            try:
                seq = self.waiting.get_nowait()
            except queue.Empty:
                break
            if seq is not None:
                new.append(seq)
        for seq in new:
            if seq.cancelled:  # its client went away while it waited: it ends here
                seq.emit("done", "cancelled")
        new = [s for s in new if not s.cancelled]
        if not new:
            return
        with self._lock:
            self._prefill(new)

    def _prefill(self, seqs: list[Sequence]) -> None:
        """Prefill the prompts not kept from before (each distinct one once), then join every
        sequence to the running batch from its prompt's prefill."""
        from transformers import DynamicCache

        keys: list[CacheKey] = [(s.scope, tuple(s.prompt_ids)) for s in seqs]
        kept = {key: self.prompts.get(key) for key in keys}
        prefilled = {key: entry for key, entry in kept.items() if entry is not None}
        fresh = list(dict.fromkeys(k for k in keys if k not in prefilled))
        if fresh:
            prefilled.update(self._compute_prefill(fresh))
        length = max(len(s.prompt_ids) for s in seqs)
        mask = torch.zeros((len(seqs), length), dtype=torch.long, device=self.device)
        for i, seq in enumerate(seqs):
            mask[i, length - len(seq.prompt_ids) :] = 1
        layers, logits = batched([prefilled[k] for k in keys], length)
        cache = DynamicCache(ddp_cache_data=layers, config=self.model.config)
        self._merge(seqs, cache, mask)
        self._sample_and_advance(logits, first_index=len(self.running) - len(seqs))

    def _compute_prefill(self, keys: list[CacheKey]) -> dict[CacheKey, Prefilled]:
        """One batched forward of the prompts (left-padded): each one's unpadded prefill, kept."""
        from transformers import DynamicCache

        prompts = [prompt for _, prompt in keys]
        length = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), length), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), length), dtype=torch.long)
        for i, prompt in enumerate(prompts):
            ids[i, length - len(prompt) :] = torch.tensor(prompt, dtype=torch.long)
            mask[i, length - len(prompt) :] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        cache = DynamicCache(config=self.model.config)
        logits, cache = self._forward(
            ids.to(self.device), mask.to(self.device), positions.to(self.device), cache
        )
        out = dict(zip(keys, unpadded(cache, logits, prompts), strict=True))
        for key, prefilled in out.items():
            self.prompts.put(key, prefilled)
        return out

    def _merge(self, seqs: list[Sequence], cache: Any, mask: torch.Tensor) -> None:
        if not self.running:
            self.running, self._cache, self._mask = list(seqs), cache, mask
            self._last = torch.zeros((len(seqs), 1), dtype=torch.long, device=self.device)
            return
        from transformers import DynamicCache

        old_mask, last = self._batch()
        old_len, new_len = old_mask.shape[1], mask.shape[1]
        width = max(old_len, new_len)
        layers = []
        for old_layer, new_layer in zip(self._cache.layers, cache.layers, strict=True):
            keys = torch.cat(
                [_left_pad(old_layer.keys, width), _left_pad(new_layer.keys, width)], dim=0
            )
            values = torch.cat(
                [_left_pad(old_layer.values, width), _left_pad(new_layer.values, width)], dim=0
            )
            layers.append((keys, values))
        self._cache = DynamicCache(ddp_cache_data=layers, config=self.model.config)
        self._mask = torch.cat(
            [_left_pad_mask(old_mask, width), _left_pad_mask(mask, width)], dim=0
        )
        self._last = torch.cat(
            [last, torch.zeros((len(seqs), 1), dtype=torch.long, device=self.device)], dim=0
        )
        self.running.extend(seqs)

    def _batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The running batch's attention mask and last tokens (set while anything runs)."""
        assert self._mask is not None and self._last is not None, "no running batch"
        return self._mask, self._last

    def _decode_step(self) -> None:
        old_mask, last = self._batch()
        mask = torch.cat(
            [old_mask, torch.ones((len(self.running), 1), dtype=torch.long, device=self.device)],
            dim=1,
        )
        self._mask = mask
        positions = mask.sum(-1, keepdim=True) - 1
        logits, self._cache = self._forward(last, mask, positions, self._cache)
        self.steps += 1
        self._sample_and_advance(logits, first_index=0)

    def _forward(
        self, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor, cache: Any
    ) -> tuple[torch.Tensor, Any]:
        """Last-position logits (float32) and the updated KV cache."""
        out = self.model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            use_cache=True,
            logits_to_keep=1,
            **{self._cache_arg: cache},
        )
        new_cache = getattr(out, "cache", None) or out.past_key_values
        return out.logits[:, -1, :].float(), new_cache

    def _sample_and_advance(self, logits: torch.Tensor, first_index: int) -> None:
        """Sample one token for rows ``first_index..``, emit it, and drop finished rows."""
        rows = self.running[first_index:]
        tokens, logprobs, tops = sample(
            logits, [s.params for s in rows], [s.generator for s in rows]
        )
        _, last = self._batch()
        last[first_index:, 0] = tokens
        finished = []
        for offset, seq in enumerate(rows):
            token = int(tokens[offset])
            seq.out_ids.append(token)
            seq.out_logprobs.append(float(logprobs[offset]))
            if tops is not None:
                seq.out_top.append(tops[offset])
            reason = self._finish_reason(seq, token)
            seq.emit(
                "token",
                (token, float(logprobs[offset]), tops[offset] if tops is not None else None),
            )
            if reason is not None:
                seq.finish_reason = reason
                seq.emit("done", reason)
                finished.append(first_index + offset)
        if finished:
            self._drop(finished)

    def _finish_reason(self, seq: Sequence, token: int) -> str | None:
        if seq.cancelled:
            return "cancelled"
        if token in self.eos_ids and not seq.params.ignore_eos:
            return "stop"
        if len(seq.out_ids) >= seq.params.max_tokens:
            return "length"
        if len(seq.prompt_ids) + len(seq.out_ids) >= self.max_model_len:
            return "length"
        if seq.params.stop:
            tail = self.tokenizer.decode(seq.out_ids[-32:], skip_special_tokens=True)
            if any(s in tail for s in seq.params.stop):
                return "stop"
        return None

    def _drop(self, indices: list[int]) -> None:
        keep = [i for i in range(len(self.running)) if i not in set(indices)]
        if not keep:
            self.running, self._cache, self._mask, self._last = [], None, None, None
            return
        index = torch.tensor(keep, dtype=torch.long, device=self.device)
        self._cache.batch_select_indices(index)
        mask, last = self._batch()
        self._mask, self._last = mask[index], last[index]
        self.running = [self.running[i] for i in keep]
        # columns that are padding for every remaining row cost compute for nothing
        first_real = int(self._mask.argmax(dim=1).min())
        if first_real > 0:
            self._mask = self._mask[:, first_real:]
            for layer in self._cache.layers:
                layer.keys = layer.keys[:, :, first_real:, :]
                layer.values = layer.values[:, :, first_real:, :]


GREEDY_BELOW = 1e-5
"""Temperatures under this sample greedily, as vLLM's do: dividing by a smaller one (1e-40 passes
the API's range) overflows float32 logits to inf and NaN, which fails every request sharing the
batch. Above it the division stays finite for any logits a model makes."""


def sampling_temperature(p: SamplingParams) -> float:
    """The temperature ``sample`` divides by; 0 means greedy."""
    return p.temperature if p.temperature >= GREEDY_BELOW else 0.0


def sample(
    logits: torch.Tensor, params: list[SamplingParams], generators: list[torch.Generator | None]
) -> tuple[torch.Tensor, torch.Tensor, list[list[tuple[int, float]]] | None]:
    """One token per row. Greedy at temperature 0 (or under ``GREEDY_BELOW``); otherwise
    temperature, top-k, top-p, then a draw.

    Returned logprobs are of the temperature-scaled distribution the token was drawn from
    (before top-k/top-p truncation), which is what a trainer recomputes.
    """
    temperatures = [sampling_temperature(p) for p in params]
    temps = torch.tensor([t if t > 0 else 1.0 for t in temperatures], dtype=logits.dtype).unsqueeze(
        1
    )
    scaled = logits / temps
    logprobs_all = torch.log_softmax(scaled, dim=-1)
    filtered = scaled.clone()
    for i, p in enumerate(params):
        if p.top_k and p.top_k > 0:
            kth = torch.topk(filtered[i], min(p.top_k, filtered.shape[-1])).values[-1]
            filtered[i][filtered[i] < kth] = float("-inf")
        if 0 < p.top_p < 1:
            sorted_logits, order = torch.sort(filtered[i], descending=True)
            cumulative = torch.softmax(sorted_logits, dim=-1).cumsum(-1)
            drop = cumulative - torch.softmax(sorted_logits, dim=-1) > p.top_p
            filtered[i][order[drop]] = float("-inf")
    tokens = torch.empty(len(params), dtype=torch.long)
    greedy = [i for i, t in enumerate(temperatures) if t <= 0]
    if greedy:
        tokens[greedy] = torch.argmax(logits[greedy], dim=-1)
    for i, t in enumerate(temperatures):
        if t > 0:
            probs = torch.softmax(filtered[i], dim=-1)
            tokens[i] = torch.multinomial(probs, 1, generator=generators[i])[0]
    chosen = logprobs_all.gather(1, tokens.unsqueeze(1)).squeeze(1)
    tops = None
    k = max((p.top_logprobs for p in params), default=0)
    if k > 0:
        values, ids = torch.topk(logprobs_all, k, dim=-1)
        tops = [
            [(int(t), float(v)) for t, v in zip(ids[i], values[i], strict=True)][
                : params[i].top_logprobs
            ]
            for i in range(len(params))
        ]
    return tokens, chosen, tops


def _left_pad(tensor: torch.Tensor, width: int) -> torch.Tensor:
    missing = width - tensor.shape[-2]
    if missing <= 0:
        return tensor
    pad = torch.zeros(
        (*tensor.shape[:-2], missing, tensor.shape[-1]), dtype=tensor.dtype, device=tensor.device
    )
    return torch.cat([pad, tensor], dim=-2)


def _left_pad_mask(mask: torch.Tensor, width: int) -> torch.Tensor:
    missing = width - mask.shape[1]
    if missing <= 0:
        return mask
    return torch.cat(
        [torch.zeros((mask.shape[0], missing), dtype=mask.dtype, device=mask.device), mask], dim=1
    )
