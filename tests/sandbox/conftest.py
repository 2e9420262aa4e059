"""The ``sandbox`` fixture: one sandbox per available mode, and none left running after it."""

from __future__ import annotations

import pytest
from support.sandboxes import available_modes, wait_until_no_sandboxes

from verifiers.sandbox import LocalSandboxProvider, SandboxLimits


@pytest.fixture(params=available_modes())
async def sandbox(request):
    provider = LocalSandboxProvider(
        mode=request.param,
        pool_size=0,
        limits=SandboxLimits(memory_mb=512, wall_time_s=2, cpu_time_s=2, max_processes=32),
    )
    box = await provider.create()
    yield box
    await provider.close()
    assert wait_until_no_sandboxes() == []
