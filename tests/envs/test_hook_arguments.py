"""``call_with_named`` reads a hook's parameters once per function (cached) and still calls
each hook with the objects its own parameters name: two methods of one function bound to
different instances, a ``**kwargs`` hook, a hook naming none of them, one with no signature."""

from __future__ import annotations

import asyncio
import functools

from verifiers.concurrency import call_with_named


class Handler:
    def __init__(self, name: str) -> None:
        self.name = name

    def cleanup(self, state: dict) -> str:
        return f"{self.name}:{state['id']}"

    async def both(self, state: dict, env: str) -> str:
        return f"{self.name}:{state['id']}:{env}"


def test_each_hook_gets_what_its_parameters_name_on_every_call():
    async def run() -> list:
        state = {"id": 7}
        out = []
        for _ in range(2):  # the second round reads the cached parameters
            for handler in (Handler("a"), Handler("b")):
                out.append(await call_with_named(handler.cleanup, state, state=state, env="e"))
                out.append(await call_with_named(handler.both, state, state=state, env="e"))
            out.append(await call_with_named(lambda **kw: sorted(kw), state, state=state, env=1))
            out.append(await call_with_named(lambda anything: anything, "first", state=state))
            out.append(await call_with_named(len, [1, 2, 3], state=state))  # a builtin
            add = functools.partial(lambda state, extra: (state["id"], extra), extra=1)
            out.append(await call_with_named(add, None, state=state, env="e"))
        return out

    first = ["a:7", "a:7:e", "b:7", "b:7:e", ["env", "state"], "first", 3, (7, 1)]
    assert asyncio.run(run()) == first + first
