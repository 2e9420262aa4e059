"""The environment server's wire protocol (version 1): msgpack frames over ZeroMQ.

Why ZeroMQ + msgpack rather than HTTP: a group's request and its outputs are one message each
way with no per-request connection setup or header parsing, a DEALER socket multiplexes
thousands of in-flight requests over one connection with replies in any order, cancelling is
one frame, and it is the transport verifiers 0.1.10+ uses, so callers written for that env
server work with this one.

Frames. A caller's DEALER sends ``[request_id, payload]``; the server's ROUTER answers
``[request_id, response]``. ``payload`` is a msgpack map (one of the requests below, keyed by
``request_type``); ``b"ping"`` is a health probe (answered ``{"success": true}``); an empty
payload cancels ``request_id``. Replies to a request come in any order.

Requests are the 0.1.10+ ones (``run_rollout``, ``run_group``, ``health``) with optional fields
this SDK adds: ``members`` (each rollout's index and sampling args, so seeds match an
in-process run), ``score``, ``timeout``, ``output`` (``"rollout_output"``: 0.1.11+'s rows, the
default; ``"state"``: this SDK's full rollout snapshots, trajectory tokens included),
``step_slices`` (in such snapshots, a step's messages as bounds in the rollout's conversation)
and ``protocol_version``. Unknown fields are ignored, so either side may be newer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import msgpack
from pydantic import BaseModel, ConfigDict, Field

from verifiers.clients.config import ClientConfig
from verifiers.errors import VFError
from verifiers.workers.stepped_validation import STEP_ENTRIES, Turns, validate_in_steps

PROTOCOL_VERSION = 1
HEALTH_PING = b"ping"
HEALTH_OK: dict[str, Any] = {"success": True, "error": None, "protocol_version": PROTOCOL_VERSION}


class Member(BaseModel):
    """One rollout of a group: its index within the group and its sampling args."""

    rollout_index: int
    sampling_args: dict[str, Any] = Field(default_factory=dict)


class WireModel(BaseModel):
    model_config = ConfigDict(extra="ignore", arbitrary_types_allowed=True)

    protocol_version: int = PROTOCOL_VERSION


class HealthRequest(WireModel):
    request_type: Literal["health"] = "health"


MAX_TIMEOUT_S = 7 * 24 * 3600.0
"""A group's timeout is positive and at most a week: a negative one timed out at once, and the
pool killed the worker, failing other callers' groups running beside it."""
MAX_RETRIES = 10


class RunGroupRequest(WireModel):
    """Generate and score one group (each of ``group_inputs`` is one rollout's row)."""

    request_type: Literal["run_group"] = "run_group"
    group_inputs: list[dict[str, Any]]
    client_config: ClientConfig
    model: str
    sampling_args: dict[str, Any] = Field(default_factory=dict)
    max_retries: int = Field(0, ge=0, le=MAX_RETRIES)
    state_columns: list[str] | None = None
    members: list[Member] | None = None
    score: bool = True
    timeout: float | None = Field(None, gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False)
    output: Literal["rollout_output", "state"] = "rollout_output"
    step_slices: bool = False
    """With ``output: "state"``: a trajectory step's messages that are the rollout's own are
    sent as their bounds in its conversation, not as copies (``snapshot.snapshot``); a server
    that does not know the field sends copies, which a caller reads as well."""


class RunRolloutRequest(WireModel):
    """One rollout (a group of one), answered with a single output."""

    request_type: Literal["run_rollout"] = "run_rollout"
    input: dict[str, Any]
    client_config: ClientConfig
    model: str
    sampling_args: dict[str, Any] = Field(default_factory=dict)
    max_retries: int = Field(0, ge=0, le=MAX_RETRIES)
    state_columns: list[str] | None = None
    timeout: float | None = Field(None, gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False)
    output: Literal["rollout_output", "state"] = "rollout_output"

    def as_group(self) -> RunGroupRequest:
        return RunGroupRequest(
            group_inputs=[self.input],
            client_config=self.client_config,
            model=self.model,
            sampling_args=self.sampling_args,
            max_retries=self.max_retries,
            state_columns=self.state_columns,
            timeout=self.timeout,
            output=self.output,
        )


