"""``maybe_await``: call a function that may be sync or async (classic module path)."""

from __future__ import annotations

import inspect
from typing import Any


async def maybe_await(func: Any, *args: Any, **kwargs: Any) -> Any:
    result = func(*args, **kwargs)
    if inspect.isawaitable(result):
        return await result
    return result
