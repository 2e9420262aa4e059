"""Environment: a dataset, a rollout protocol and a rubric.

Subclasses define ``setup_state`` and ``rollout`` (``MultiTurnEnv`` does, with ``env_response`` as
the hook); this base class formats datasets, talks to the model through the client layer, and
runs many rollouts concurrently with ``generate``/``evaluate`` (see ``verifiers.envs.generation``).
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import random
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from verifiers import decorators
from verifiers.clients import resolve_client
from verifiers.clients.responses import (
    finish_reason,
    first_choice,
    response_messages,
    response_tokens,
    response_usage,
)
from verifiers.concurrency import maybe_await
from verifiers.envs.dataset_format import format_rows, to_rows
from verifiers.envs.messages import strip_nones_from_content
from verifiers.errors import EmptyModelResponseError, record_error
from verifiers.parsers.parser import Parser
from verifiers.rubrics.rubric import Rubric
from verifiers.types import (
    GenerateOutputs,
    Messages,
    MessageType,
    RolloutInput,
    SamplingArgs,
    State,
    TrajectoryStep,
)

if TYPE_CHECKING:
    from datasets import Dataset

logger = logging.getLogger("verifiers.envs")


class Environment(ABC):
    """Base class of every environment (the classic ``verifiers`` constructor and methods).

    Lifecycle hooks are collected once per instance into ``_stop_conditions``,
    ``_cleanup_handlers`` and ``_teardown_handlers`` (highest priority first, ties by name).
    """

    def __init__(
        self,
        dataset: Dataset | list[dict[str, Any]] | None = None,
        eval_dataset: Dataset | list[dict[str, Any]] | None = None,
        system_prompt: str | None = None,
        few_shot: list[dict[str, Any]] | None = None,
        parser: Parser | None = None,
        rubric: Rubric | None = None,
        sampling_args: SamplingArgs | None = None,
        message_type: MessageType = "chat",
        oai_tools: list[dict[str, Any]] | None = None,
        max_workers: int = 512,
        env_id: str | None = None,
        env_args: dict[str, Any] | None = None,
        map_kwargs: dict[str, Any] | None = None,
        max_seq_len: int | None = None,
        **kwargs: Any,
    ) -> None:
        self.logger = logging.getLogger(f"verifiers.envs.{type(self).__name__}")
        if message_type not in ("chat", "completion"):
            raise ValueError(f"message_type must be 'chat' or 'completion', got {message_type!r}")
        if message_type == "completion" and (system_prompt or few_shot):
            raise ValueError(
                'The fields "system_prompt" and "few_shot" are not supported for completion tasks. '
                'Use message_type="chat" instead, or pre-format your dataset with a "prompt" column.'
            )
        self.message_type: MessageType = message_type
        self.system_prompt = system_prompt
        self.few_shot = few_shot
        self.parser = parser or Parser()
        self.rubric = rubric or Rubric()
        if type(self.parser) is not type(self.rubric.parser):
            self.logger.warning(
                "The parser and rubric parser are different. This may cause unexpected behavior."
            )
        self.sampling_args: SamplingArgs = {"n": 1, "extra_body": {}}
        for key, value in (sampling_args or {}).items():
            if key == "extra_body":
                self.sampling_args["extra_body"].update(value or {})
            else:
                self.sampling_args[key] = value
        self.oai_tools = oai_tools
        self.max_workers = max_workers
        self.env_id = env_id or ""
        self.env_args = dict(env_args or {})
        self.map_kwargs = dict(map_kwargs or {})
        self.max_seq_len = max_seq_len
        self.rollouts_per_example: int | None = None
        # Where the code came from: set by load_environment, recorded in results metadata.
        self.env_version: str | None = None
        self.env_distribution: str | None = None
        self.env_content_hash: str | None = None
        for key, value in kwargs.items():
            setattr(self, key, value)
        if dataset is None and eval_dataset is None:
            raise ValueError("Either dataset or eval_dataset must be provided")
        self._rows: dict[str, list[dict[str, Any]] | None] = {
            "train": self.format_rows(dataset) if dataset is not None else None,
            "eval": self.format_rows(eval_dataset) if eval_dataset is not None else None,
        }
        self._hf: dict[str, Dataset | None] = {"train": None, "eval": None}
        self._torn_down = False
        self.__post_init__()

    def __post_init__(self) -> None:
        """Collect the ``@vf.stop`` / ``@vf.cleanup`` / ``@vf.teardown`` methods of this instance."""
        self._stop_conditions = decorators.collect(self, "stop")
        self._cleanup_handlers = decorators.collect(self, "cleanup")
        self._teardown_handlers = decorators.collect(self, "teardown")

    # --- datasets ------------------------------------------------------------------------------
    # Rows are kept as formatted dicts; the ``datasets.Dataset`` views are built on first access,
    # because importing ``datasets`` alone costs ~125 MB of memory that evaluation never needs.
    def format_rows(
        self,
        dataset: Dataset | list[dict[str, Any]],
        system_prompt: str | None = None,
        few_shot: list[dict[str, Any]] | None = None,
        question_key: str = "question",
        answer_key: str = "answer",
    ) -> list[dict[str, Any]]:
        """Build ``prompt`` from ``question`` (+ system prompt, few-shot), add ``example_id`` and
        ``task`` (the env id, or "default").

        Bad rows fail here, before any model call, with the row number and what is wrong.
        """
        return format_rows(
            to_rows(dataset),
            message_type=self.message_type,
            system_prompt=system_prompt if system_prompt is not None else self.system_prompt,
            few_shot=few_shot if few_shot is not None else self.few_shot,
            question_key=question_key,
            answer_key=answer_key,
            default_task=self.env_id or "default",
        )

    def format_dataset(
        self,
        dataset: Dataset | list[dict[str, Any]],
        system_prompt: str | None = None,
        few_shot: list[dict[str, Any]] | None = None,
        question_key: str = "question",
        answer_key: str = "answer",
        map_kwargs: dict[str, Any] | None = None,
    ) -> Dataset:
        """``format_rows`` as a ``datasets.Dataset`` (classic API)."""
        from datasets import Dataset

        return Dataset.from_list(
            self.format_rows(dataset, system_prompt, few_shot, question_key, answer_key)
        )

    def _view(self, split: str) -> Dataset | None:
        if self._hf[split] is None and self._rows[split] is not None:
            from datasets import Dataset

            self._hf[split] = Dataset.from_list(self._rows[split])
        return self._hf[split]

    def _assign(self, split: str, dataset: Any) -> None:
        if dataset is None:
            self._rows[split] = None
        elif (
            hasattr(dataset, "column_names")
            and "prompt" in dataset.column_names
            and ("example_id" in dataset.column_names)
        ):
            self._rows[split] = dataset.to_list()  # already formatted (e.g. a filtered view)
        else:
            self._rows[split] = self.format_rows(dataset)
        self._hf[split] = None

    @property
    def dataset(self) -> Dataset | None:
        return self._view("train")

    @dataset.setter
    def dataset(self, value: Any) -> None:
        self._assign("train", value)

    @property
    def eval_dataset(self) -> Dataset | None:
        return self._view("eval")

    @eval_dataset.setter
    def eval_dataset(self, value: Any) -> None:
        self._assign("eval", value)

    def get_dataset(self, n: int = -1, seed: int | None = None) -> Dataset:
        """The training split, shuffled by ``seed`` (a new view: the split keeps its order)."""
        if self._rows["train"] is None:
            raise ValueError("dataset is not set")
        return _subset(self.dataset, n, seed)

    def get_eval_dataset(self, n: int = -1, seed: int | None = None) -> Dataset:
        if self._rows["eval"] is None:
            self.logger.warning("eval_dataset is not set, falling back to train dataset")
            return self.get_dataset(n, seed)
        return _subset(self.eval_dataset, n, seed)

    def dataset_rows(
        self, split: str = "eval", n: int = -1, seed: int | None = None
    ) -> list[dict[str, Any]]:
        """Formatted rows of a split ("eval" falls back to "train"), optionally shuffled and cut.

        Always a new list: the environment's own order is never changed.
        """
        rows = self._rows[split] if self._rows[split] is not None else self._rows["train"]
        if rows is None:
            raise ValueError("dataset is not set")
        rows = random.Random(seed).sample(rows, len(rows)) if seed is not None else list(rows)
        return rows[:n] if n is not None and n > 0 else rows

    def get_eval_inputs(
        self, num_examples: int = -1, rollouts_per_example: int = 1
    ) -> list[RolloutInput]:
        """Eval rows, each repeated ``rollouts_per_example`` times (the classic input list)."""
        rows = self.dataset_rows("eval", n=num_examples)
        return [dict(row) for row in rows for _ in range(max(rollouts_per_example, 1))]  # type: ignore[misc]

    def set_max_seq_len(self, max_seq_len: int | None) -> None:
        self.max_seq_len = max_seq_len

    def add_rubric(self, rubric: Rubric) -> None:
        """Score with ``rubric`` too: rewards add up with the existing rubric's (a RubricGroup)."""
        from verifiers.rubrics.rubric_group import RubricGroup

        if isinstance(self.rubric, RubricGroup):
            self.rubric.rubrics.append(rubric)
        else:
            self.rubric = RubricGroup(rubrics=[self.rubric, rubric])

    # --- model calls ---------------------------------------------------------------------------
    def request_args(
        self, sampling_args: SamplingArgs | None, message_type: MessageType
    ) -> SamplingArgs:
        """Sampling args as the classic SDK sends them: ``max_tokens`` is ``max_completion_tokens``
        for chat, None values are dropped, and ``n`` is 1 (a group is separate rollouts)."""
        args = {k: v for k, v in (sampling_args or {}).items() if v is not None}
        if message_type == "chat" and "max_tokens" in args:
            args["max_completion_tokens"] = args.pop("max_tokens")
        if args.get("n", 1) != 1:
            args["n"] = 1
        return args

    async def get_model_response(
        self,
        client: Any = None,
        model: Any = None,
        prompt: Messages | None = None,
        oai_tools: list[dict[str, Any]] | None = None,
        sampling_args: SamplingArgs | None = None,
        message_type: MessageType | None = None,
        *,
        state: State | None = None,
        prompt_messages: Messages | None = None,
        **kwargs: Any,
    ) -> Any:
        """One model call. Both classic signatures work: ``(client, model, prompt, oai_tools,
        sampling_args, message_type)`` (v0.1.8) and ``(state, prompt_messages)`` (v0.1.9+).

        Raises a typed ``ModelError`` after the client's retries; an overlong prompt raises
        ``OverlongPromptError``.
        """
        if isinstance(client, State) or state is not None:
            state = client if isinstance(client, State) else state
            prompt = prompt_messages if prompt_messages is not None else (prompt or model)
            client, model = state["client"], state["model"]
            oai_tools = state.get("oai_tools")
            sampling_args = state.get("sampling_args")
        message_type = message_type or self.message_type
        model_client = resolve_client(client)
        args = self.request_args(sampling_args, message_type)
        if message_type == "chat":
            if not isinstance(prompt, list):
                raise TypeError("chat environments need a list of messages as the prompt")
            return await model_client.chat(
                model=model,
                messages=strip_nones_from_content(prompt),
                tools=oai_tools or None,
                sampling_args=args,
            )
        if oai_tools:
            raise ValueError("oai_tools are not supported for completion tasks.")
        if not isinstance(prompt, str):
            raise TypeError("completion environments need a string prompt")
        return await model_client.complete(model=model, prompt=prompt, sampling_args=args)

    def merge_sampling_args(self, sampling_args: SamplingArgs | None) -> SamplingArgs:
        merged = {k: v for k, v in self.sampling_args.items() if k != "extra_body"}
        extra = dict(self.sampling_args.get("extra_body") or {})
        for key, value in (sampling_args or {}).items():
            if key == "extra_body":
                extra.update(value or {})
            else:
                merged[key] = value
        merged["extra_body"] = extra
        return merged

    # --- rollout state -------------------------------------------------------------------------
    async def init_state(
        self,
        input: RolloutInput,
        client: Any,
        model: str,
        sampling_args: SamplingArgs | None = None,
    ) -> State:
        """A fresh state for one rollout; the row is copied, so rollouts never share it."""
        row = copy.deepcopy(dict(input))
        if isinstance(row.get("info"), str):
            row["info"] = json.loads(row["info"]) if row["info"].strip() else {}
        row.setdefault("info", {})
        row.setdefault("task", self.env_id or "default")
        row.setdefault("example_id", 0)
        info = row["info"] if isinstance(row["info"], dict) else {}
        state = State(input=row)
        state.update(
            client=client,
            model=model,
            sampling_args=self.merge_sampling_args(sampling_args),
            is_completed=False,
            stop_condition=None,
            oai_tools=info.get("oai_tools") or self.oai_tools,
            trajectory=[],
            trajectory_id=uuid.uuid4().hex,
            responses=[],
            completion=None,
            turn=0,
            reward=None,
            advantage=None,
            metrics=None,
            error=None,
            prompt_too_long=False,
            is_truncated=False,
            usage={"prompt_tokens": 0, "completion_tokens": 0},
            timing={
                "generation_ms": 0.0,
                "scoring_ms": 0.0,
                "total_ms": 0.0,
                "model_ms": 0.0,
                "start_time": time.time(),
            },
        )
        return state

    @abstractmethod
    async def setup_state(self, state: State, **kwargs: Any) -> State:
        """Add environment-specific fields to a new rollout's state."""
        return state

    @abstractmethod
    async def rollout(
        self,
        input: RolloutInput,
        client: Any,
        model: str,
        sampling_args: SamplingArgs | None = None,
    ) -> State:
        """Run one rollout to completion; errors are recorded on the returned state."""

    def make_step(self, state: State, prompt: Messages, response: Any) -> TrajectoryStep:
        """The trajectory step for one reply (tokens, truncation); counts its usage on ``state``."""
        new = response_messages(response, self.message_type)
        prompt_tokens, completion_tokens = response_usage(response)
        state["usage"]["prompt_tokens"] += prompt_tokens
        state["usage"]["completion_tokens"] += completion_tokens
        tokens = response_tokens(response, self.message_type, self.max_seq_len)
        truncated = finish_reason(response) == "length" or bool(tokens and tokens["is_truncated"])
        if truncated:
            state["is_truncated"] = True
        state["responses"].append(response)
        state["turn"] = state.get("turn", 0) + 1
        return {
            "prompt": prompt,
            "completion": new,
            "response": response,
            "tokens": tokens,
            "reward": None,
            "advantage": None,
            "is_truncated": truncated,
            "trajectory_id": state.get("trajectory_id", ""),
            "extras": {},
        }

    def check_not_empty(self, step: TrajectoryStep) -> None:
        """Raise ``EmptyModelResponseError`` for a reply with no content and no tool calls.

        Called after the step is recorded, so a trainer still learns from empty replies."""
        new = step["completion"]
        if self.message_type == "chat":
            empty = not new or (not new[0].get("content") and not new[0].get("tool_calls"))
        else:
            empty = not new
        if empty and first_choice(step["response"]) is not None:
            raise EmptyModelResponseError(
                "the model returned no content and no tool calls "
                f"(finish_reason={finish_reason(step['response'])!r})"
            )

    def record_model_response(self, state: State, prompt: Messages, response: Any) -> Messages:
        """Append the reply to the trajectory; returns the new messages (see ``check_not_empty``)."""
        step = self.make_step(state, prompt, response)
        state["trajectory"].append(step)
        self.check_not_empty(step)
        return step["completion"]

    async def end_run(self) -> None:
        """Release what was bound to this run's event loop (e.g. warm sandbox pools); called by
        ``generate`` when it finishes, however it finishes."""
        return None

    def run_metadata(self) -> dict[str, Any]:
        """Extra facts for a run's metadata.json (e.g. the sandbox isolation mode)."""
        return {}

    def monitor_metrics(self, state: State) -> dict[str, float]:
        """Metrics every rollout of this kind reports without a reward function (weight 0)."""
        return {}

    # --- lifecycle -----------------------------------------------------------------------------
    async def _cleanup(self, state: State) -> None:
        """Run every ``@vf.cleanup`` handler; one that raises is logged and recorded, the rest run."""
        for handler in self._cleanup_handlers:
            try:
                await maybe_await(handler, state)
            except Exception as exc:
                self.logger.warning("cleanup %s failed: %s", handler.__name__, exc)
                state.setdefault("cleanup_errors", []).append(
                    f"{handler.__name__}: {type(exc).__name__}: {exc}"
                )

    run_cleanup = _cleanup

    async def _teardown(self) -> None:
        """Run ``@vf.teardown`` handlers once (sandboxes, servers, pools the environment holds)."""
        if self._torn_down:
            return
        self._torn_down = True
        for handler in self._teardown_handlers:
            try:
                await maybe_await(handler)
            except Exception as exc:
                self.logger.warning("teardown %s failed: %s", handler.__name__, exc)

    async def teardown(self) -> None:
        await self._teardown()

    async def __aenter__(self) -> Environment:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._teardown()

    # --- running many rollouts -----------------------------------------------------------------
    async def run_rollout(
        self,
        sem: Any,
        input: RolloutInput,
        client: Any,
        model: str,
        sampling_args: SamplingArgs | None = None,
    ) -> State:
        """One rollout under ``sem``; an override that raises still yields a state with the error."""
        async with sem:
            try:
                return await self.rollout(input, client, model, sampling_args)
            except Exception as exc:
                state = await Environment.init_state(self, input, client, model, sampling_args)
                record_error(state, exc, phase="rollout")
                state["stop_condition"] = "has_error"
                state["is_completed"] = True
                state["completion"] = [] if self.message_type == "chat" else ""
                return state

    async def run_group(
        self,
        group_inputs: list[RolloutInput],
        client: Any,
        model: str,
        gen_sampling_args: SamplingArgs,
        gen_sem: Any,
        score_sem: Any,
        **kwargs: Any,
    ) -> list[State]:
        """Generate and score one group (the rollouts of one example)."""
        from verifiers.envs.generation import score_states

        states = list(
            await asyncio.gather(
                *(
                    self.run_rollout(gen_sem, i, client, model, gen_sampling_args)
                    for i in group_inputs
                )
            )
        )
        await score_states(self, states, score_sem)
        return states

    async def generate(
        self,
        inputs: Any,
        client: Any,
        model: str,
        sampling_args: SamplingArgs | None = None,
        max_concurrent: int = -1,
        max_concurrent_generation: int | None = None,
        max_concurrent_scoring: int | None = None,
        results_path: str | None = None,
        state_columns: list[str] | None = None,
        save_results: bool = False,
        save_every: int = -1,
        use_tqdm: bool = False,
        *,
        rollouts_per_example: int = 1,
        score_rollouts: bool = True,
        on_progress: Callable[..., Any] | None = None,
        metadata: dict[str, Any] | None = None,
        output_dir: str = "outputs",
        **kwargs: Any,
    ) -> GenerateOutputs:
        """Run rollouts for every input row (rows sharing an ``example_id`` form one group, and
        each row runs ``rollouts_per_example`` times), scored per group.

        ``results_path`` (a run directory) makes results stream to disk as each group finishes;
        pointing it at an existing run resumes it. See ``verifiers.envs.generation``.
        """
        from verifiers.envs.generation import run_generation
        from verifiers.results.layout import new_run_dir

        if results_path is None and save_results:
            results_path = str(new_run_dir(output_dir, self.env_id or type(self).__name__, model))
        return await run_generation(
            self,
            inputs,
            client,
            model,
            sampling_args=sampling_args,
            rollouts_per_example=rollouts_per_example,
            max_concurrent=(
                max_concurrent_generation
                if max_concurrent_generation is not None
                else max_concurrent
            ),
            max_concurrent_scoring=(
                max_concurrent_scoring if max_concurrent_scoring is not None else max_concurrent
            ),
            score_rollouts=score_rollouts,
            results_path=results_path,
            state_columns=state_columns,
            on_progress=on_progress,
            metadata=metadata,
            use_tqdm=use_tqdm,
        )

    a_generate = generate

    async def evaluate(
        self,
        client: Any,
        model: str,
        sampling_args: SamplingArgs | None = None,
        num_examples: int = -1,
        rollouts_per_example: int = 1,
        max_concurrent: int = -1,
        max_concurrent_generation: int | None = None,
        max_concurrent_scoring: int | None = None,
        results_path: str | None = None,
        state_columns: list[str] | None = None,
        save_results: bool = False,
        save_every: int = -1,
        *,
        output_dir: str = "outputs",
        on_progress: Callable[..., Any] | None = None,
        seed: int | None = None,
        use_tqdm: bool = False,
        **kwargs: Any,
    ) -> GenerateOutputs:
        """Evaluate ``model`` on the eval dataset (or the train dataset if there is none)."""
        self.rollouts_per_example = rollouts_per_example
        return await self.generate(
            self.dataset_rows("eval", n=num_examples, seed=seed),
            client,
            model,
            sampling_args=sampling_args,
            max_concurrent=max_concurrent,
            max_concurrent_generation=max_concurrent_generation,
            max_concurrent_scoring=max_concurrent_scoring,
            results_path=results_path,
            state_columns=state_columns,
            save_results=save_results,
            rollouts_per_example=rollouts_per_example,
            on_progress=on_progress,
            output_dir=output_dir,
            use_tqdm=use_tqdm,
        )

    def evaluate_sync(self, *args: Any, **kwargs: Any) -> GenerateOutputs:
        """``evaluate`` for synchronous code. Ctrl-C stops cleanly; saved results stay resumable."""
        return run_sync(self.evaluate(*args, **kwargs))

    def generate_sync(self, *args: Any, **kwargs: Any) -> GenerateOutputs:
        return run_sync(self.generate(*args, **kwargs))

    def make_dataset(
        self,
        results: GenerateOutputs | None = None,
        state_columns: list[str] | None = None,
        **kwargs: Any,
    ) -> Dataset:
        """A ``datasets.Dataset`` of finished rollouts (for inspection, upload or SFT)."""
        from verifiers.results.records import make_dataset

        return make_dataset(results, state_columns=state_columns, **kwargs)


def run_sync(coro: Any) -> Any:
    """Run ``coro`` to completion from synchronous code, even inside a running loop (Jupyter)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


def _subset(dataset: Dataset, n: int, seed: int | None) -> Dataset:
    # Dataset.shuffle returns a new dataset: the environment's own copy keeps its order.
    if seed is not None:
        dataset = dataset.shuffle(seed=seed)
    if n is not None and n > 0:
        dataset = dataset.select(range(min(n, len(dataset))))
    return dataset
