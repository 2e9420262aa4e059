from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from verifiers.clients import OpenAICompatibleClient, RetryPolicy
from verifiers.testing import ModelServer, echo


@pytest.fixture(scope="session")
def _shared_server() -> Iterator[ModelServer]:
    with ModelServer() as server:
        yield server


@pytest.fixture
def server(_shared_server: ModelServer) -> Iterator[ModelServer]:
    """The scripted OpenAI-compatible server on loopback, reset for each test."""
    _shared_server.queue.clear()
    _shared_server.requests.clear()
    _shared_server.handler = echo
    yield _shared_server
    _shared_server.queue.clear()


@pytest.fixture
async def client(server: ModelServer) -> AsyncIterator[OpenAICompatibleClient]:
    """A client with fast retries, so fault tests take milliseconds."""
    model_client = OpenAICompatibleClient(
        server.base_url,
        "test-key",
        retry=RetryPolicy(max_retries=3, initial_delay=0.01, max_delay=0.05),
    )
    yield model_client
    await model_client.aclose()


@pytest.fixture
def dict_era(monkeypatch: pytest.MonkeyPatch) -> None:
    """Build environments with verifiers 0.1.8's behaviour (message dicts, ``oai_tools``, string
    tasks): for tests of that release's contract."""
    monkeypatch.setenv("VF_API_VERSION", "0.1.8")
