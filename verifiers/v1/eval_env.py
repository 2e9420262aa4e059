"""A v1 taskset run by the classic engine: ``TasksetEnvironment`` wraps the v1 env of a
taskset id as a classic ``Environment``, so ``vf-eval ID`` (and ``generate``/``evaluate``) run
it with the same flags, endpoints, ``results.jsonl``/``metadata.json``, summary and report as a
classic environment.

Each dataset row is one task of the taskset (its prompt as chat messages, ``info.v1_task`` its
index); a rollout plays one v1 episode against the run's endpoint and model, its completion is
the messages after the prompt, its reward and metrics those of the episode's trace (rewards
weighted and summed as ``Trace.reward`` does). Its token usage, turns, model time and
truncation are read off the episode's model calls into the state keys a classic rollout fills,
so a v1 row carries the same numbers a classic row does. Every episode is kept beside
``results.jsonl`` in ``traces.jsonl``, one ``WireEpisode`` a line (with its row's
``example_id`` and ``rollout_index``): the episode travels on the state as its JSON
(``v1_trace``), so the process that saves the rows writes it, whether the rollout ran there or
in an env worker, and a resumed run keeps the traces of exactly the rows it keeps. The
taskset's shared toolsets (``SharedToolsetConfig``) are served once per run, or once per env
worker, not per rollout (``verifiers.v1.held_serving``).

``vf.load_environment`` (and so vf-eval, its env workers, ``OWNER/NAME`` and ``NAME@VERSION``
ids) builds one for any package exporting a ``Taskset``: ``verifiers.v1.kind``, which
``verifiers.v1`` registers with the loader when a package imports it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from verifiers.envs.environment import Environment
from verifiers.messages import timing
from verifiers.rubrics.rubric import Rubric
from verifiers.v1.agent import ModelContext, prompt_messages
from verifiers.v1.chat import ClientPool, enter_pool, leave_pool, message_to_wire
from verifiers.v1.configs.agent import DEFAULT_MAX_TURNS
from verifiers.v1.configs.env import agent_configs
from verifiers.v1.episode import TRACES_FILE, Episode
from verifiers.v1.errors import RolloutError
from verifiers.v1.held_serving import HeldServing
from verifiers.v1.nodes import leaf_ids
from verifiers.v1.trace import TRUNCATING_STOPS, Trace
from verifiers.v1.trace_parts import Error
from verifiers.v1.utils.loaders import load_environment, resolve_env_config

TRACE_KEY = "v1_trace"
"""The state key of a rollout's episode as one JSON line (what ``traces.jsonl`` gets)."""
EPISODE_KEY = "_v1_episode"
"""The state key of the live episode (scored where the rollout ran; ``_`` keeps it off the
wire to the caller, which gets ``TRACE_KEY``), until ``TraceRubric`` reads its scores."""
ENGINE_SAMPLING: dict[str, Any] = {"n": 1, "extra_body": {}}
"""The classic engine's own sampling defaults (``Environment.sampling_args``), which a v1
model call makes anyway: left off the episode's context, so its agent config records what the
run asked for, as ``run_eval``'s does."""
DEFAULT_MAX_TASKS = 10_000
"""How many tasks of an infinite taskset become rows."""
MODEL_CONTEXTS_CACHED = 256


def trajectory(episode: Episode) -> list[dict[str, Any]]:
    """The episode's model calls as a classic rollout's trajectory steps, what a trainer reads
    (``verifiers.rl.algorithm.batching.samples_from_state``): per call, its prompt and reply
    and, when the server sent token ids, the tokens of its path in the trace's message graph
    (the prompt's nodes, then the reply node's generation prompt as prompt ids and its sampled
    tokens, with their logprobs, as completion ids), and the policy version the server
    reported as its ``response``. A call without token ids is a step without tokens, which a
    trainer refuses, naming the cause."""
    steps: list[dict[str, Any]] = []
    for trace in episode.traces:
        for call in trace.calls:
            if call.node is not None:
                step = _step(trace, call.node, call.finish_reason == "length")
                if call.policy_version is not None:  # what a trainer counts staleness by
                    step["response"] = {"policy_version": call.policy_version}
                steps.append(step)
    return steps


def _path(trace: Trace, node_id: int | None) -> list[int]:
    """The node ids from the graph's root to ``node_id`` (none for None)."""
    path: list[int] = []
    while node_id is not None:
        path.append(node_id)
        node_id = trace.nodes[node_id].parent
    path.reverse()
    return path


