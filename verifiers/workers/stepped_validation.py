"""Validating a large request with the event loop free between steps.

A request's model validates in one call that never lets go of the GIL (pydantic-core), so on the
env server's event loop a 40 MiB ``run_group`` of many rows held every other connection for
~0.4 s of CPU, and 300k ``members`` or one row of a million keys for ~0.5-1.2 s; a thread would
not help (the loop's thread waits for the GIL). :func:`validate_in_steps` validates the large
containers of a request (a list or dict field with many entries, and list items or dict values
that are themselves large) a slice at a time, through the field's own ``TypeAdapter``, and the
rest of the model in one call with those fields left empty: the same checks, the same values,
the loop running every ``TURN_S`` (or ``TURN_STEPS`` slices of about ``STEP_ENTRIES`` entries).

Only containers pydantic validates with no validator of their own are stepped (a field with
constraints or validators, or a model with model validators, is validated whole, as before, and
refused past ``WHOLE_ENTRIES`` entries): the answer is the model ``model_validate`` would give,
which the tests compare. A server calls this only for a request of more than ``STEP_ENTRIES``
entries (``protocol.read_request``); smaller ones are validated at once, at no extra cost.
"""

from __future__ import annotations

import asyncio
import types
from bisect import bisect_left
from collections.abc import Callable, Iterator
from functools import cache
from itertools import accumulate, islice
from time import perf_counter
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, TypeAdapter, ValidationError

STEP_ENTRIES = 4096
"""Entries (list items, dict keys) validated in one step: ~1-5 ms. The loop may run after each
step (``Turns``)."""
TURN_S = 0.002
"""A large request's decode or validation lets the event loop run after a step once this long
(wall clock) has passed since it last ran, or after ``TURN_STEPS`` steps, whichever comes first."""
TURN_STEPS = 8
"""Steps at most between two turns of the loop, however quick they are. A turn after every step
cost the server ~0.1 ms of CPU each (with other connections' traffic, which then moves in as
many small pieces): an 8 MiB request of 19,000 rows took ~1.3x the CPU of a whole decode and
validation, ~1.0x with turns paced (``benchmarks/env_workers.py --bounds-only``)."""
WHOLE_ENTRIES = 4 * STEP_ENTRIES
"""At most this many entries, counted through nested lists and dicts, in a field that is
validated whole (it has validators: ``client_config``): ~10 ms. A client config holds a few
headers and endpoints; a million headers held the loop ~0.7 s, and are refused."""


@cache
def _adapter(annotation: Any) -> TypeAdapter[Any]:
    return TypeAdapter(annotation)


def _without_none(annotation: Any) -> Any:
    """``X`` of ``X | None``; anything else as it is."""
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _length(value: Any) -> int:
    """What validating ``value`` as a ``list[...]`` or ``dict[...]`` item costs, in entries."""
    return len(value) if isinstance(value, list | dict) else 1


def _model_cost(value: Any) -> int:
    """What validating ``value`` as a model item costs: its fields and the entries of the
    containers directly in them (``Member.sampling_args``); deeper ones are ``Any`` in every
    request model, which costs nothing to validate."""
    if isinstance(value, dict):
        return len(value) + sum(len(v) for v in value.values() if isinstance(v, list | dict))
    return 1


def _large(annotation: Any, value: list[Any] | dict[Any, Any]) -> bool:
    """Whether validating ``value`` as ``annotation`` (a ``list[X]`` or ``dict[K, X]``) costs
    more than ``STEP_ENTRIES`` entries; it looks at no more items than that."""
    if len(value) > STEP_ENTRIES:
        return True
    args = get_args(annotation)
    cost = _cost_of(args[-1]) if args else None
    if cost is None:
        return False
    total = len(value)
    for item in value.values() if isinstance(value, dict) else value:
        total += cost(item)
        if total > STEP_ENTRIES:
            return True
    return False


def _cost_of(annotation: Any) -> Callable[[Any], int] | None:
    """How an ``annotation`` item's cost is counted; None where every item costs one (``Any``,
    a scalar)."""
    inner = _without_none(annotation)
    if isinstance(inner, type) and issubclass(inner, BaseModel):
        return _model_cost
    if get_origin(inner) in (list, dict) or inner in (list, dict):
        return _length
    return None


def _entries(value: Any) -> int:
    """The entries of ``value``'s lists and dicts, nested ones included, counted up to just
    past ``WHOLE_ENTRIES`` (so counting costs at most that)."""
    count, stack = 0, [value]
    while stack and count <= WHOLE_ENTRIES:
        item = stack.pop()
        if isinstance(item, dict):
            count += len(item)
            stack.extend(islice(item.values(), WHOLE_ENTRIES + 1))
        elif isinstance(item, list):
            count += len(item)
            stack.extend(item[: WHOLE_ENTRIES + 1])
    return count


