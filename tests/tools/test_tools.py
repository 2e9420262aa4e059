"""ToolEnv, StatefulToolEnv and ToolRubric through the real HTTP path, malformed calls included."""

import asyncio
import json
import threading
import time
from typing import Literal

import pytest
from pydantic import BaseModel

import verifiers as vf
from verifiers.testing import Reply
from verifiers.tools import parse_arguments, parse_docstring, tool_spec


class Point(BaseModel):
    x: int
    y: int


def weather(
    city: str,
    units: Literal["c", "f"] = "c",
    days: int | None = None,
    tags: list[str] | None = None,
) -> str:
    """Get the forecast for a city.

    Args:
        city: The city name.
        units (str): Temperature units.
        days: How many days
            to forecast.
    """
    return f"{city}: sunny, 20{units}, {days or 1} days"


def distance(a: Point, b: Point, scale: dict[str, float] | None = None) -> float:
    """Distance between points.

    Parameters
    ----------
    a : Point
        The first point.
    b : Point
        The second point.
    """
    return ((a.x - b.x) ** 2 + (a.y - b.y) ** 2) ** 0.5


def test_schema_from_hints_and_google_docstring():
    fn = tool_spec(weather).schema["function"]
    assert fn["name"] == "weather" and fn["description"] == "Get the forecast for a city."
    props = fn["parameters"]["properties"]
    # the classic (OpenAI strict) schema: pydantic titles kept, every parameter listed as required
    assert props["city"] == {"type": "string", "description": "The city name.", "title": "City"}
    assert props["units"]["enum"] == ["c", "f"] and props["units"]["default"] == "c"
    assert props["days"]["description"] == "How many days\nto forecast."
    assert {"type": "integer"} in props["days"]["anyOf"] and {"type": "null"} in props["days"][
        "anyOf"
    ]
    assert props["tags"]["anyOf"][0] == {"type": "array", "items": {"type": "string"}}
    assert (
        fn["parameters"]["required"] == list(props) and fn["parameters"]["title"] == "weather_args"
    )
    assert "default" not in props["days"]  # a None default is dropped, as strict mode does


def test_schema_from_numpy_docstring_and_pydantic_models():
    fn = tool_spec(distance).schema["function"]
    params = fn["parameters"]
    assert params["properties"]["a"]["description"] == "The first point."
    assert params["$defs"]["Point"]["required"] == ["x", "y"]
    assert params["properties"]["scale"]["anyOf"][0]["additionalProperties"] == {"type": "number"}
    assert parse_docstring("Summary line.\n\nArgs:\n    q: the query")[1] == {"q": "the query"}


def test_parse_arguments_handles_double_encoding_and_garbage():
    assert parse_arguments('{"a": 1}') == {"a": 1}
    assert parse_arguments(json.dumps(json.dumps({"a": 1}))) == {"a": 1}
    assert parse_arguments("") == {} and parse_arguments({"a": 2}) == {"a": 2}
    with pytest.raises(Exception, match="not valid JSON"):
        parse_arguments("{a: 1")
    with pytest.raises(Exception, match="must be a JSON object"):
        parse_arguments("[1, 2]")


def calls_then_answer(*calls):
    """A policy that makes the given tool calls on its first turn, then answers."""

    def policy(request):
        if any(m["role"] == "tool" for m in request["messages"]):
            return "done"
        return Reply(tool_calls=[Reply.tool_call(name, args) for name, args in calls])

    return policy


async def tool_messages(server, client, env, *calls):
    server.set_handler(calls_then_answer(*calls))
    out = await env.evaluate(client, "m")
    return [m for m in out.state[0]["completion"] if m["role"] == "tool"], out.state[0]