def _step(trace: Trace, reply_id: int, truncated: bool) -> dict[str, Any]:
    path = _path(trace, trace.nodes[reply_id].parent)
    reply = trace.nodes[reply_id]
    tokens = None
    if True in reply.mask:
        first = reply.mask.index(True)
        prompt_ids = [t for n in path for t in trace.nodes[n].token_ids] + reply.token_ids[:first]
        completion_ids = reply.token_ids[first:]
        tokens = {
            "prompt_ids": prompt_ids,
            "prompt_mask": [0] * len(prompt_ids),
            "completion_ids": completion_ids,
            "completion_mask": [1] * len(completion_ids),
            "completion_logprobs": list(reply.logprobs),
            "overlong_prompt": False,
            "is_truncated": truncated,
        }
    return {
        "prompt": [message_to_wire(trace.nodes[n].message) for n in path],
        "completion": [message_to_wire(reply.message)],
        "response": None,
        "tokens": tokens,
        "reward": None,
        "advantage": None,
        "is_truncated": truncated,
        "trajectory_id": trace.id,
        "extras": {},
    }


class TraceRubric(Rubric):
    """Scores a rollout from its episode's trace (the task's hooks already ran). A rollout
    rebuilt from a saved run (``vf-eval --rescore``: ``rescored``, its ``traces.jsonl`` line
    under ``TRACE_KEY``) has its episode scored again offline first (``verifiers.v1.rescore``)."""

    def __init__(self, env: TasksetEnvironment) -> None:
        super().__init__()
        self.env = env

    async def score_group(self, states: list[Any], score_sem: Any = None) -> None:
        """Each state's reward and metrics from its episode, which is then dropped from the
        state (its ``TRACE_KEY`` line stays): a run kept every live episode to its end, and the
        full garbage collections of a run walked them all. A state scored again reads its
        episode back from that line."""
        for state in states:
            if state.get("rescored") and EPISODE_KEY not in state:
                await self.env.rescore_state(state)
            episode = state.pop(EPISODE_KEY, None)
            if episode is None and isinstance(state.get(TRACE_KEY), str):
                from verifiers.v1.rescore import read_episode

                task = self.env.tasks[int((state.get("info") or {})["v1_task"])]
                episode = read_episode(state[TRACE_KEY], task)
            traces = episode.traces if isinstance(episode, Episode) else []
            reward = sum(t.reward for t in traces) if traces else 0.0
            metrics: dict[str, float] = {}
            for trace in traces:
                for name, value in trace.metrics.items():
                    metrics[name] = float(value or 0.0)
                for name, scored in trace.rewards.items():
                    metrics[name] = scored.score if scored is not None else 0.0
            state["reward"], state["metrics"] = reward, metrics
        mean = sum(s["reward"] for s in states) / len(states) if states else 0.0
        for state in states:
            state["advantage"] = state["reward"] - mean


def _tasks(taskset: Any, max_tasks: int) -> list[Any]:
    return list(taskset.head(max_tasks) if taskset.INFINITE else taskset)