@cache
def _steppable_fields(model: type[BaseModel]) -> dict[str, Any]:
    """The fields of ``model`` that may be validated apart: plain ``list[...]`` / ``dict[...]``
    (or ``| None``) without constraints, validators or aliases; none if the model has model
    validators (they would see the empty placeholder)."""
    decorators = model.__pydantic_decorators__
    if decorators.model_validators or decorators.root_validators:
        return {}
    validated = {f for d in decorators.field_validators.values() for f in d.info.fields}
    out = {}
    for name, field in model.model_fields.items():
        inner = _without_none(field.annotation)
        if (
            get_origin(inner) in (list, dict)
            and not field.metadata
            and field.alias in (None, name)
            and name not in validated
            and "*" not in validated
        ):
            out[name] = inner
    return out


class Turns:
    """When a stepped decode or validation lets the event loop run: after a step once
    ``TURN_S`` has passed since it last ran, or ``TURN_STEPS`` steps, whichever comes first."""

    def __init__(self) -> None:
        self.steps = 0
        self.since = perf_counter()

    async def step(self) -> None:
        self.steps += 1
        if self.steps >= TURN_STEPS or perf_counter() - self.since >= TURN_S:
            await asyncio.sleep(0)
            self.steps = 0
            self.since = perf_counter()


class _Steps:
    """Counts entries validated since the last step, a step per ``STEP_ENTRIES`` (``Turns``)."""

    def __init__(self) -> None:
        self.entries = 0
        self.turns = Turns()

    async def spent(self, entries: int) -> None:
        self.entries += entries
        if self.entries >= STEP_ENTRIES:
            self.entries = 0
            await self.turns.step()


async def validate_in_steps(model: type[BaseModel], data: Any) -> BaseModel:
    """``model.model_validate(data)``, its large containers a slice at a time (the module
    docstring). A refusal is a ``ValueError`` naming the field and the entry."""
    return await _model(model, data, _Steps(), "")


async def _model(model: type[BaseModel], data: Any, steps: _Steps, where: str) -> BaseModel:
    fields = _steppable_fields(model) if isinstance(data, dict) else {}
    big = {
        name: data[name]
        for name in fields
        if isinstance(data.get(name), list | dict) and _large(fields[name], data[name])
    }
    if isinstance(data, dict):
        for name, value in data.items():
            if name not in big and name in model.model_fields and _entries(value) > WHOLE_ENTRIES:
                raise ValueError(
                    f"{where}{name}: more than {WHOLE_ENTRIES} entries (lists and maps, nested "
                    "ones counted): refused"
                )
    if not big:
        await steps.spent(1)
        return _validated(_adapter(model), data, where)
    done = {}
    for name, value in big.items():
        done[name] = await _container(fields[name], value, steps, f"{where}{name}")
    rest = {**data, **{name: type(value)() for name, value in big.items()}}
    return _validated(_adapter(model), rest, where).model_copy(update=done)


async def _container(annotation: Any, value: Any, steps: _Steps, where: str) -> Any:
    """A ``list[X]`` or ``dict[K, V]`` value, validated a slice at a time through the adapter
    of the same type; an item (or a dict value) that is itself large is validated on its own,
    stepped the same way."""
    args = get_args(annotation)
    if isinstance(value, list) and get_origin(annotation) is list and len(args) == 1:
        out: list[Any] = []
        for start, end, entries in _slices(args[0], value):
            if end - start == 1 and entries > STEP_ENTRIES:  # one item, large
                out.append(await _item(args[0], value[start], steps, f"{where}[{start}]"))
            else:
                out.extend(_validated(_adapter(annotation), value[start:end], where, start))
                # each slice but the last is a step, however few entries it counts: one aimed
                # a little short of ``STEP_ENTRIES`` (``GUESS``), or of rows counted empty (4,096
                # empty rows each counted nothing: 200,000 of them were validated in ~50 ms
                # with the loop never turning, and the decode bound lets ~15M through)
                await steps.spent(entries if end == len(value) else max(entries, STEP_ENTRIES))
        return out
    if isinstance(value, dict) and get_origin(annotation) is dict and len(args) == 2:
        done: dict[Any, Any] = {}
        for chunk, entries in _pairs(args[1], value):
            if len(chunk) == 1 and entries > STEP_ENTRIES:  # one value, large
                key, item = chunk[0]
                checked = _validated(_adapter(args[0]), key, f"{where} (key {key!r})")
                done[checked] = await _item(args[1], item, steps, f"{where}[{key!r}]")
            else:
                done.update(_validated(_adapter(annotation), dict(chunk), where))
                await steps.spent(entries)
        return done
    return _validated(_adapter(annotation), value, where)


