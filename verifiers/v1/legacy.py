"""The bridge between classic rollouts and v1 traces, both ways, so that one viewer, one data
path and one trainer serve both kinds of environment.

Classic to v1 (what upstream 0.3.0's legacy bridge did, ``rollout_output_to_trace``): a classic
rollout (a ``results.jsonl`` row, or the ``RolloutOutput`` a classic run returns) becomes a
``Trace`` whose message graph holds its prompt and every model reply, with the rollout's
reward (as the one reward ``reward``), metrics, info, stop condition (truncation in v1's words),
error and timing; its token ids and logprobs when the row kept its ``trajectory``
(``--state-columns trajectory``), else one turn per assistant message and the row's total
usage on its last call. ``write_traces`` writes a classic run's ``traces.jsonl`` from its
``results.jsonl`` (``vf-eval --traces``), one ``WireEpisode`` a line, as a v1 run writes it.

V1 to classic is ``verifiers.v1.trace_rows`` (re-exported here): each trace of a
``traces.jsonl`` becomes the row shape ``results.jsonl`` has.

``run_legacy_eval`` runs a classic environment through the v1 eval path (upstream's
``[legacy]`` block): the classic engine plays it, and its rollouts come back as v1 episodes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from verifiers.v1 import graph
from verifiers.v1.configs.agent import AgentConfig
from verifiers.v1.configs.cli.eval import EvalConfig
from verifiers.v1.episode import TRACES_FILE, Episode
from verifiers.v1.task_data import WireTaskData
from verifiers.v1.trace import (
    AgentInfo,
    AgentSpan,
    Error,
    ModelCall,
    Reward,
    TimeSpan,
    TimeSplit,
    Timing,
    Trace,
    TraceTask,
)
from verifiers.v1.trace_rows import read_episodes, read_traces_run, trace_row
from verifiers.v1.types import (
    AssistantMessage,
    Message,
    Response,
    SystemMessage,
    ToolCall,
    ToolMessage,
    TurnTokens,
    Usage,
    UserMessage,
    content_to_parts,
)

_FINISH_REASONS = frozenset({"stop", "length", "tool_calls"})
_TRUNCATION_STOPS = {  # classic stop names that mean truncation, in v1's vocabulary
    "max_turns_reached": "max_turns",
    "prompt_too_long": "context_length",
    "max_total_completion_tokens_reached": "max_output_tokens",
}


__all__ = [
    "read_episodes",
    "read_traces_run",
    "rollout_output_to_trace",
    "run_legacy_eval",
    "trace_row",
    "write_traces",
]


async def run_legacy_eval(
    config: EvalConfig, *, env_workers: Any = None
) -> list[Episode[Any, Any, Any]]:
    """Evaluate the classic environment ``config.legacy`` names through the classic engine
    against the config's endpoint and model, its groups in ``env_workers`` when given
    (``run_eval_server``); each rollout bridged to a v1 trace (``rollout_output_to_trace``), one
    single-trace episode per rollout, appended to ``traces.jsonl`` under ``output_dir`` as each
    group finishes. ``config.resume`` keeps a run's finished groups and runs the others."""
    import os

    import verifiers
    from verifiers.clients import OpenAICompatibleClient
    from verifiers.v1.cli.eval.resume import appender, owed_counts, run_dir

    legacy = config.legacy
    if legacy.id is None:
        raise ValueError("run_legacy_eval needs [legacy] id: the classic environment to run")
    base_url = config.client.base_url or os.environ.get("OPENAI_BASE_URL")
    if not base_url:
        raise ValueError(
            "run_legacy_eval needs an endpoint: set client.base_url or OPENAI_BASE_URL"
        )
    out = run_dir(config)
    env = verifiers.load_environment(legacy.id, **legacy.args)
    if legacy.extra_env_kwargs:
        env.set_kwargs(**legacy.extra_env_kwargs)
    # the rows evaluate() picks (its shuffle is a seed-0 shuffle), keyed as upstream keys them
    picked = env.dataset_rows("eval", n=config.num_tasks or -1, seed=0 if config.shuffle else None)
    kept, counts = owed_counts(
        config,
        [int(row["example_id"]) for row in picked],
        key_of=lambda data: int(data.get("idx", -1)),
        whole_task=True,  # a classic rubric may score a group together: redo it whole
    )
    append = appender(out)
    done: dict[int, list[Episode[Any, Any, Any]]] = {}

    def finished(_done: int, _total: int, records: list[dict[str, Any]]) -> None:
        for record in records:
            episode = Episode.of(rollout_output_to_trace(record), env=legacy.id or "")
            append(episode)
            done.setdefault(int(record["example_id"]), []).append(episode)

    client = OpenAICompatibleClient(
        base_url,
        os.environ.get(config.client.api_key_var),
        headers=dict(config.client.headers) or None,
    )
    env.rollouts_per_example = config.num_rollouts
    await env.generate(
        [row for row, n in zip(picked, counts, strict=True) if n],
        client,
        config.model,
        sampling_args=config.sampling.model_dump(exclude_none=True),
        rollouts_per_example=config.num_rollouts,
        max_concurrent=config.max_concurrent or -1,
        state_columns=["trajectory"],  # the model calls' tokens, when the endpoint sent them
        on_progress=finished,
        env_workers=env_workers,
    )
    return kept + [e for row in picked for e in done.pop(int(row["example_id"]), [])]


