"""The short cuts a v1 rollout's agent takes for client CPU (``benchmarks/eval_throughput.py
--table v1``, issue 41) give what the long way gives: ``Agent.run`` (no async context manager)
records the trace ``agent.interaction`` records for one segment, set-up failures, stop hooks,
tools and cancellation included; a task's hooks come in the order the sorted comprehension gave;
an env's roles, a model call's limits, the episode's env record, a reply's token read and the
client pool's context read as they did. The objects a rollout no longer holds across its model
calls (an episode made before ``run``, an exit stack for in-process tools, an interaction's
lock, a ``ModelContext`` and a ``using_pool`` per rollout, a coroutine around the POST) and the
ids read in batches change nothing a rollout records."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

import verifiers.v1 as vf
from verifiers.clients.responses import response_tokens
from verifiers.testing import Reply
from verifiers.v1.agent import Agent, ModelContext, _limits
from verifiers.v1.configs.env import agent_configs
from verifiers.v1.configs.harness import NullHarnessConfig
from verifiers.v1.harnesses.null.harness import turn_tokens
from verifiers.v1.hooks import hooks_of
from verifiers.v1.session import RolloutLimits
from verifiers.v1.types import TurnTokens


class AddToolset(vf.Toolset[vf.ToolsetConfig, vf.State]):
    TOOL_PREFIX = None

    @vf.tool
    def add(self, a: int, b: int) -> str:
        """Add two integers."""
        return str(a + b)


class Plain(vf.Task):
    @vf.reward
    def said_five(self, trace: vf.Trace) -> float:
        return float(trace.last_reply == "5")

    @vf.metric
    async def length(self, trace: vf.Trace) -> float:
        return float(len(trace.last_reply))


class FailingSetup(Plain):
    async def setup(self, trace: vf.Trace, runtime: Any) -> None:
        raise ValueError("no fixture")


class Stopped(Plain):
    @vf.stop
    def at_once(self, trace: vf.Trace) -> bool:
        return True


class WithTools(Plain):
    @classmethod
    def toolsets(cls, config: vf.TaskConfig) -> list[AddToolset]:
        return [AddToolset(vf.ToolsetConfig(colocated=True))]


def tool_then_answer(request: dict[str, Any]) -> Reply | str:
    results = [m for m in request["messages"] if m["role"] == "tool"]
    if request.get("tools") and not results:
        return Reply(tool_calls=[Reply.tool_call("add", {"a": 2, "b": 3})])
    return str(results[-1]["content"]) if results else "5"


def make_agent(server: Any) -> Agent:
    return Agent(
        "agent",
        vf.AgentConfig(harness=NullHarnessConfig(id="null"), max_turns=4),
        ModelContext(base_url=server.base_url, model="test-model"),
    )


async def the_long_way(agent: Agent, task: vf.Task) -> vf.Trace:
    """``Agent.run`` as it was: one segment inside ``agent.interaction``."""
    async with agent.interaction(task) as interaction:
        await interaction._segment([])
        if not interaction.trace.errors:
            interaction.trace.stop("agent_completed")
    return interaction.trace


_VARYING = {"id", "tool_call_id", "timestamp", "start", "end", "duration", "traceback"}


def settled(value: Any) -> Any:
    """A trace's record less what differs between any two runs (ids, clocks, tracebacks)."""
    if isinstance(value, dict):
        return {k: settled(v) for k, v in value.items() if k not in _VARYING}
    if isinstance(value, list):
        return [settled(v) for v in value]
    return value


@pytest.mark.parametrize("task_cls", [Plain, FailingSetup, Stopped, WithTools])
async def test_run_records_the_trace_the_interaction_records(server, task_cls) -> None:
    server.set_handler(tool_then_answer)
    task = task_cls(vf.TaskData(idx=0, prompt="add 2 and 3"))
    short, long = await make_agent(server).run(task), await the_long_way(make_agent(server), task)
    assert settled(short.model_dump(mode="json")) == settled(long.model_dump(mode="json"))
    assert short.model_fields_set == long.model_fields_set
    assert short.timing.setup.end == short.timing.agent.start  # the spans are recorded
    assert bool(short.timing.scoring.end) == bool(long.timing.scoring.end)
    if task_cls is Plain:
        assert short.ok and short.reward == 1.0 and short.stop_condition == "agent_completed"