CULPRIT = "culprit"
"""A failed response's ``fault``: the group killed the worker running it alone (or hung or
outgrew it) past its retries. It may be the environment on that machine rather than the group:
a caller with other servers runs it once more on one of them before recording it."""
UNAVAILABLE = "unavailable"
"""A failed response's ``fault``: the server's worker pool gave up (its workers died again and
again) and runs no group now; a caller sends its groups elsewhere."""


class Response(WireModel):
    """``success`` false means the request itself failed (``error`` says why); a rollout that
    failed is a successful response whose output carries the rollout's error. ``fault`` says
    what kind of failure, for a caller that can act on it (``CULPRIT``, ``UNAVAILABLE``; a
    string, so a newer server's kinds read as unknown, not unreadable)."""

    success: bool = True
    error: str | None = None
    fault: str | None = None
    outputs: list[dict[str, Any]] | None = None
    output: dict[str, Any] | None = None


REQUESTS: dict[str, type[RunGroupRequest | RunRolloutRequest | HealthRequest]] = {
    "run_group": RunGroupRequest,
    "run_rollout": RunRolloutRequest,
    "health": HealthRequest,
}


def request_model(data: Any) -> type[RunGroupRequest | RunRolloutRequest | HealthRequest]:
    kind = data.get("request_type") if isinstance(data, dict) else None
    model = REQUESTS.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise ValueError(
            f"unknown request_type {kind!r} (expected run_group, run_rollout or health)"
        )
    return model


def parse_request(data: dict[str, Any]) -> RunGroupRequest | RunRolloutRequest | HealthRequest:
    return request_model(data).model_validate(data)


async def parse_request_in_steps(
    data: dict[str, Any], entries: int | None = None
) -> RunGroupRequest | RunRolloutRequest | HealthRequest:
    """``parse_request`` with the event loop free between slices of a large request's
    containers (``stepped_validation``); one with at most ``STEP_ENTRIES`` list items and map
    entries in all (``entries``, counted while it was decoded) is validated at once."""
    model = request_model(data)
    if entries is not None and entries <= STEP_ENTRIES:
        return model.model_validate(data)
    request = await validate_in_steps(model, data)
    assert isinstance(request, model)
    return request


async def read_request(payload: bytes) -> RunGroupRequest | RunRolloutRequest | HealthRequest:
    """A request frame a peer sent, decoded and validated in steps (what a server does); a
    small one (``SMALL_FRAME``) at once, with no per-container hook."""
    if len(payload) <= SMALL_FRAME:
        return parse_request(unpack_small(payload))
    if len(payload) > STEPPED_FRAME:  # its entries uncounted: stepped validation looks itself
        return await parse_request_in_steps(await unpack_bounded_in_steps(payload))
    seen = [0]
    data = unpack_bounded(payload, seen)
    return await parse_request_in_steps(data, seen[0])


def _default(obj: Any) -> Any:
    if hasattr(obj, "model_dump"):
        return obj.model_dump(exclude_none=True)
    if isinstance(obj, set | frozenset | tuple):
        return list(obj)
    if hasattr(obj, "item"):  # numpy scalars
        return obj.item()
    raise TypeError(f"cannot send a {type(obj).__name__} to an environment worker")


def pack(message: Any) -> bytes:
    if type(message) is Response:
        # a reply's fields as they are, when msgpack knows every value in them (a worker's
        # outputs are plain data): pydantic's dump copied each output first, ~40% of packing
        # a reply; the same bytes (its python-mode dump leaves such values as they are)
        try:
            return msgpack.packb(dict(message), use_bin_type=True)
        except TypeError:
            pass  # a value only the dump below turns into data (a model, a set)
    if isinstance(message, BaseModel):
        message = message.model_dump(mode="python")
    return msgpack.packb(message, default=_default, use_bin_type=True)


def unpack(data: bytes) -> Any:
    return msgpack.unpackb(data, raw=False, strict_map_key=False)


