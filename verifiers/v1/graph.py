"""Building a trace's message graph turn by turn, and walking it.

Each distinct message is stored once, linked to the message before it; a conversation is a
root-to-leaf path, so a rewritten history (compaction, a sub-agent) is simply another leaf
and each leaf is one training sample (``Trace.branches``).

A turn is two steps: ``prepare_turn(trace, prompt)`` finds how much of the prompt the graph
already holds (by message hash, never mutating the trace), and ``PendingTurn.commit(response)``
adds the rest of the prompt and the sampled reply. When the call returned token ids, a reused
node must also match them token for token: a prior message that renders to other tokens this
time forks a new branch instead of silently keeping stale tokens.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

import orjson

from verifiers.v1.multimodal import MultiModalData
from verifiers.v1.nodes import MessageNode, leaf_ids, new_node
from verifiers.v1.types import (
    AssistantMessage,
    KeptTokens,
    Message,
    Response,
    Tool,
    ToolMessage,
    TurnTokens,
)

if TYPE_CHECKING:
    from verifiers.v1.trace import Trace as _Trace

    Trace: TypeAlias = _Trace[Any, Any, Any]

__all__ = ["MessageNode", "PendingTurn", "leaves", "message_hash", "prepare_turn"]

# Provider items' fields that typed messages do not hold but a replay needs.
_OPAQUE_FIELDS = ("data", "encrypted_content", "phase", "signature")
_TYPED_ITEM_KINDS = ("message", "reasoning")
_CALL_ITEM_KINDS = ("custom_tool_call", "function_call")


def _canonical_arguments(arguments: str) -> str:
    """Tool-call arguments with key order and spacing normalised (as written when not JSON)."""
    try:  # orjson first (a tenth of ``json``'s CPU); what it refuses (NaN, huge ints) by json
        return orjson.dumps(orjson.loads(arguments), option=orjson.OPT_SORT_KEYS).decode()
    except (orjson.JSONDecodeError, orjson.JSONEncodeError):
        pass
    try:
        return json.dumps(json.loads(arguments), sort_keys=True, separators=(",", ":"))
    except ValueError:
        return arguments


def _canonical_bytes(fields: dict[str, Any]) -> bytes:
    """``fields`` as compact JSON with sorted keys: orjson's (hashed once per message per
    turn, ``json.dumps`` was most of a turn's graph CPU), ``json``'s for what orjson refuses.
    Equal fields give equal bytes either way, which is all a hash key needs."""
    try:
        return orjson.dumps(fields, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        text = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return text.encode()


def _provider_items(message: AssistantMessage) -> list[Any]:
    """The provider items that distinguish a message beyond its typed fields: an item the
    typed fields already hold counts only by its opaque fields; any other item whole."""
    call_ids = {call.id for call in message.tool_calls or []}
    items: list[Any] = []
    for item in message.provider_state or []:
        kind = item.get("type") or ("message" if item.get("role") == "assistant" else "")
        opaque = {k: item[k] for k in _OPAQUE_FIELDS if item.get(k) is not None}
        if kind == "message" and isinstance(item.get("content"), list):
            extra = [
                p for p in item["content"] if p.get("type") not in ("input_text", "output_text")
            ]
            if extra:
                opaque["content"] = extra
        typed = kind in _TYPED_ITEM_KINDS or (
            kind in _CALL_ITEM_KINDS and item.get("call_id") in call_ids
        )
        if typed and not opaque:
            continue
        items.append([kind, opaque if typed else item])
    return items


def message_hash(message: Message) -> str:
    """A content hash of what a message carries into a prompt: role, content (None equals
    ""), reasoning, tool calls (arguments normalised), opaque provider state, tool call id.
    Salt-free, so equal in every process and after a round trip through a record."""
    content: Any = message.content or ""
    if isinstance(content, list):
        content = [
            ["text", part.text] if part.type == "text" else ["image_url", part.image_url.url]
            for part in content
        ]
    fields: dict[str, Any] = {"role": message.role, "content": content}
    if isinstance(message, AssistantMessage):
        if message.reasoning_content is not None:
            fields["reasoning"] = message.reasoning_content
        fields["provider"] = _provider_items(message)
        fields["calls"] = [
            [c.id, c.name, _canonical_arguments(c.arguments)] for c in message.tool_calls or []
        ]
    elif isinstance(message, ToolMessage):
        fields["tool_call_id"] = message.tool_call_id
    return hashlib.blake2b(_canonical_bytes(fields), digest_size=16).hexdigest()


def _index(trace: Trace) -> dict[tuple[int | None, str], int]:
    """``(parent, message hash) -> node``, rebuilt from the nodes after a trace is read."""
    # the private dict read directly: ``trace._graph_index`` goes through pydantic's
    # ``__getattr__``, a visible share of a turn's graph CPU
    private = trace.__pydantic_private__
    index = private["_graph_index"] if private is not None else trace._graph_index
    if not index and trace.nodes:
        for nid, node in enumerate(trace.nodes):
            index[(node.parent, message_hash(node.message))] = nid
    return index


@dataclass(frozen=True)
class PendingTurn:
    """A prompt resolved against the graph, waiting for the model's reply."""

    trace: Trace
    prompt: list[Message]
    prefix_node_ids: list[int]
    """The nodes the graph already holds for the prompt's first messages."""
    path_len: int
    """How many tokens those nodes hold."""
    hashes: list[str] = field(default_factory=list)
    """The message hashes of the prompt's first messages that ``prepare_turn`` computed (the
    reused prefix and the first new message), which the commit reuses."""

    @property
    def tail_start(self) -> int:
        return len(self.prefix_node_ids)

    @property
    def tail(self) -> list[Message]:
        return self.prompt[self.tail_start :]

    def previous_token_ids(self) -> tuple[list[int], list[int]] | None:
        """``(prompt_ids, completion_ids)`` of the reused prefix when it ends in a sampled
        reply (generation prompt, then only sampled tokens), else None."""
        if not self.prefix_node_ids:
            return None
        last = self.trace.nodes[self.prefix_node_ids[-1]]
        if not last.sampled or True not in last.mask:
            return None
        first = last.mask.index(True)
        if not all(last.mask[first:]):
            return None
        prompt_ids = [
            t for nid in self.prefix_node_ids[:-1] for t in self.trace.nodes[nid].token_ids
        ]
        prompt_ids += last.token_ids[:first]
        completion_ids = last.token_ids[first:]
        return (prompt_ids, completion_ids) if prompt_ids and completion_ids else None

    def commit(self, response: Response, tools: list[Tool] | None = None) -> int:
        """Add the prompt's new messages and the reply to the graph; the reply's node id."""
        assistant_id = _commit(self, response)
        if tools:
            self.trace.tools = tools
        return assistant_id