async def test_a_cancelled_run_is_not_scored_as_a_cancelled_interaction(server) -> None:
    asked = threading.Event()

    def slow(request: dict[str, Any]) -> Reply:
        asked.set()
        return Reply(content="5", delay=5.0)

    server.set_handler(slow)

    async def cancelled(play: Any) -> vf.Trace:
        agent = make_agent(server)
        asked.clear()
        job = asyncio.ensure_future(play(agent, Plain(vf.TaskData(idx=0, prompt="p"))))
        await asyncio.to_thread(asked.wait, 30)
        job.cancel()
        with pytest.raises(asyncio.CancelledError):
            await job
        (trace,) = agent.traces
        return trace

    short = await cancelled(lambda agent, task: agent.run(task))
    long = await cancelled(the_long_way)
    assert settled(short.model_dump(mode="json")) == settled(long.model_dump(mode="json"))
    assert short.rewards == {} and not short.ok and not short.timing.scoring.end


class Ordered(vf.Task):
    @vf.reward(priority=1)
    def b_first(self) -> float:
        return 1.0

    @vf.reward
    def a_later(self) -> float:
        return 1.0

    @vf.reward(priority=1)
    def a_first(self) -> float:
        return 1.0

    @vf.metric
    def only(self) -> float:
        return 1.0

    def hidden(self) -> float:  # overrides nothing: no hook
        return 1.0


class Overriding(Ordered):
    def a_later(self) -> float:  # an override without the decorator hides its base's hook
        return 0.0


@pytest.mark.parametrize("cls", [Ordered, Overriding, vf.Task])
@pytest.mark.parametrize("kind", ["reward", "metric", "stop"])
def test_hooks_come_in_the_order_the_sorted_comprehension_gave(cls, kind) -> None:
    task = cls(vf.TaskData(idx=0, prompt="p"))
    names = sorted(
        {
            n
            for k in type(task).__mro__
            for n, v in vars(k).items()
            if callable(v) and hasattr(v, kind)
        }
    )
    expected = [m for n in names if hasattr(m := getattr(task, n), kind)]
    expected.sort(key=lambda m: (-getattr(m, f"{kind}_priority", 0), m.__name__))
    assert hooks_of(task, kind) == expected


class TwoSeats(vf.EnvConfig):
    solver: vf.AgentConfig = vf.AgentConfig()
    knob: int = 3
    judge: vf.AgentConfig = vf.AgentConfig(max_turns=1)


@pytest.mark.parametrize("config", [vf.SingleAgentEnvConfig(), TwoSeats()])
def test_an_envs_roles_are_its_agent_config_fields_in_order(config) -> None:
    expected = {
        name: getattr(config, name)
        for name, info in type(config).model_fields.items()
        if isinstance(info.default, vf.AgentConfig)
    }
    got = agent_configs(config)
    assert list(got) == list(expected) and all(got[n] is expected[n] for n in expected)


@pytest.mark.parametrize(
    "config", [vf.AgentConfig(), vf.AgentConfig(max_turns=2, max_total_tokens=100)]
)
def test_a_calls_limits_are_its_configs(config) -> None:
    caps = (config.max_turns, config.max_input_tokens)
    caps += (config.max_output_tokens, config.max_total_tokens)
    assert _limits(*caps) == RolloutLimits.of(config)


@pytest.mark.parametrize(
    "choice",
    [
        {"message": {"role": "assistant", "content": "hi"}},
        {"message": {"content": "hi"}, "token_ids": [5, 6]},
        {
            "message": {"content": "hi"},
            "logprobs": {"content": [{"token": "token_id:7", "logprob": -1.0}]},
        },
        {"message": {"content": "hi"}, "logprobs": None, "token_ids": None},
    ],
)
@pytest.mark.parametrize("prompt_ids", [None, [1, 2]])
def test_a_replys_tokens_read_as_response_tokens_reads_them(choice, prompt_ids) -> None:
    completion: dict[str, Any] = {"choices": [choice]}
    if prompt_ids is not None:
        completion["prompt_token_ids"] = prompt_ids
    tokens = response_tokens(completion)
    expected = (
        None
        if tokens is None
        else TurnTokens(
            prompt_ids=tokens["prompt_ids"],
            completion_ids=tokens["completion_ids"],
            completion_logprobs=tokens["completion_logprobs"],
        )
    )
    assert turn_tokens(completion) == expected


def test_an_envs_episodes_share_one_env_record_that_follows_its_id() -> None:
    env = vf.SingleAgentEnv(vf.SingleAgentEnvConfig(id="first"))
    task = Plain(vf.TaskData(idx=0, prompt="p"))
    one, two = env.new_episode(task), env.new_episode(task)
    assert one.env is two.env and one.env.model_dump() == {"id": env.config.env_id}
    assert one.model_dump_json(exclude={"id"}) == two.model_dump_json(exclude={"id"})
    env.config.id = "second"
    assert env.new_episode(task).env.id == env.config.env_id != one.env.id