DRAIN = 32
"""Messages read in one turn of the event loop at most (``receive_batch``)."""


async def receive_batch(sock: Any, plain: Any, limit: int = DRAIN) -> list[list[bytes]]:
    """The next message on the async ZeroMQ socket ``sock`` (waited for), then those already
    queued behind it, up to ``limit`` in all, read from ``plain`` (``zmq.Socket.shadow`` of the
    same socket) without a wait. The async socket's ``recv`` costs each message a future, a
    poll of the socket's events and a turn of the loop (~30 us of a caller's ~0.3 ms a
    rollout); a burst of replies or requests pays that once."""
    import zmq

    batch = [await sock.recv_multipart()]
    while len(batch) < limit:
        try:
            batch.append(plain.recv_multipart(zmq.NOBLOCK))
        except zmq.Again:
            break
    return batch


DECODED_PER_WIRE_BYTE = 16
"""What the arrays and maps of a request may take in memory once decoded, per byte the request
took on the wire. A frame of empty maps once decoded into ~145x its size (an empty map is one
byte on the wire and a 64-byte dict), ~9 GiB at the default 64 MiB cap; real requests (rows of
prompt text) take 1-3x."""
DECODED_FLOOR = 1 << 20
"""Any frame may decode into this much: bounding tiny requests buys nothing."""
LIST_BYTES, MAP_BYTES, SLOT_BYTES, ENTRY_BYTES = 56, 64, 8, 40
"""What CPython takes for an empty list and dict, and per list slot and dict entry (about)."""


class DecodeCostError(VFError, ValueError):
    """A frame that would decode into more memory than its size allows."""


def unpack_bounded(data: bytes, seen: list[int] | None = None) -> Any:
    """``unpack`` a frame a peer sent, refused (``DecodeCostError``) as soon as its arrays and
    maps pass ``DECODED_PER_WIRE_BYTE`` times its size (or ``DECODED_FLOOR``): each is charged
    as msgpack completes it, in constant time, so a frame built to expand stops while it is
    decoded, having cost about that bound. Numbers and strings are not charged: in one array
    they take at most what CPython's smallest objects do per wire byte (~20-36x for one-byte
    negative numbers and two-byte strings), and many arrays of them are charged as arrays.
    Extension types, which no request carries, are refused: each became a Python-made object
    (~27x its wire size, ~1 us each, so 64 MiB of them held the event loop ~40 s and took 2 GB);
    a timestamp (extension -1, which msgpack decodes itself) is read as the float it stands for."""
    options, entries = _bounded(len(data))
    try:
        return msgpack.unpackb(data, **options)
    finally:
        if seen is not None:
            seen[0] += entries()


SMALL_FRAME = STEP_ENTRIES
"""A frame of at most this many bytes cannot pass the decode bound: it holds at most that many
containers and entries (each takes a byte at least), charged at most ``MAP_BYTES`` +
``ENTRY_BYTES`` each, ~416 KiB in all, under ``DECODED_FLOOR``; nor more entries than
``STEP_ENTRIES``, so it is validated at once. Such frames (most requests: a group of a few rows)
are decoded without the charging hooks, a Python call per list and map, which cost a small
request's decode 2x (~10 us of ~0.5 ms of server CPU per group)."""


def unpack_small(data: bytes) -> Any:
    """``unpack_bounded`` of a frame of at most ``SMALL_FRAME`` bytes (extension types refused
    as there), with nothing to charge."""
    if len(data) > SMALL_FRAME:
        raise ValueError(f"a {len(data)}-byte frame is not small: unpack_bounded it")
    return msgpack.unpackb(
        data, raw=False, strict_map_key=False, ext_hook=_refuse_extension, timestamp=1
    )


DECODE_STEP_BYTES = 1 << 16
"""A large frame is decoded this much at a time, the event loop free to run between steps
(``stepped_validation.Turns``): at most ~65k objects, a few ms, each."""
STEPPED_FRAME = 16 * DECODE_STEP_BYTES
"""A frame over this many bytes is decoded in steps."""