def prepare_turn(trace: Trace, prompt: list[Message]) -> PendingTurn:
    """How much of ``prompt`` the graph already holds (the trace is not changed)."""
    index = _index(trace)
    parent: int | None = None
    prefix: list[int] = []
    hashes: list[str] = []
    path_len = 0
    for message in prompt:
        digest = message_hash(message)
        hashes.append(digest)
        nid = index.get((parent, digest))
        if nid is None:
            break
        prefix.append(nid)
        path_len += len(trace.nodes[nid].token_ids)
        parent = nid
    return PendingTurn(
        trace=trace, prompt=prompt, prefix_node_ids=prefix, path_len=path_len, hashes=hashes
    )


def _token_prefix(trace: Trace, prefix: list[int], prompt_ids: list[int]) -> tuple[list[int], int]:
    """The longest run of ``prefix`` nodes whose tokens are the start of ``prompt_ids``."""
    offset = 0
    for kept, nid in enumerate(prefix):
        tokens = trace.nodes[nid].token_ids
        if prompt_ids[offset : offset + len(tokens)] != tokens:
            return prefix[:kept], offset
        offset += len(tokens)
    return prefix, offset


def _commit(turn: PendingTurn, response: Response) -> int:
    trace, tokens = turn.trace, response.tokens
    prompt_ids = tokens.prompt_ids if tokens else []
    spans = tokens.message_spans if tokens else None
    is_content = tokens.is_content if tokens else None
    if is_content is not None and len(is_content) != len(prompt_ids):
        is_content = None
    prefix, path_len = turn.prefix_node_ids, turn.path_len
    if tokens is not None and prefix:
        prefix, path_len = _token_prefix(trace, prefix, prompt_ids)
    index = _index(trace)
    parent = prefix[-1] if prefix else None
    cursor = path_len
    new_nodes: list[int] = []
    hashes = turn.hashes
    for i in range(len(prefix), len(turn.prompt)):
        message = turn.prompt[i]
        span = spans[i] if spans and i < len(spans) else None
        end = span[1] if span else cursor
        node_tokens = prompt_ids[cursor:end]
        trace.nodes.append(
            new_node(
                parent,
                message,
                token_ids=node_tokens,
                mask=[False] * len(node_tokens),
                is_content=is_content[cursor:end] if is_content is not None else [],
                logprobs=[],
            )
        )
        parent = len(trace.nodes) - 1
        digest = hashes[i] if i < len(hashes) else message_hash(message)
        index[(trace.nodes[parent].parent, digest)] = parent
        new_nodes.append(parent)
        cursor = end
    generation_prompt = prompt_ids[cursor:]
    completion = tokens.completion_ids if tokens else []
    trace.nodes.append(
        new_node(
            parent,
            response.message,
            token_ids=[*generation_prompt, *completion],
            mask=[False] * len(generation_prompt) + [True] * len(completion),
            is_content=[False] * len(generation_prompt) + [True] * len(completion)
            if is_content is not None
            else [],
            logprobs=tokens.completion_logprobs if tokens else [],
            sampled=True,
        )
    )
    assistant_id = len(trace.nodes) - 1
    index[(parent, message_hash(response.message))] = assistant_id
    new_nodes.append(assistant_id)
    if tokens is not None:
        _attach_sidecars(trace, turn, tokens, prefix, new_nodes, path_len)
    return assistant_id