def test_a_pool_in_use_is_the_one_entered_and_none_after() -> None:
    from verifiers.v1.chat import ClientPool, _pool, using_pool

    outer, inner = ClientPool(), ClientPool()
    with using_pool(outer) as entered:
        assert entered is outer and _pool.get() is outer
        with using_pool(inner):
            assert _pool.get() is inner
        assert _pool.get() is outer
    assert _pool.get() is None


@pytest.mark.parametrize("task_cls", [Plain, WithTools])
async def test_in_process_tools_are_the_ones_the_mcp_client_opens(task_cls) -> None:
    """A rollout whose toolsets are none or all colocated opens them without the MCP client
    module: the same tools, answering the same."""
    from contextlib import AsyncExitStack

    from verifiers.v1.mcp.client import open_tools

    task = task_cls(vf.TaskData(idx=0, prompt="p"))
    async with AsyncExitStack() as stack:
        short = await Agent("agent", vf.AgentConfig(), ModelContext()).open_tools(task, stack)
        long = await open_tools(type(task).toolsets(task.config), stack)
        assert [t.spec for t in short] == [t.spec for t in long]
        for got, want in zip(short, long, strict=True):
            assert await got.call({"a": 2, "b": 3}, vf.State()) == await want.call(
                {"a": 2, "b": 3}, vf.State()
            )


async def test_an_env_without_toolsets_serves_the_empty_list_serve_shared_gives() -> None:
    from verifiers.v1.mcp.client import serve_shared

    class NoTools(vf.Taskset):
        def load(self) -> Any:
            return iter([Plain(vf.TaskData(idx=0, prompt="p"))])

    env = vf.SingleAgentEnv(vf.SingleAgentEnvConfig())
    env.__dict__["taskset"] = NoTools(vf.TasksetConfig())  # the taskset the env serves
    async with serve_shared([]) as served:
        expected = served
    async with env.serving():
        assert env._shared_toolsets == expected == []
    assert env._shared_toolsets is None


class ScoredInItsBox(Plain):
    """No tools (nothing for an exit stack to close), but a reward that runs in the box."""

    boxes: list[Any] = []

    @vf.reward
    async def box_answered(self, runtime: Any) -> float:
        type(self).boxes.append(runtime)
        return float((await runtime.shell("echo 5")).stdout.strip() == "5")


async def test_a_box_without_tool_servers_is_still_destroyed_when_the_rollout_ends(server) -> None:
    """A rollout whose tools are all in process holds no exit stack for tool servers; the box
    its scoring asked for still goes when it ends, by ``run`` or by ``interaction``."""
    server.set_handler(tool_then_answer)
    task = ScoredInItsBox(vf.TaskData(idx=0, prompt="add 2 and 3"))
    for play in (lambda agent: agent.run(task), lambda agent: the_long_way(agent, task)):
        ScoredInItsBox.boxes.clear()
        trace = await play(make_agent(server))
        (box,) = ScoredInItsBox.boxes
        assert trace.rewards["box_answered"] == vf.Reward(score=1.0)
        assert box.sandbox is None  # stopped: its sandbox destroyed


async def test_an_interaction_opened_with_in_process_tools_has_no_exit_stack(server) -> None:
    agent = make_agent(server)
    for task_cls, held in ((Plain, False), (WithTools, False)):
        interaction = await agent.open_interaction(task_cls(vf.TaskData(idx=0, prompt="p")))
        assert (interaction._servers is not None) is held and interaction._lock is None
        await agent.release_interaction(interaction)


async def test_turns_and_closes_take_one_lock_made_by_the_first_caller(server) -> None:
    """The interaction's lock is made when first needed; callers racing for it share it."""
    server.set_handler(tool_then_answer)
    agent = make_agent(server)
    async with agent.interaction(Plain(vf.TaskData(idx=0, prompt="p"))) as interaction:
        assert interaction._lock is None
        first, second = await asyncio.gather(interaction.turn(), interaction.close())
        assert interaction._lock is not None and not interaction._lock.locked()
        assert first.last_reply == "5" and second is interaction.trace


class Scripted(vf.SingleAgentEnv):
    """An env whose hooks fail where a test asks (``fail``: setup, run or finalize)."""

    fail = ""
    seen: list[Any] = []

    async def setup(self, agents: Any) -> None:
        if self.fail == "setup":
            raise ValueError("setup failed")

    async def run(self, task: vf.Task, agents: Any) -> None:
        await super().run(task, agents)
        if self.fail == "run":
            raise ValueError("run failed")

    async def finalize(self, task: vf.Task, episode: Any) -> None:
        type(self).seen.append([t.id for t in episode.traces])
        if self.fail == "finalize":
            raise ValueError("finalize failed")