async def unpack_bounded_in_steps(data: bytes, seen: list[int] | None = None) -> Any:
    """``unpack_bounded``, a frame over 16 steps decoded ``DECODE_STEP_BYTES`` at a time with
    the event loop free to run between steps (every ``TURN_S``, or ``TURN_STEPS`` steps). A 64
    MiB frame of short strings in small arrays took ~2 s of CPU in one go, every other
    connection waiting; a thread does not help (msgpack holds the GIL between its hooks: the
    loop's thread waited up to seconds for it). ``seen[0]``, if given, gains the number of list
    items and map entries decoded (without it, the hooks do not count them: ~5% of the decode)."""
    if len(data) <= STEPPED_FRAME:
        return unpack_bounded(data, seen)
    options, entries = _bounded(len(data), counting=seen is not None)
    unpacker = msgpack.Unpacker(max_buffer_size=len(data), **options)
    view = memoryview(data)
    turns = Turns()
    try:
        for start in range(0, len(data), DECODE_STEP_BYTES):
            unpacker.feed(view[start : start + DECODE_STEP_BYTES])
            try:
                message = unpacker.unpack()
            except msgpack.OutOfData:
                await turns.step()
                continue
            if start + DECODE_STEP_BYTES < len(data) or unpacker.tell() != len(data):
                raise ValueError("the message has bytes after its end")
            return message
        raise ValueError("the message ends before its last value")
    finally:
        if seen is not None:
            seen[0] += entries()


def _bounded(size: int, counting: bool = True) -> tuple[dict[str, Any], Callable[[], int]]:
    """The options that make msgpack refuse a ``size``-byte frame as ``unpack_bounded`` says,
    and what tells how many list items and map entries it has decoded so far (0 without
    ``counting``). Each hook is one Python call of a few operations on the closure's integers
    and its own constants: through a second function and a list for the count, the hooks cost
    an 8 MiB request of 19,000 rows ~7 ms of ~25 to decode (~4 after; ~3 without the count)."""
    budget = max(DECODED_FLOOR, DECODED_PER_WIRE_BYTE * size)
    left, entries = budget, 0

    def on_list(items: list[Any], base: int = LIST_BYTES, slot: int = SLOT_BYTES) -> list[Any]:
        nonlocal left, entries
        count = len(items)
        entries += count
        left -= base + slot * count
        if left < 0:
            _refuse_cost(size, budget)
        return items

    def on_map(
        mapping: dict[Any, Any], base: int = MAP_BYTES, entry: int = ENTRY_BYTES
    ) -> dict[Any, Any]:
        nonlocal left, entries
        count = len(mapping)
        entries += count
        left -= base + entry * count
        if left < 0:
            _refuse_cost(size, budget)
        return mapping

    def on_list_uncounted(
        items: list[Any], base: int = LIST_BYTES, slot: int = SLOT_BYTES
    ) -> list[Any]:
        nonlocal left
        left -= base + slot * len(items)
        if left < 0:
            _refuse_cost(size, budget)
        return items

    def on_map_uncounted(
        mapping: dict[Any, Any], base: int = MAP_BYTES, entry: int = ENTRY_BYTES
    ) -> dict[Any, Any]:
        nonlocal left
        left -= base + entry * len(mapping)
        if left < 0:
            _refuse_cost(size, budget)
        return mapping

    options = {
        "raw": False,
        "strict_map_key": False,
        "list_hook": on_list if counting else on_list_uncounted,
        "object_hook": on_map if counting else on_map_uncounted,
        "ext_hook": _refuse_extension,
        "timestamp": 1,
    }
    return options, lambda: entries


def _refuse_cost(size: int, budget: int) -> None:
    raise DecodeCostError(
        f"this {size}-byte message decodes into more than {budget} bytes "
        f"({DECODED_PER_WIRE_BYTE}x its size): refused"
    )


def _refuse_extension(code: int, payload: bytes) -> Any:
    raise DecodeCostError(
        f"this message holds a msgpack extension type ({code}), which no request carries: refused"
    )
