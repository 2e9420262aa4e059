"""The ``hub`` fixture: a real hub process per test module, on each storage backend."""

from __future__ import annotations

import pytest

from hub_server.process import start_hub


@pytest.fixture(scope="module")
def hub(tmp_path_factory, hub_backend):
    data = tmp_path_factory.mktemp("hub-data")
    admin = hub_backend.create_user(data, "admin", is_admin=True)
    with start_hub(data, backend=hub_backend.flags, sdk=True) as server:
        yield {"url": server.url, "admin": admin, "data": data, "backend": hub_backend}
