"""Run by ``test_upstream_env_server.py`` inside a venv (upstream ``verifiers==0.3.1``'s, or this
SDK's), never imported by the suite's own interpreter except for :func:`rows`. Prints one line
``ROWS <json>`` (the run's rows, comparable across the two SDKs) where it evaluates.

    upstream_driver.py inproc BASE_URL              # this SDK, in process
    upstream_driver.py upclient HOST:PORT BASE_URL  # upstream's env.evaluate through its ZMQEnvClient
    upstream_driver.py ourclient HOST:PORT BASE_URL # this SDK's env.evaluate, env_workers=RemoteWorkers
    upstream_driver.py upserver PORT                # upstream's ZMQEnvServer (until SIGTERM)
"""

import asyncio
import json
import sys

ENV, EXAMPLES, ROLLOUTS = "vf-interop-tools", 4, 2


def _plain(value):
    if hasattr(value, "model_dump"):
        value = value.model_dump(exclude_none=True)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _message(message):
    message = _plain(message)
    # an assistant turn of tool calls alone: upstream records content "", this SDK none
    out = {"role": message["role"], "content": message.get("content") or None}
    calls = []
    for call in message.get("tool_calls") or []:
        call = json.loads(call) if isinstance(call, str) else call  # rows save calls as JSON
        function = call.get("function", call)
        arguments = function["arguments"]
        calls.append(
            {
                "id": call["id"],
                "name": function["name"],
                "arguments": json.loads(arguments) if isinstance(arguments, str) else arguments,
            }
        )
    if calls:
        out["tool_calls"] = calls
    if message.get("tool_call_id"):
        out["tool_call_id"] = message["tool_call_id"]
    return out


def rows(outputs):
    """A run's ``RolloutOutput`` rows as example id, prompt, completion (tool calls parsed),
    reward, metrics and error, in a stable order."""
    return sorted(
        (
            {
                "example_id": o["example_id"],
                "prompt": [_message(m) for m in o["prompt"]],
                "completion": [_message(m) for m in o["completion"]],
                "reward": o["reward"],
                "metrics": dict(o["metrics"]),
                "error": o.get("error"),
            }
            for o in outputs
        ),
        key=lambda r: (r["example_id"], json.dumps(r["completion"])),
    )


async def evaluate(mode, *args):
    import verifiers as vf

    env = vf.load_environment(ENV)
    if mode == "upclient":
        from verifiers.legacy.serve import ZMQEnvClient
        from verifiers.legacy.types import ClientConfig

        env.env_client = ZMQEnvClient(address=f"tcp://{args[0]}")
        await env.env_client.wait_for_server_startup(timeout=120)
        config = ClientConfig(api_base_url=args[1], api_key_var="OPENAI_API_KEY")
        out = await env.evaluate(
            config, "m", num_examples=EXAMPLES, rollouts_per_example=ROLLOUTS, on_progress=[]
        )
        await env.env_client.close()
    else:
        from openai import AsyncOpenAI

        workers = {}
        if mode == "ourclient":
            from verifiers.workers.remote import RemoteWorkers

            remote = RemoteWorkers([args[0]], None, connect_timeout=120)
            workers["env_workers"] = await remote.start()
        out = await env.evaluate(
            AsyncOpenAI(base_url=args[-1], api_key="x"),  # a default client, as users pass it
            "m",
            num_examples=EXAMPLES,
            rollouts_per_example=ROLLOUTS,
            **workers,
        )
    print("ROWS " + json.dumps(rows(out["outputs"])), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "upserver":  # upstream's server runs its own event loop
        from verifiers.legacy.serve import ZMQEnvServer

        ZMQEnvServer.run_server(ENV, address=f"tcp://127.0.0.1:{sys.argv[2]}", num_workers=1)
    else:
        asyncio.run(evaluate(*sys.argv[1:]))