# --- classic rollout -> v1 trace -----------------------------------------------------------------


def _as_dict(obj: Any) -> Any:
    return obj.model_dump() if hasattr(obj, "model_dump") else obj


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def _tool_calls(raw: Any) -> list[ToolCall] | None:
    calls = []
    for call in raw or []:
        call = _as_dict(call)
        if not isinstance(call, dict):
            continue
        fn = call.get("function") or call  # OpenAI's {id, function: {name, arguments}}
        arguments = fn.get("arguments")
        calls.append(
            ToolCall(
                id=call.get("id") or "",
                name=fn.get("name") or "",
                arguments=arguments if isinstance(arguments, str) else json.dumps(arguments or {}),
            )
        )
    return calls or None


def _message(raw: Any) -> Message | None:
    m = _as_dict(raw)
    if not isinstance(m, dict):
        return None
    role = m.get("role")
    if role == "system":
        return SystemMessage(content=content_to_parts(m.get("content")))
    if role == "user":
        return UserMessage(content=content_to_parts(m.get("content")))
    if role == "assistant":
        return AssistantMessage(
            content=m.get("content"),
            reasoning_content=m.get("reasoning_content"),
            tool_calls=_tool_calls(m.get("tool_calls")),
        )
    if role == "tool":
        return ToolMessage(
            tool_call_id=m.get("tool_call_id") or "", content=content_to_parts(m.get("content"))
        )
    return None


def _messages(raw: Any) -> list[Message]:
    if isinstance(raw, str):  # a completions-API rollout: the text is the message
        return [UserMessage(content=raw)]
    return [m for m in (_message(x) for x in raw or []) if m is not None]


def _usage(raw: Any) -> Usage | None:
    raw = _as_dict(raw)
    if not isinstance(raw, dict) or "prompt_tokens" not in raw:
        return None
    return Usage(
        prompt_tokens=int(raw.get("prompt_tokens") or 0),
        completion_tokens=int(raw.get("completion_tokens") or 0),
    )


def _step_turn(step: Mapping[str, Any]) -> tuple[list[Message], Response] | None:
    """One trajectory step as (prompt, response): its reply is the step's first assistant
    message, or the response's own message; its tokens, usage and finish reason as recorded."""
    raw = _as_dict(step.get("response"))
    raw = raw if isinstance(raw, dict) else {}
    choice = (raw.get("choices") or [{}])[0] if raw.get("choices") else {}
    replies = [m for m in _messages(step.get("completion")) if isinstance(m, AssistantMessage)]
    reply = replies[0] if replies else _message(raw.get("message") or choice.get("message"))
    if not isinstance(reply, AssistantMessage):
        return None
    tokens = _as_dict(step.get("tokens"))
    turn_tokens = None
    if isinstance(tokens, dict) and (tokens.get("prompt_ids") or tokens.get("completion_ids")):
        turn_tokens = TurnTokens(
            prompt_ids=list(tokens.get("prompt_ids") or []),
            completion_ids=list(tokens.get("completion_ids") or []),
            completion_logprobs=list(tokens.get("completion_logprobs") or []),
        )
    finish = raw.get("finish_reason") or choice.get("finish_reason")
    response = Response(
        id=str(raw.get("id") or ""),
        created=int(raw.get("created") or 0),
        model=str(raw.get("model") or ""),
        message=reply,
        finish_reason=finish if finish in _FINISH_REASONS else None,
        usage=_usage(raw.get("usage")),
        tokens=turn_tokens,
    )
    return _messages(step.get("prompt")), response


def _message_turns(out: Mapping[str, Any]) -> list[tuple[list[Message], Response]]:
    """A row without its trajectory: one turn per assistant message of its completion."""
    prompt, completion = _messages(out.get("prompt")), out.get("completion")
    if isinstance(completion, str):
        completion = [{"role": "assistant", "content": completion}]
    messages = _messages(completion)
    turns = []
    for i, message in enumerate(messages):
        if isinstance(message, AssistantMessage):
            reply = Response(id="", created=0, model="", message=message, finish_reason=None)
            turns.append(([*prompt, *messages[:i]], reply))
    return turns