@pytest.mark.usefixtures("dict_era")
async def test_tool_results_and_every_malformed_call_come_back_as_tool_messages(server, client):
    def explode(x: int) -> int:
        """Always fails."""
        raise RuntimeError("kaboom")

    env = vf.ToolEnv(
        tools=[weather, distance, explode],
        dataset=[{"question": "q"}],
        max_output_chars=50,
        validate_tool_args=True,  # checked and coerced against the schema first
    )
    server.set_handler(
        lambda req: (
            "done"
            if any(m["role"] == "tool" for m in req["messages"])
            else Reply(
                tool_calls=[
                    Reply.tool_call("weather", {"city": "Oslo", "days": 3}, "c1"),
                    Reply.tool_call(
                        "weather", json.dumps(json.dumps({"city": "Rome"})), "c2"
                    ),  # double-encoded
                    {
                        "id": "c3",
                        "type": "function",
                        "function": {"name": "weather", "arguments": "{city: Oslo"},
                    },
                    Reply.tool_call("teleport", {"to": "Mars"}, "c4"),
                    Reply.tool_call("weather", {"city": "Oslo", "days": "many"}, "c5"),
                    Reply.tool_call("weather", {}, "c6"),
                    Reply.tool_call("weather", {"city": "Oslo", "bogus": 1}, "c7"),
                    Reply.tool_call("explode", {"x": 1}, "c8"),
                    Reply.tool_call(
                        "distance", {"a": {"x": 0, "y": 0}, "b": {"x": 3, "y": 4}}, "c9"
                    ),
                    Reply.tool_call("weather", {"city": "x" * 200}, "c10"),
                ]
            )
        )
    )
    out = await env.evaluate(client, "m")
    state = out.state[0]
    replies = {m["tool_call_id"]: m["content"] for m in state["completion"] if m["role"] == "tool"}
    assert replies["c1"] == "Oslo: sunny, 20c, 3 days"
    assert replies["c2"] == "Rome: sunny, 20c, 1 days"
    assert "arguments are not valid JSON" in replies["c3"]
    assert "unknown tool 'teleport'; available tools: distance, explode, weather" in replies["c4"]
    assert "invalid arguments for weather: days" in replies["c5"]
    assert "city: Field required" in replies["c6"]
    assert "bogus: Extra inputs are not permitted" in replies["c7"]
    assert replies["c8"] == "kaboom"  # the classic error_formatter: str(exception)
    assert replies["c9"] == "5.0"
    assert "[output truncated: " in replies["c10"] and len(replies["c10"]) < 120
    assert state["error"] is None and state["stop_condition"] == "no_tools_called"
    assert state["completion"][-1]["content"] == "done"
    # the tool results went back to the model on the next request
    assert [m["role"] for m in server.requests[-1]["messages"]].count("tool") == 10
    assert server.requests[0]["tools"] == env.oai_tools


async def test_by_default_tools_run_as_the_classic_sdk_runs_them(server, client):
    """One after another on the loop's thread, arguments as sent, Python's own errors, whole
    output: a tool holding a SQLite connection (thread-bound) and order-dependent state works."""
    import sqlite3

    db = sqlite3.connect(":memory:")  # usable only on this thread
    db.execute("create table log (n integer)")
    seen: list[object] = []

    def record(n: int) -> str:
        """Record n."""
        seen.append(n)
        db.execute("insert into log values (?)", (len(seen),))
        return f"{n!r} after {db.execute('select count(*) from log').fetchone()[0] - 1}"

    def big() -> str:
        """A long output."""
        return "x" * 20_000

    env = vf.ToolEnv(tools=[record, big], dataset=[{"question": "q"}])
    replies, state = await tool_messages(
        server,
        client,
        env,
        ("record", {"n": 1}),
        ("record", {"n": "2"}),
        ("record", {}),
        ("record", {"n": 3, "extra": 1}),
        ("big", {}),
    )
    assert [r["content"] for r in replies[:2]] == ["1 after 0", "'2' after 1"]  # not coerced
    # Python's own messages (it names the function by its qualified name)
    assert replies[2]["content"].endswith("record() missing 1 required positional argument: 'n'")
    assert replies[3]["content"].endswith("record() got an unexpected keyword argument 'extra'")
    assert replies[4]["content"] == "x" * 20_000  # sent whole
    assert seen == [1, "2"] and state["error"] is None


