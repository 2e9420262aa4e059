"""The hubs the tests run against: a real hub process per test module, on each storage backend
(``hub``; ``strict_hub``, a short read timeout). The folders whose tests use a hub import these
in their conftest.py (tests/hub_server, hub_client, hub_protocol, workflows). Helpers:
tests/support/hubs.py."""

from __future__ import annotations

import os

import pytest

from hub_server.process import start_hub


@pytest.fixture(scope="module")
def hub(tmp_path_factory, hub_backend):
    data = tmp_path_factory.mktemp("hub-data")
    admin = hub_backend.create_user(data, "admin", is_admin=True)
    with start_hub(data, backend=hub_backend.flags, sdk=True) as server:
        yield {"url": server.url, "admin": admin, "data": data, "backend": hub_backend}


@pytest.fixture(scope="module")
def strict_hub(tmp_path_factory, hub_backend):
    """A hub that cuts off a client stalling for 2 s, with no SDK wheel and an admin ``root``:
    the ``hub`` of the security, attack and command tests."""
    data = tmp_path_factory.mktemp("hub-sec")
    admin = hub_backend.create_user(data, "root", is_admin=True)
    os.environ["PRIME_HUB_READ_TIMEOUT"] = "2"
    try:
        with start_hub(data, backend=hub_backend.flags) as server:
            yield {"url": server.url, "admin": admin, "data": data, "backend": hub_backend}
    finally:
        os.environ.pop("PRIME_HUB_READ_TIMEOUT", None)
