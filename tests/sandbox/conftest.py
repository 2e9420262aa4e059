"""The ``sandbox`` fixture: one sandbox per available mode, and none left running after it.
In bwrap mode twice: forked from the zygote (the default, ``bwrap``) and started by bubblewrap
itself (``bwrap-exec``), so every confinement test holds for both ways a sandbox starts."""

from __future__ import annotations

import pytest
from support.sandboxes import available_modes, wait_until_no_sandboxes

from verifiers.sandbox import LocalSandboxProvider, SandboxLimits


def _starts() -> list:
    params = []
    for mode in available_modes():
        params.append(mode)
        if mode == "bwrap":
            params.append("bwrap-exec")
    return params


@pytest.fixture(params=_starts())
async def sandbox(request):
    mode, zygote = ("bwrap", False) if request.param == "bwrap-exec" else (request.param, True)
    provider = LocalSandboxProvider(
        mode=mode,
        pool_size=0,
        limits=SandboxLimits(memory_mb=512, wall_time_s=2, cpu_time_s=2, max_processes=32),
        zygote=zygote,
    )
    box = await provider.create()
    yield box
    await provider.close()
    assert wait_until_no_sandboxes() == []