def _attach_sidecars(
    trace: Trace,
    turn: PendingTurn,
    tokens: TurnTokens,
    prefix: list[int],
    new_nodes: list[int],
    path_len: int,
) -> None:
    if tokens.multi_modal_data is not None and not tokens.multi_modal_data.is_empty():
        path = list(zip(prefix, turn.prompt, strict=False)) + [
            (nid, trace.nodes[nid].message) for nid in new_nodes[:-1]
        ]
        _attach_images(trace, path, len(prefix), tokens.multi_modal_data)
    if tokens.routed_experts is not None:
        _attach_routing(trace, new_nodes, path_len, tokens.routed_experts)
    if tokens.kept_tokens is not None:
        _attach_kept(trace, new_nodes[-1], tokens.kept_tokens)


def _attach_images(
    trace: Trace, path: list[tuple[int, Message]], reused: int, mmd: MultiModalData
) -> None:
    """Each new image's renderer item onto the node whose message brought it. Items come in
    prompt order, so the reused prefix's images are counted and skipped."""
    seen = 0
    for position, (nid, message) in enumerate(path):
        if not isinstance(message.content, list):
            continue
        items: list[dict[str, Any]] = []
        hashes: list[str] = []
        for part in message.content:
            if part.type != "image_url":
                continue
            k, seen = seen, seen + 1
            if position < reused:
                continue
            if k < len(mmd.mm_items.get("image", [])):
                items.append(mmd.mm_items["image"][k])
            if k < len(mmd.mm_hashes.get("image", [])):
                hashes.append(mmd.mm_hashes["image"][k])
        if items:
            trace.nodes[nid].multi_modal_data = MultiModalData(
                mm_items={"image": items}, mm_hashes={"image": hashes} if hashes else {}
            )


def _attach_routing(trace: Trace, new_nodes: list[int], path_len: int, payload: Any) -> None:
    """Each new node's rows of the turn's MoE routing array (which starts at prompt position
    ``start``). A node whose rows are not all there is left without; the engine's missing
    last position (no forward pass follows it) is filled with the row before it."""
    import numpy as np  # only for a turn that carries routing (see ``verifiers.v1.nodes``)

    array = np.frombuffer(
        base64.b64decode(payload["data"]), dtype=np.dtype(payload.get("dtype", "uint8"))
    ).reshape(payload["shape"])
    offset = path_len - int(payload.get("start") or 0)
    needed = offset + sum(len(trace.nodes[nid].token_ids) for nid in new_nodes)
    for nid in new_nodes:
        count = len(trace.nodes[nid].token_ids)
        end = offset + count
        if count and offset >= 0 and end <= array.shape[0]:
            trace.nodes[nid].routed_experts = array[offset:end].copy()
        elif count and array.shape[0] and offset >= 0 and end == needed == array.shape[0] + 1:
            trace.nodes[nid].routed_experts = np.concatenate([array[offset:], array[-1:]])
        offset = end


def _attach_kept(trace: Trace, assistant_id: int, payload: KeptTokens) -> None:
    """The turn's kept-token masks onto its reply, when they match its sampled tokens."""
    import numpy as np  # only for a turn that carries kept tokens

    counts = np.frombuffer(base64.b64decode(payload.counts), dtype=np.int32)
    ids = np.frombuffer(base64.b64decode(payload.ids), dtype=np.int32)
    node = trace.nodes[assistant_id]
    if len(counts) == sum(node.mask) and int(counts.sum()) == len(ids):
        node.kept_tokens = KeptTokens(ids=ids.copy(), counts=counts.copy())


def leaves(trace: Trace) -> list[int]:
    """The nodes no node follows: one per branch."""
    return leaf_ids(trace.nodes)