def _timing(raw: Any) -> Timing:
    """Durations only (a classic row keeps no clock times): each span runs from 0."""
    raw = raw if isinstance(raw, dict) else {}

    def seconds(key: str) -> float:
        value = raw.get(f"{key}_ms")
        return float(value) / 1000.0 if isinstance(value, int | float) else 0.0

    return Timing(
        start=0.0,
        agent=AgentSpan(
            end=seconds("generation"),
            model=TimeSplit(duration=seconds("model")),
            harness=TimeSplit(duration=seconds("env")),
        ),
        scoring=TimeSpan(end=seconds("scoring")),
    )


def _task(task_idx: int, prompt: Any, answer: Any) -> WireTaskData:
    """The rollout's task: its system message as ``system_prompt``, its user messages joined as
    ``prompt``, its reference ``answer`` as an extra field."""
    system, users = None, []
    for m in prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]:
        m = _as_dict(m)
        if not isinstance(m, dict):
            continue
        if m.get("role") == "system" and system is None:
            system = _text(m.get("content"))
        elif m.get("role") == "user":
            users.append(_text(m.get("content")))
    extra = {"answer": answer} if answer not in (None, "") else {}
    return WireTaskData(idx=task_idx, prompt="\n\n".join(users), system_prompt=system, **extra)


def rollout_output_to_trace(out: Mapping[str, Any], task_idx: int | None = None) -> Trace:
    """A classic rollout (a ``results.jsonl`` row or a ``RolloutOutput``) as a v1 ``Trace``
    (see the module doc); ``task_idx`` defaults to the row's ``example_id``."""
    idx = int(out.get("example_id") or 0) if task_idx is None else task_idx
    raw_error = out.get("error")
    errors = []
    if raw_error:
        if isinstance(raw_error, dict):
            errors.append(
                Error(
                    type=str(raw_error.get("type") or "Error"),
                    message=str(raw_error.get("message") or raw_error),
                    status_code=raw_error.get("status_code"),
                )
            )
        else:
            errors.append(Error(type="Error", message=str(raw_error)))
    stop = out.get("stop_condition")
    if out.get("is_truncated"):
        stop = _TRUNCATION_STOPS.get(str(stop), "max_output_tokens")
    trace: Trace = Trace[WireTaskData](
        task=TraceTask(type="Task", data=_task(idx, out.get("prompt"), out.get("answer"))),
        agent=AgentInfo(config=AgentConfig()),
        rewards={"reward": Reward(score=float(out.get("reward") or 0.0))},
        metrics={k: float(v) for k, v in (out.get("metrics") or {}).items() if v is not None},
        info=dict(out.get("info") or {}) if isinstance(out.get("info"), dict) else {},
        is_completed=bool(out.get("is_completed", True)),
        ok=not errors,
        stop_condition=stop,
        errors=errors,
        timing=_timing(out.get("timing")),
    )
    steps = [s for s in out.get("trajectory") or [] if isinstance(s, dict)]
    stepped = [t for t in (_step_turn(s) for s in steps) if t is not None]
    turns = stepped or _message_turns(out)
    model = str(out.get("model") or "") or None
    for prompt, response in turns:
        node = graph.prepare_turn(trace, prompt).commit(response)
        call = ModelCall(
            node=node, model=model, finish_reason=response.finish_reason, usage=response.usage
        )
        trace.calls.append(call)
    if not stepped and trace.calls:  # the row's total usage, on its last call
        trace.calls[-1].usage = _usage(out.get("usage"))
    return trace


def write_traces(run_dir: str | Path, env_id: str | None = None) -> Path:
    """Write ``traces.jsonl`` for the classic run in ``run_dir`` from its ``results.jsonl``:
    one single-trace ``Episode`` a line; the file's path."""
    from verifiers.results.writer import read_rows

    run = Path(run_dir)
    if not (run / "results.jsonl").is_file():
        raise FileNotFoundError(f"{run} is not a vf-eval run directory (no results.jsonl)")
    if env_id is None:
        meta = run / "metadata.json"
        env_id = json.loads(meta.read_text()).get("env_id") if meta.exists() else None
    path = run / TRACES_FILE
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for row in read_rows(run / "results.jsonl"):
            episode = Episode.of(rollout_output_to_trace(row), env=env_id or "")
            f.write(episode.model_dump_json() + "\n")
    tmp.replace(path)
    return path