async def test_parallel_calls_run_concurrently(server, client):
    """Six calls in one turn, three sync (threads) and three async: each waits until all six
    have begun, so they answer only if all six were in flight at once (one after another, the
    first would wait alone until the deadline and answer -1)."""
    deadline, loop = time.monotonic() + 30, asyncio.get_running_loop()
    begun, lock, all_in, all_in_here = [0], threading.Lock(), threading.Event(), asyncio.Event()

    def begin() -> None:
        with lock:
            begun[0] += 1
            if begun[0] == 6:
                all_in.set()
                loop.call_soon_threadsafe(all_in_here.set)

    def slow_sync(n: int) -> int:
        """Waits for the other calls."""
        begin()
        return n if all_in.wait(max(0.0, deadline - time.monotonic())) else -1

    async def slow_async(n: int) -> int:
        """Waits for the other calls asynchronously."""
        begin()
        try:
            await asyncio.wait_for(all_in_here.wait(), max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            return -1
        return n

    env = vf.ToolEnv(
        tools=[slow_sync, slow_async], dataset=[{"question": "q"}], parallel_tool_calls=True
    )
    replies, _ = await tool_messages(
        server,
        client,
        env,
        *[("slow_sync", {"n": i}) for i in range(3)],
        *[("slow_async", {"n": i}) for i in range(3)],
    )
    assert [r["content"] for r in replies] == ["0", "1", "2", "0", "1", "2"]


async def test_rollout_stops_at_max_turns_when_the_model_keeps_calling(server, client):
    env = vf.ToolEnv(tools=[weather], dataset=[{"question": "q"}], max_turns=3)
    server.set_handler(lambda req: Reply(tool_calls=[Reply.tool_call("weather", {"city": "Oslo"})]))
    out = await env.evaluate(client, "m")
    state = out.state[0]
    assert len(state["trajectory"]) == 3 and state["stop_condition"] == "max_turns_reached"


@pytest.mark.usefixtures("dict_era")
async def test_per_example_tools_restrict_what_can_be_called(server, client):
    only_distance = [tool_spec(distance).schema]
    env = vf.ToolEnv(
        tools=[weather, distance], dataset=[{"question": "q", "info": {"oai_tools": only_distance}}]
    )
    replies, _ = await tool_messages(server, client, env, ("weather", {"city": "Oslo"}))
    assert "unknown tool 'weather'; available tools: distance" in replies[0]["content"]
    assert server.requests[0]["tools"] == only_distance


class Notebook(vf.StatefulToolEnv):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.add_tool(self.write_note, args_to_skip=["notebook_id"])

    async def setup_state(self, state, **kwargs):
        state["notebook_id"] = f"nb-{state['example_id']}"
        return state

    def update_tool_args(self, tool_name, tool_args, messages, state, **kwargs):
        return {**tool_args, "notebook_id": state["notebook_id"]}

    def write_note(self, text: str, notebook_id: str) -> str:
        """Write a note.

        Args:
            text: What to write.
        """
        return f"{notebook_id}: {text}"


@pytest.mark.usefixtures("dict_era")
async def test_stateful_tool_env_hides_and_injects_arguments(server, client):
    env = Notebook(dataset=[{"question": "q", "example_id": 7}])
    schema = env.oai_tools[0]["function"]["parameters"]
    assert list(schema["properties"]) == ["text"] and schema["required"] == ["text"]
    replies, _ = await tool_messages(
        server, client, env, ("write_note", {"text": "hi", "notebook_id": "nb-evil"})
    )
    assert replies[0]["content"] == "nb-7: hi"  # the model cannot choose the hidden argument


@pytest.mark.usefixtures("dict_era")
async def test_tool_rubric_counts_calls(server, client):
    env = vf.ToolEnv(
        tools=[weather, distance],
        dataset=[{"question": "q"}],
        rubric=vf.ToolRubric(tools=[weather, distance]),
    )
    server.set_handler(
        calls_then_answer(
            ("weather", {"city": "A"}),
            ("weather", {"city": "B"}),
            ("distance", {"a": {"x": 0, "y": 0}, "b": {"x": 0, "y": 1}}),
        )
    )
    out = await env.evaluate(client, "m")
    assert out.metrics["total_tool_calls"] == [3.0]
    assert out.metrics["weather_calls"] == [2.0] and out.metrics["distance_calls"] == [1.0]


async def test_tool_rubric_keeps_the_classic_methods_environments_call(server, client):
    """Environments of later releases (art_e, say) call 0.1.8's ToolRubric methods directly,
    on typed messages too."""
    rubric = vf.ToolRubric(tools=[weather, distance])
    assert rubric.tool_names == ["weather", "distance"]
    assert [t["function"]["name"] for t in rubric.oai_tools] == ["weather", "distance"]
    env = vf.ToolEnv(tools=[weather, distance], dataset=[{"question": "q"}])
    server.set_handler(calls_then_answer(("weather", {"city": "A"}), ("weather", {"city": "B"})))
    completion = (await env.evaluate(client, "m")).state[0]["completion"]
    assert await rubric.total_tool_calls(completion) == 2.0
    assert await rubric.get_tool_call_count_func("weather")(completion) == 2.0
    assert await rubric.get_tool_call_count_func("distance")(completion) == 0.0