@pytest.mark.parametrize("fail", ["", "setup", "run", "finalize"])
async def test_an_episode_made_after_its_run_records_what_it_did_before(server, fail) -> None:
    """``run_episode`` makes the episode once ``run`` is done: its errors, traces, ``ok``
    and finalize's view of the traces are what they were with the episode made first."""
    server.set_handler(tool_then_answer)

    class OneTask(vf.Taskset):
        def load(self) -> Any:
            return iter([Plain(vf.TaskData(idx=0, prompt="p"))])

    env = Scripted(vf.SingleAgentEnvConfig())
    env.__dict__["taskset"] = OneTask(vf.TasksetConfig())  # the taskset the env plays
    env.fail, Scripted.seen = fail, []
    context = ModelContext(base_url=server.base_url, model="test-model")
    episode = await env.run_episode(Plain(vf.TaskData(idx=0, prompt="p")), context)
    errors = [] if not fail else [vf.Error(type="ValueError", message=f"{fail} failed")]
    assert episode.errors == errors and episode.ok is (not fail)
    assert len(episode.traces) == (0 if fail == "setup" else 1)
    assert Scripted.seen == ([] if fail in ("setup", "run") else [[episode.traces[0].id]])
    assert episode.env.id == env.config.env_id and episode.task is not None


def test_a_runs_rollouts_share_one_model_context_per_endpoint_model_and_sampling() -> None:
    """``TasksetEnvironment`` makes one ``ModelContext`` per endpoint, model and sampling (the
    engine's own defaults left off, as before) and gives it to every rollout that matches."""
    from verifiers.v1.eval_env import ENGINE_SAMPLING, TasksetEnvironment

    env = TasksetEnvironment.__new__(TasksetEnvironment)
    env._model_contexts = {}

    class Client:
        base_url, api_key = "http://127.0.0.1:1/v1", "k"

    asked = {"temperature": 0.5, "top_p": None, **ENGINE_SAMPLING}
    one = env._model_context(Client(), "m", asked)
    assert one == ModelContext(
        base_url="http://127.0.0.1:1/v1", model="m", api_key="k", sampling={"temperature": 0.5}
    )
    assert env._model_context(Client(), "m", dict(asked)) is one
    assert env._model_context(Client(), "other", asked) is not one
    assert env._model_context(Client(), "m", {"temperature": 0.7}).sampling == {"temperature": 0.7}
    assert env._model_context(Client(), "m", None).sampling == {}


async def test_the_lean_clients_request_is_the_http_clients_post(server) -> None:
    """``create_json`` hands back the POST's awaitable itself (no coroutine around it),
    which gives the server's reply as its JSON."""
    from verifiers.v1.chat import ClientPool
    from verifiers.v1.configs.client import EvalClientConfig

    server.set_handler(lambda request: "5")
    pool = ClientPool()
    client = pool.get(EvalClientConfig(), server.base_url, "k")
    try:
        messages = [{"role": "user", "content": "p"}]
        request = client.create_json(model="test-model", messages=messages)
        assert getattr(request, "__qualname__", "") == "OpenAICompatibleClient.post"
        reply = await request
        assert reply["choices"][0]["message"]["content"] == "5"
        assert server.requests[-1]["messages"] == messages
    finally:
        await pool.aclose()


def test_a_pool_entered_without_its_object_is_the_one_in_use_until_left() -> None:
    from verifiers.v1.chat import ClientPool, _pool, enter_pool, leave_pool, using_pool

    outer, inner = ClientPool(), ClientPool()
    with using_pool(outer):
        token = enter_pool(inner)
        assert _pool.get() is inner
        leave_pool(token)
        assert _pool.get() is outer
    assert _pool.get() is None


def test_a_forked_child_makes_ids_its_parent_never_hands_out() -> None:
    """Ids come from one ``os.urandom`` read per batch: a child forked with part of a batch
    left starts its own, so parent and child never give the same id."""
    import os

    from verifiers.v1.trace_parts import _IDS_PER_READ, new_id

    new_id()  # a batch read, most of it left
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its ids on the pipe
        os.close(read)
        os.write(write, "".join(new_id() for _ in range(_IDS_PER_READ)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        text = pipe.read()
    os.waitpid(pid, 0)
    child = {text[i : i + 32] for i in range(0, len(text), 32)}
    parent = {new_id() for _ in range(_IDS_PER_READ)}
    assert len(child) == _IDS_PER_READ and not child & parent