class TasksetEnvironment(Environment):
    rollout_files = {TRACE_KEY: TRACES_FILE}

    def __init__(
        self,
        taskset_id: str,
        env: dict[str, Any] | None = None,
        max_tasks: int = DEFAULT_MAX_TASKS,
        eval_taskset: dict[str, Any] | None = None,
        default_max_turns: int | None = DEFAULT_MAX_TURNS,
        **kwargs: Any,
    ) -> None:
        """``env`` is the v1 ``[env]`` block (``agent``, ``taskset`` knobs...), laid under
        ``taskset.id``; its tasks are the train split. ``eval_taskset``: taskset knobs laid
        over the env's for the eval split (held-out tasks, e.g. ``{"split": "eval"}``); without
        it both splits are the same tasks. ``default_max_turns``: the cap of a seat that sets
        none (None: no cap, as upstream and ``run_eval``)."""
        raw = dict(env or {})
        raw["taskset"] = {**dict(raw.get("taskset") or {}), "id": taskset_id}
        config = resolve_env_config(raw)
        for role, agent in agent_configs(config).items():
            if agent.max_turns is None:
                setattr(config, role, agent.model_copy(update={"max_turns": default_max_turns}))
        self.v1_env = load_environment(config)
        self.tasks = _tasks(self.v1_env.taskset, max_tasks)
        rows = self._task_rows(taskset_id, 0)
        eval_rows = rows
        if eval_taskset is not None:
            from verifiers.v1.utils.tasksets import load_taskset

            held_out = resolve_env_config({**raw, "taskset": {**raw["taskset"], **eval_taskset}})
            self.tasks += _tasks(load_taskset(held_out.taskset), max_tasks)
            eval_rows = self._task_rows(taskset_id, len(rows))
        self._client_pool: tuple[asyncio.AbstractEventLoop, ClientPool] | None = None
        self._model_contexts: dict[tuple[Any, ...], ModelContext] = {}
        self._serving = HeldServing(self.v1_env)
        super().__init__(
            # rows, not a ``datasets.Dataset``: the base class builds that view only when asked,
            # and importing ``datasets`` (with pandas and pyarrow) tripled the objects every
            # full garbage collection of a run walks (a third of a v1 rollout's CPU)
            dataset=rows,
            eval_dataset=eval_rows,
            rubric=TraceRubric(self),
            **kwargs,
        )
        self.env_id = taskset_id
        self.identify_package(taskset_id)
        self.v1_env.agents(ModelContext())  # a harness or runtime this SDK lacks fails now

    def _task_rows(self, taskset_id: str, start: int) -> list[dict[str, Any]]:
        """One dataset row per task from ``self.tasks[start]`` on (``info.v1_task`` its index
        there; example ids from 0)."""
        rows: list[dict[str, Any]] = [
            {
                "example_id": i,
                "prompt": [message_to_wire(m) for m in prompt_messages(task)],
                "answer": str(getattr(task.data, "answer", "") or ""),
                "task": taskset_id,
                "info": {"v1_task": start + i},
            }
            for i, task in enumerate(self.tasks[start:])
        ]
        prompts: list[list[dict[str, Any]]] = [row["prompt"] for row in rows]
        if any(isinstance(m.get("content"), list) for p in prompts for m in p):
            # one column type for the ``datasets`` view: every content as parts when any has images
            for prompt in prompts:
                for m in prompt:
                    if isinstance(m.get("content"), str):
                        m["content"] = [{"type": "text", "text": m["content"]}]
        return rows

    def limit_note(self, rows: list[Any]) -> str | None:
        """A line for the end of the run when rollouts were cut off by a turn or token cap
        (``stop_condition`` one of ``TRUNCATING_STOPS``), naming the cap and how to raise it."""
        hits: dict[str, int] = {}
        for row in rows:
            stop = row.get("stop_condition")
            if stop in TRUNCATING_STOPS:
                hits[stop] = hits.get(stop, 0) + 1
        if not hits:
            return None
        role, agent = next(iter(agent_configs(self.v1_env.config).items()))
        said = ", ".join(f"{n} at {stop}" for stop, n in hits.items())
        return (
            f"{sum(hits.values())} of {len(rows)} rollouts were truncated ({said}; "
            f"{role}.max_turns is {agent.max_turns}): raise a cap with "
            f"""-a '{{"env": {{"{role}": {{"max_turns": N}}}}}}' (or max_output_tokens...)"""
        )

    def identify_package(self, taskset_id: str) -> None:
        """The installed distribution, version and content hash, as the classic loader records
        them: vf-eval reads the package's ``[tool.verifiers.eval]`` defaults (``max_tokens``...)
        through the distribution, and the run's metadata names what ran."""
        from verifiers.errors import EnvironmentNotFoundError
        from verifiers.loading.loader import dist_version, locate_environment, module_content_hash
        from verifiers.v1.utils.tasksets import import_taskset

        try:
            _, found, _ = locate_environment(taskset_id)
        except EnvironmentNotFoundError:
            return
        self.env_distribution = found.dist_name
        self.env_version = dist_version(found.dist_name)
        self.env_content_hash = module_content_hash(import_taskset(taskset_id))

    async def setup_state(self, state: Any, **kwargs: Any) -> Any:
        return state

    async def end_run(self) -> None:
        """The run's shared model clients and shared tool servers are bound to its event loop:
        closed with it (a new AsyncOpenAI per episode loaded the CA bundle each time, more CPU
        than the rest of a rollout; in env workers both live as long as the worker)."""
        await self._serving.release()
        pool, self._client_pool = self._client_pool, None
        if pool is not None and pool[0] is asyncio.get_running_loop():
            await pool[1].aclose()
        await super().end_run()

    async def rollout(self, input: Any, client: Any, model: str, sampling_args: Any = None) -> Any:
        state = await self.init_state(input, client, model, sampling_args)
        task = self.tasks[int((input.get("info") or {})["v1_task"])]
        context = self._model_context(client, model, sampling_args)
        timing.start_generation(state["timing"])
        loop = asyncio.get_running_loop()
        if self._client_pool is None or self._client_pool[0] is not loop:
            # one client per endpoint for the run's episodes (its connections are this loop's)
            self._client_pool = (loop, ClientPool())
        try:  # the taskset's shared tool servers: up once for the run (or worker), reused
            await self._serving.ready()
        except Exception as exc:  # one that cannot be served fails each rollout, naming it
            episode = self.v1_env.new_episode(task)
            episode.errors.append(Error(type=type(exc).__name__, message=str(exc)))
        else:
            entered = enter_pool(self._client_pool[1])
            try:
                episode = await self.v1_env.run_episode(task, context)
            finally:
                leave_pool(entered)
        timing.end_generation(state["timing"])
        state[EPISODE_KEY] = episode
        self.record_calls(state, episode)
        state["trajectory"] = trajectory(episode)
        traces = episode.traces
        if traces:  # the last branch's messages (``Trace.branches[-1]`` without building all)
            leaves = leaf_ids(traces[-1].nodes)
            nodes = traces[-1].nodes
            path = [nodes[n].message for n in _path(traces[-1], leaves[-1])] if leaves else []
            # the prompt is what came before the first reply (a harness may have added to it)
            prompt_len = next(
                (i for i, m in enumerate(path) if m.role == "assistant"), len(state["prompt"])
            )
            state["completion"] = [message_to_wire(m) for m in path[prompt_len:]]
        else:
            state["completion"] = []
        errors = [e for t in traces for e in t.errors] + episode.errors
        if errors:
            state["error"] = RolloutError(f"{errors[-1].type}: {errors[-1].message}")
        state["is_completed"] = True
        state[TRACE_KEY] = episode.model_dump_json()
        return state

    def _model_context(self, client: Any, model: str, sampling_args: Any) -> ModelContext:
        """The run's model as its episodes' agents read it (only read): one record per
        endpoint, model and sampling, shared by the rollouts that call them alike (a record
        per rollout was more objects held across its model calls for the collector to walk)."""
        native = getattr(client, "client", None)
        base_url = str(getattr(client, "base_url", "") or "") or None
        # the lean client holds its key itself; an SDK client wraps one that does
        api_key = getattr(native, "api_key", None) or getattr(client, "api_key", None)
        sampling = {
            k: v
            for k, v in dict(sampling_args or {}).items()
            if v is not None and not (k in ENGINE_SAMPLING and ENGINE_SAMPLING[k] == v)
        }
        key = (base_url, model, api_key, repr(sampling))
        cached = self._model_contexts.get(key)
        if cached is None:
            if len(self._model_contexts) >= MODEL_CONTEXTS_CACHED:  # sampling set per call
                self._model_contexts.clear()
            cached = self._model_contexts[key] = ModelContext(
                base_url=base_url, model=model, api_key=api_key, sampling=sampling
            )
        return cached

    async def rescore_state(self, state: Any) -> None:
        """A recorded rollout's episode (its ``traces.jsonl`` line, which ``vf-eval --rescore``
        put under ``TRACE_KEY``) scored again with the taskset as installed now; the new
        episode replaces the line, so the rescored run's ``traces.jsonl`` has the new scores."""
        from verifiers.v1.rescore import rescore_episode

        line = state.get(TRACE_KEY)
        if not isinstance(line, str):
            raise RolloutError(
                f"example {state.get('example_id')} rollout {state.get('rollout_index')} has no "
                f"line in {TRACES_FILE}: a v1 rollout is re-scored from its trace"
            )
        task = self.tasks[int((state.get("info") or {})["v1_task"])]
        episode = await rescore_episode(self.v1_env, task, line)
        state[EPISODE_KEY] = episode
        state[TRACE_KEY] = episode.model_dump_json()

    def record_calls(self, state: Any, episode: Episode) -> None:
        """The episode's model calls as a classic rollout counts its own: usage summed over
        every call (prompt tokens with cache reads, as the server reports ``prompt_tokens``),
        one turn and one model span per reply, truncation and the stop condition."""
        for trace in episode.traces:
            for call in trace.calls:
                if call.time.end:
                    timing.add_span(state["timing"], "model", call.time.start, call.time.end)
                if call.usage is None:
                    continue
                if self.release.typed_messages:
                    self.increment_state_usage(
                        state, call.usage.input_tokens, call.usage.completion_tokens
                    )
                else:  # the dict era's counters (``model_turn.dict_step``)
                    usage = state.setdefault("usage", {"prompt_tokens": 0, "completion_tokens": 0})
                    usage["prompt_tokens"] = usage.get("prompt_tokens", 0) + call.usage.input_tokens
                    usage["completion_tokens"] = (
                        usage.get("completion_tokens", 0) + call.usage.completion_tokens
                    )
        state["turn"] = episode.num_turns
        state["is_truncated"] = any(trace.is_truncated for trace in episode.traces)
        if episode.traces:
            state["stop_condition"] = episode.traces[-1].stop_condition