def _slices(item: Any, items: list[Any]) -> Iterator[tuple[int, int, int]]:
    """``(start, end, entries)`` slices of ``items`` of about ``STEP_ENTRIES`` entries each
    (``_cost_of``); a slice of one item with more entries is that item alone."""
    cost = _cost_of(item)
    if cost is None:  # no walk: every item costs one
        for start in range(0, len(items), STEP_ENTRIES):
            end = min(len(items), start + STEP_ENTRIES)
            yield start, end, end - start
        return
    # a chunk of as many items as made ``GUESS`` of a step before is summed (in C, not item by
    # item: a walk in Python cost ~60% of validating); at most a step, it is one slice (no item
    # in it is large), else it is walked item by item (``_walked``). Rows alike are summed once:
    # the walk of every row cost an 8 MiB request of 19,000 rows ~0.7 ms, the sum ~0.3
    measure = len if cost is _length else cost
    start, per = 0, 1
    while start < len(items):
        chunk = items[start : start + per]
        try:
            total = sum(map(measure, chunk))
        except TypeError:  # an item with no length (refused once validated): counted as one
            measure = cost
            total = sum(map(cost, chunk))
        if total <= STEP_ENTRIES:
            yield start, start + len(chunk), total
        else:
            yield from _walked(chunk, start, measure, cost)
        start += len(chunk)
        per = min(STEP_ENTRIES, max(1, len(chunk) * GUESS // max(total, 1)))


GUESS = STEP_ENTRIES * 7 // 8
"""Entries ``_slices`` aims a chunk at: rows that vary a little still sum to at most a step."""


def _walked(
    window: list[Any], base: int, measure: Callable[[Any], int], cost: Callable[[Any], int]
) -> Iterator[tuple[int, int, int]]:
    """``_slices`` of ``window`` (``items[base:]``), item by item: a slice ends at the item
    that brings it to ``STEP_ENTRIES``, or before it when that item alone has more (it comes
    alone next)."""
    try:
        counted = list(accumulate(map(measure, window)))
    except TypeError:
        counted = list(accumulate(map(cost, window)))
    # every slice the window holds, each item counted once (a window per slice counted rows of
    # 3 keys three times: ~1 ms of an 8 MiB request's ~9 to validate)
    done = before = 0
    while done < len(window):
        crossing = bisect_left(counted, before + STEP_ENTRIES, done)  # ends the slice
        taken = min(crossing + 1, len(window))
        if done < crossing < len(window):
            # a large item after small ones ends their slice and comes alone next, stepped (it
            # was validated in their slice whole: a row of a million keys behind one small row
            # held the loop ~0.35 s)
            alone = counted[crossing] - counted[crossing - 1]
            taken = crossing if alone > STEP_ENTRIES else taken
        yield base + done, base + taken, counted[taken - 1] - before
        done, before = taken, counted[taken - 1]


def _pairs(item: Any, mapping: dict[Any, Any]) -> Iterator[tuple[list[tuple[Any, Any]], int]]:
    """``mapping``'s pairs in chunks of about ``STEP_ENTRIES`` entries (a key is one, its value
    ``_cost_of`` its type), read as they are yielded."""
    cost = _cost_of(item)
    chunk: list[tuple[Any, Any]] = []
    entries = 0
    for pair in mapping.items():
        spent = 1 if cost is None else 1 + cost(pair[1])
        if chunk and spent > STEP_ENTRIES:  # a large value comes alone, stepped (``_slices``)
            yield chunk, entries
            chunk, entries = [], 0
        chunk.append(pair)
        entries += spent
        if entries >= STEP_ENTRIES:
            yield chunk, entries
            chunk, entries = [], 0
    if chunk:
        yield chunk, entries


async def _item(annotation: Any, value: Any, steps: _Steps, where: str) -> Any:
    inner = _without_none(annotation)
    if isinstance(inner, type) and issubclass(inner, BaseModel):
        return await _model(inner, value, steps, f"{where}.")
    if get_origin(inner) in (list, dict):
        return await _container(inner, value, steps, where)
    return _validated(_adapter(annotation), value, where)


def _validated(adapter: TypeAdapter[Any], value: Any, where: str, offset: int = 0) -> Any:
    try:
        return adapter.validate_python(value)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        loc = list(error["loc"])
        if offset and loc and isinstance(loc[0], int):
            loc[0] += offset
        path = ".".join(str(part) for part in [where.rstrip("."), *loc] if part != "")
        raise ValueError(f"{path or 'the request'}: {error['msg']}") from None
