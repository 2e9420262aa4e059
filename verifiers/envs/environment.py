"""Environment: a dataset, a rollout protocol and a rubric.

Subclasses define ``setup_state`` and ``rollout`` (``MultiTurnEnv`` does, with ``env_response`` as
the hook); this base class formats datasets, talks to the model through the client layer, and
runs many rollouts concurrently with ``generate``/``evaluate`` (see ``verifiers.envs.generation``).

Over 400 lines, not split: the classic ``Environment`` is one class, and its public surface
(the method names of 0.1.x-0.3.x, kept for the environments written against them) is most of
its size; the rollout engine, dataset formatting and the client layer are modules of their own.
"""

from __future__ import annotations

import asyncio
import logging
import random
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, cast

from verifiers import classic, decorators
from verifiers.classic.error_data import error_chain
from verifiers.concurrency import call_with_named, maybe_await
from verifiers.envs import model_turn, rollout_state
from verifiers.envs.dataset_format import format_rows, to_rows
from verifiers.errors import record_error
from verifiers.messages.convert import tool_from_raw, wire_tool
from verifiers.parsers.parser import Parser
from verifiers.rubrics.rubric import Rubric
from verifiers.types import (
    GenerateOutputs,
    Messages,
    MessageType,
    RolloutInput,
    SamplingArgs,
    State,
    Tool,
    TrajectoryStep,
)

if TYPE_CHECKING:
    from datasets import Dataset

logger = logging.getLogger("verifiers.envs")


DatasetSource = Any  # a datasets.Dataset, a list of row dicts, or a function returning either


class Environment(ABC):
    """Base class of every environment (the classic ``verifiers`` constructor and methods).

    Each environment behaves as the classic release it was written for (``self.release``, see
    ``verifiers.classic``): dict-era environments exchange plain message dicts and OpenAI tool
    schemas (``oai_tools``), typed-era ones ``vf.UserMessage``... objects and ``vf.Tool``
    definitions (``tool_defs``).

    Lifecycle hooks are collected once per instance into ``_stop_conditions``,
    ``_cleanup_handlers`` and ``_teardown_handlers`` (highest priority first, ties by name).
    """

    rollout_files: ClassVar[dict[str, str]] = {}
    """Files a run directory keeps beside ``results.jsonl``, one line per rollout: a state key
    (a JSON object as a string) -> a file name (``verifiers.results.writer``). Written by the
    process that saves the rows, however the rollouts ran (in process or in workers)."""

    def __init__(
        self,
        dataset: DatasetSource | None = None,
        eval_dataset: DatasetSource | None = None,
        system_prompt: str | None = None,
        few_shot: list[dict[str, Any]] | None = None,
        parser: Parser | None = None,
        rubric: Rubric | None = None,
        sampling_args: SamplingArgs | None = None,
        message_type: MessageType = "chat",
        oai_tools: list[dict[str, Any]] | None = None,
        tool_defs: list[Tool] | list[dict[str, Any]] | None = None,
        max_workers: int = 512,
        env_id: str | None = None,
        env_args: dict[str, Any] | None = None,
        map_kwargs: dict[str, Any] | None = None,
        max_seq_len: int | None = None,
        score_rollouts: bool = True,
        pass_threshold: float = 0.5,
        **kwargs: Any,
    ) -> None:
        self.logger = logging.getLogger(f"verifiers.envs.{type(self).__name__}")
        self.release = release_of(type(self))
        if self.release.typed_messages and oai_tools is not None:
            # 0.1.11+ refused ``oai_tools``; they are the same definitions in OpenAI's shape
            if tool_defs is None:
                tool_defs = list(oai_tools)
            oai_tools = None
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
        self.tool_defs: list[Tool] | None = (
            [tool_from_raw(t) for t in tool_defs] if tool_defs is not None else None
        )
        if (
            self.tool_defs is not None
            and self.oai_tools is None
            and not self.release.typed_messages
        ):
            self.oai_tools = [wire_tool(t) for t in self.tool_defs]
        self.score_rollouts = score_rollouts
        self.pass_threshold = pass_threshold
        self.max_workers = max_workers
        self.env_id = env_id or ""
        self.env_args = dict(env_args or {})
        self.map_kwargs = dict(map_kwargs or {})
        self.max_seq_len = max_seq_len
        self.rollouts_per_example: int | None = None
        # Where the code came from: set by load_environment, recorded in results metadata.
        self.env_version: str | None = None
        self.env_distribution: str | None = None
        # the id vf.load_environment built it from (None when built directly): what workers load
        self.loaded_as: str | None = None
        self.env_content_hash: str | None = None
        for key, value in kwargs.items():
            setattr(self, key, value)
        if dataset is None and eval_dataset is None:
            raise ValueError("Either dataset or eval_dataset must be provided")
        # A function as a dataset is a builder (verifiers 0.2.0's examples): called on first use.
        self._sources: dict[str, Any] = {
            "train": dataset if callable(dataset) else None,
            "eval": eval_dataset if callable(eval_dataset) else None,
        }
        self._rows: dict[str, list[dict[str, Any]] | None] = {
            "train": self.format_rows(dataset) if _is_data(dataset) else None,
            "eval": self.format_rows(eval_dataset) if _is_data(eval_dataset) else None,
        }
        self._hf: dict[str, Dataset | None] = {"train": None, "eval": None}
        self._torn_down = False
        self.__post_init__()

    def __post_init__(self) -> None:
        """Collect this instance's decorated methods (``verifiers.decorators``): lifecycle hooks,
        and ``@vf.reward`` / ``@vf.metric`` methods, which join the rubric."""
        self._stop_conditions = decorators.collect(self, "stop")
        self._cleanup_handlers = decorators.collect(self, "cleanup")
        self._teardown_handlers = decorators.collect(self, "teardown")
        self._setup_handlers = decorators.collect(self, "setup")
        updates = decorators.collect(self, "update")
        self._rollout_updates = [
            u for u in updates if getattr(u, "update_stage", "rollout") != "group"
        ]
        self._group_updates = [
            u for u in updates if getattr(u, "update_stage", "rollout") == "group"
        ]
        self._advantage_handlers = decorators.collect(self, "advantage")
        rewards = decorators.collect(self, "reward")
        metrics = decorators.collect(self, "metric")
        if rewards or metrics:
            own = Rubric(
                funcs=[*rewards, *metrics],
                weights=[getattr(f, "reward_weight", 1.0) for f in rewards] + [0.0] * len(metrics),
                parser=self.parser,
            )
            self.add_rubric(own)

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
            default_task=None if self.release.task_is_payload else (self.env_id or "default"),
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

    def _built(self, split: str) -> list[dict[str, Any]] | None:
        """The rows of a split, calling its builder the first time they are needed."""
        source = self._sources.get(split)
        if self._rows[split] is None and source is not None:
            self._sources[split] = None
            self._rows[split] = self.format_rows(source())
        return self._rows[split]

    def build_dataset(self) -> Dataset | None:
        """Build the training split now (a builder is otherwise called on first use)."""
        self._built("train")
        return self._view("train")

    def build_eval_dataset(self) -> Dataset | None:
        self._built("eval")
        return self._view("eval")

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
        if self._built("train") is None:
            raise ValueError("dataset is not set")
        return _subset(self.dataset, n, seed)

    def get_eval_dataset(self, n: int = -1, seed: int | None = None) -> Dataset:
        if self._built("eval") is None:
            self.logger.warning("eval_dataset is not set, falling back to train dataset")
            return self.get_dataset(n, seed)
        return _subset(self.eval_dataset, n, seed)

    def dataset_rows(
        self, split: str = "eval", n: int = -1, seed: int | None = None
    ) -> list[dict[str, Any]]:
        """Formatted rows of a split ("eval" falls back to "train"), optionally shuffled and cut.

        Always a new list: the environment's own order is never changed.
        """
        rows = self._built(split)
        if rows is None:
            rows = self._built("train")
        if rows is None:
            raise ValueError("dataset is not set")
        rows = random.Random(seed).sample(rows, len(rows)) if seed is not None else list(rows)
        return rows[:n] if n is not None and n > 0 else rows

    def get_eval_inputs(
        self, num_examples: int = -1, rollouts_per_example: int = 1
    ) -> list[RolloutInput]:
        """Eval rows, each repeated ``rollouts_per_example`` times (the classic input list)."""
        rows = self.dataset_rows("eval", n=num_examples)
        return [
            cast(RolloutInput, dict(row)) for row in rows for _ in range(max(rollouts_per_example, 1))
        ]

    def set_max_seq_len(self, max_seq_len: int | None) -> None:
        self.max_seq_len = max_seq_len

    @property
    def requires_group_rollouts(self) -> bool:
        """True when a group-level reward function needs all of an example's rollouts at once."""
        return bool(getattr(self.rubric, "has_group_rewards", False))

    @property
    def provides_advantages(self) -> bool:
        return bool(self._advantage_handlers) or bool(getattr(self.rubric, "has_advantages", False))

    async def compute_advantages(self, states: list[State]) -> list[float] | None:
        """A group's advantages from an ``@vf.advantage`` method of the environment or its rubric
        (None: reward minus the group mean)."""
        for handler in self._advantage_handlers:
            values = await maybe_await(handler, states)
            if values is not None:
                return [float(v) for v in values]
        compute = getattr(self.rubric, "compute_advantages", None)
        return await compute(states) if compute is not None else None

    async def run_updates(self, state_or_states: Any, stage: str) -> None:
        """Run the ``@vf.update`` handlers of one stage (``rollout``: a state; ``group``: a list)."""
        handlers = self._rollout_updates if stage == "rollout" else self._group_updates
        for handler in handlers:
            await maybe_await(handler, state_or_states)

    def set_kwargs(self, **kwargs: Any) -> None:
        """Set attributes through their ``set_<name>`` method when there is one (trainers)."""
        for key, value in kwargs.items():
            setter = getattr(self, f"set_{key}", None)
            if callable(setter):
                setter(value)
            else:
                setattr(self, key, value)

    def set_score_rollouts(self, score_rollouts: bool) -> None:
        self.score_rollouts = score_rollouts

    def set_concurrency(self, concurrency: int) -> None:
        self.concurrency = concurrency

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
        return model_turn.dict_request_args(sampling_args, message_type)

    async def get_model_response(self, *args: Any, **kwargs: Any) -> Any:
        """One model call. Every classic signature works:

        - ``(client, model, prompt, oai_tools, sampling_args, message_type)`` (v0.1.8),
        - ``(state, prompt_messages)`` (v0.1.9+),
        - ``(state, prompt, client=None, model=None, tool_defs=None, sampling_args=None)``
          (v0.1.11+; returns a ``vf.Response``).

        Raises a typed ``ModelError`` after the client's retries, and for a reply the
        environment's release refuses (``model_turn.check_dict_reply``); an overlong prompt
        raises ``OverlongPromptError``.
        """
        if (args and isinstance(args[0], State)) or "state" in kwargs:
            call = _bind(_STATE_FORM, args, kwargs)
            state, prompt = call["state"], call["prompt"]
            if self.release.typed_messages:
                return await model_turn.typed_model_call(
                    state,
                    prompt,
                    self.message_type,
                    client=call["client"],
                    model=call["model"],
                    tool_defs=call["tool_defs"],
                    sampling_args=call["sampling_args"],
                )
            response = await model_turn.dict_model_call(
                call["client"] or state["client"],
                call["model"] or state["model"],
                prompt,
                state.get("oai_tools"),
                call["sampling_args"] or state.get("sampling_args"),
                self.message_type,
            )
            model_turn.check_dict_reply(response, self.message_type, self.release)
            return response
        call = _bind(_CLIENT_FORM, args, kwargs)
        return await model_turn.dict_model_call(
            call["client"],
            call["model"],
            call["prompt"],
            call["oai_tools"],
            call["sampling_args"],
            call["message_type"] or self.message_type,
        )

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
        """A fresh state for one rollout; the row is copied, so rollouts never share it.
        ``sampling_args`` are kept as given (``generate`` merges the environment's own first)."""
        return rollout_state.new_state(self, input, client, model, sampling_args)

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
        if isinstance(response, model_turn.Response):
            step = model_turn.typed_step(state, prompt, response, self.max_seq_len)
        else:
            step = model_turn.dict_step(
                state, prompt, response, self.message_type, self.max_seq_len
            )
        if step["is_truncated"]:
            state["is_truncated"] = True
        if not self.release.typed_messages:
            state["turn"] = state.get("turn", 0) + 1
        return step

    # --- token usage (the 0.1.11+ accessors) ---------------------------------------------------
    def get_state_usage(self, state: State) -> dict[str, float] | None:
        """The rollout's tokens so far: ``{"input_tokens", "output_tokens"}``."""
        from verifiers.results.outputs import token_usage

        return token_usage(state)

    def increment_state_usage(
        self, state: State, input_tokens: float = 0, output_tokens: float = 0
    ) -> None:
        model_turn.count_usage(state, input_tokens, output_tokens)

    def increment_state_usage_from_response(self, state: State, response: Any) -> None:
        if isinstance(response, model_turn.Response):
            model_turn.add_usage(state, response)

    def check_not_empty(self, step: TrajectoryStep) -> None:
        """Raise ``EmptyModelResponseError`` for a reply with no content and no tool calls.

        Called after the step is recorded, so a trainer still learns from empty replies."""
        model_turn.check_not_empty(step, self.message_type)

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

    # --- lifecycle -----------------------------------------------------------------------------
    async def _cleanup(self, state: State) -> None:
        """Run every ``@vf.cleanup`` handler; one that raises is logged and recorded, the rest run."""
        for handler in self._cleanup_handlers:
            try:
                await call_with_named(
                    handler, state, state=state, env=self, task=state.get("task"), resources=None
                )
            except Exception as exc:
                self.logger.warning("cleanup %s failed: %s", handler.__name__, exc)
                state.setdefault("cleanup_errors", []).append(
                    f"{handler.__name__}: {type(exc).__name__}: {exc}"
                )

    run_cleanup = _cleanup

    async def cleanup(self, state: State, task: Any = None, resources: Any = None) -> None:
        """Finish a rollout's resources (the classic public name of the cleanup pass)."""
        await self._cleanup(state)

    async def _render_stop(self, state: State, condition: Any, **kwargs: Any) -> bool:
        """Check one stop condition; when it holds, mark the rollout finished by it."""
        if not await maybe_await(condition, state):
            return False
        state["is_completed"] = True
        if any(step.get("is_truncated") for step in state.get("trajectory") or []):
            state["is_truncated"] = True
        state["stop_condition"] = condition.__name__
        if condition.__name__ == "has_error":
            self.logger.error(f"Aborted rollout due to {error_chain(state.get('error'))}")
        return True

    async def _teardown(self) -> None:
        """Run ``@vf.teardown`` handlers once (sandboxes, servers, pools the environment holds),
        then the rubric's."""
        if self._torn_down:
            return
        self._torn_down = True
        for handler in self._teardown_handlers:
            try:
                await maybe_await(handler)
            except Exception as exc:
                self.logger.warning("teardown %s failed: %s", handler.__name__, exc)
        teardown = getattr(self.rubric, "teardown", None)
        if teardown is not None:
            try:
                await maybe_await(teardown)
            except Exception as exc:
                self.logger.warning("rubric teardown failed: %s", exc)

    async def teardown(self) -> None:
        await self._teardown()

    async def _state_for_error(
        self, input: RolloutInput, client: Any, model: str, sampling_args: SamplingArgs | None
    ) -> State:
        """A state to record a failed rollout on; when the input itself is what failed (a row
        the release's state cannot be built from), a bare one: the error is data, never a
        traceback that ends the run."""
        try:
            return await Environment.init_state(self, input, client, model, sampling_args)
        except Exception:
            return rollout_state.bare_state(input, client, model, sampling_args)

    async def __aenter__(self) -> Environment:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._teardown()

    # --- running many rollouts -----------------------------------------------------------------
    async def guarded_rollout(
        self,
        input: RolloutInput,
        client: Any,
        model: str,
        sampling_args: SamplingArgs | None = None,
    ) -> State:
        """``rollout``, with anything it raises recorded on a state instead (an override that
        raises still yields a finished state with the error), then the rollout-stage updates."""
        try:
            # what the rollout's own code asks (vf.MathRubric(), tool schemas) is its release
            with classic.written_for(self.release.version):
                state = await self.rollout(input, client, model, sampling_args)
        except Exception as exc:
            state = await self._state_for_error(input, client, model, sampling_args)
            record_error(state, exc, phase="rollout")
            state["stop_condition"] = "has_error"
            state["is_completed"] = True
            state["completion"] = (
                [] if self.message_type == "chat" or self.release.typed_messages else ""
            )
        if self._rollout_updates:
            try:
                await self.run_updates(state, "rollout")
            except Exception as exc:
                record_error(state, exc, phase="update")
        return state

    async def run_rollout(self, *args: Any, **kwargs: Any) -> Any:
        """One rollout. Two classic forms:

        - ``(sem, input, client, model, sampling_args)`` (v0.1.8): generate under ``sem``, return
          the state, unscored;
        - ``(input, client, model, sampling_args, max_retries=0, state_columns=None)``
          (v0.1.11+): generate, score, retry infrastructure errors, return a ``RolloutOutput``.
        """
        if (args and hasattr(args[0], "__aenter__")) or "sem" in kwargs:
            call = _bind(("sem", "input", "client", "model", "sampling_args"), args, kwargs)
            async with call["sem"]:
                return await self.guarded_rollout(
                    call["input"], call["client"], call["model"], call["sampling_args"]
                )
        outputs = await self.run_group(*_single(args, kwargs))
        return outputs[0]

    async def run_group(self, *args: Any, **kwargs: Any) -> Any:
        """One group (the rollouts of one example), generated and scored together. Classic
        forms: ``(group_inputs, client, model, gen_sampling_args, gen_sem, score_sem)`` (v0.1.8,
        returns states) and ``(group_inputs, client, model, sampling_args, max_retries=0,
        state_columns=None)`` (v0.1.11+, returns ``RolloutOutput`` rows)."""
        from verifiers.envs.generation import run_group_states
        from verifiers.results.outputs import state_to_output

        names = ("group_inputs", "client", "model", "sampling_args")
        if (len(args) > 4 and hasattr(args[4], "__aenter__")) or "gen_sem" in kwargs:
            call = _bind((*names, "gen_sem", "score_sem"), args, _rename(kwargs))
            return await run_group_states(
                self,
                call["group_inputs"],
                call["client"],
                call["model"],
                call["sampling_args"],
                gen_sem=call["gen_sem"],
                score_sem=call["score_sem"],
            )
        call = _bind((*names, "max_retries", "state_columns", "env_client"), args, kwargs)
        states = await run_group_states(
            self,
            call["group_inputs"],
            call["client"],
            call["model"],
            call["sampling_args"],
            max_retries=call["max_retries"] or 0,
        )
        return [
            state_to_output(state, call["state_columns"] or [], self.release) for state in states
        ]

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
        max_retries: int = 0,
        env_workers: Any = None,
        group_timeout: float | None = None,
        **kwargs: Any,
    ) -> GenerateOutputs:
        """Run rollouts for every input row (rows sharing an ``example_id`` form one group, and
        each row runs ``rollouts_per_example`` times), scored per group.

        ``results_path`` (a run directory) makes results stream to disk as each group finishes;
        pointing it at an existing run resumes it. See ``verifiers.envs.generation``.
        ``env_workers`` runs the groups in environment workers: started ones (a
        ``verifiers.workers`` pool or remote servers), or a spec that starts a pool for this run
        (``N``, ``"auto"``, ``"ray"``, ``"ray:N"``); ``group_timeout`` bounds each group there.
        """
        from verifiers.envs.generation import run_generation
        from verifiers.results.layout import new_run_dir

        if results_path is None and save_results:
            results_path = str(new_run_dir(output_dir, self.env_id or type(self).__name__, model))
        runner, owned = None, None
        if env_workers is not None:
            from verifiers.workers import WorkerGroups, client_config_of, start_workers

            workers = env_workers
            if not hasattr(workers, "run_group"):
                workers = owned = await start_workers(env_workers, self)
            runner = WorkerGroups(
                workers,
                client_config_of(client, self.message_type),
                model,
                max_concurrent=max_concurrent_generation or max_concurrent,
                max_retries=max_retries,
                timeout=group_timeout,
            )
            metadata = {**(metadata or {}), "env_workers": workers.describe()}
        try:
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
                    max_concurrent_scoring
                    if max_concurrent_scoring is not None
                    else max_concurrent
                ),
                score_rollouts=score_rollouts,
                results_path=results_path,
                state_columns=state_columns,
                on_progress=on_progress if callable(on_progress) else None,
                metadata=metadata,
                use_tqdm=use_tqdm,
                max_retries=max_retries,
                runner=runner,
            )
        finally:
            if owned is not None:
                await owned.close()

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
        max_retries: int = 0,
        shuffle: bool = False,
        shuffle_seed: int | None = None,
        env_workers: Any = None,
        **kwargs: Any,
    ) -> GenerateOutputs:
        """Evaluate ``model`` on the eval dataset (or the train dataset if there is none);
        ``seed`` (or ``shuffle=True`` with ``shuffle_seed``) picks a shuffled subset."""
        self.rollouts_per_example = rollouts_per_example
        if shuffle and seed is None:
            seed = shuffle_seed if shuffle_seed is not None else 0
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
            max_retries=max_retries,
            env_workers=env_workers,
            **{k: v for k, v in kwargs.items() if k == "group_timeout"},
        )

    def evaluate_sync(self, *args: Any, **kwargs: Any) -> GenerateOutputs:
        """``evaluate`` for synchronous code. Ctrl-C stops cleanly; saved results stay resumable."""
        return run_sync(self.evaluate(*args, **kwargs))

    def generate_sync(self, *args: Any, **kwargs: Any) -> GenerateOutputs:
        return run_sync(self.generate(*args, **kwargs))

    async def _run_worker_group(
        self,
        client: Any,
        model: str,
        rows: list[dict[str, Any]],
        indices: list[int],
        sampling_args: list[dict[str, Any]],
        score: bool = True,
        max_retries: int = 0,
    ) -> list[State]:
        """One group's rollouts (each row with its rollout index and sampling args), scored
        when ``score``: what an environment worker runs for a request
        (``verifiers.workers.runtime``), with the same engine as ``generate`` in process. Not
        the classic ``run_group`` (whose two forms take the example's inputs)."""
        from verifiers.envs.generation import GroupJob, LocalGroups

        job = GroupJob(rows=rows, indices=indices, sampling_args=sampling_args, score=score)
        return await LocalGroups(self, client, model, max_retries=max_retries).run(job)

    def make_dataset(
        self,
        results: GenerateOutputs | None = None,
        state_columns: list[str] | None = None,
        **kwargs: Any,
    ) -> Dataset:
        """A ``datasets.Dataset`` of finished rollouts (for inspection, upload or SFT)."""
        from verifiers.results.records import columns_dataset

        return columns_dataset(results, state_columns=state_columns, **kwargs)


_STATE_FORM = ("state", "prompt", "client", "model", "tool_defs", "sampling_args")
_CLIENT_FORM = ("client", "model", "prompt", "oai_tools", "sampling_args", "message_type")
_ALIASES = {"prompt_messages": "prompt"}


def _bind(names: tuple[str, ...], args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Arguments of one ``get_model_response`` form by name (missing ones are None)."""
    if len(args) > len(names):
        raise TypeError(f"get_model_response takes at most {len(names)} arguments")
    bound: dict[str, Any] = dict.fromkeys(names)
    bound.update(zip(names, args, strict=False))
    for key, value in kwargs.items():
        key = _ALIASES.get(key, key)
        if key not in bound:
            raise TypeError(f"get_model_response got an unexpected keyword argument {key!r}")
        bound[key] = value
    return bound


def _rename(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {("sampling_args" if k == "gen_sampling_args" else k): v for k, v in kwargs.items()}


def _single(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """``run_rollout``'s v0.1.11+ arguments as ``run_group``'s, with a group of one."""
    call = _bind(
        ("input", "client", "model", "sampling_args", "max_retries", "state_columns", "env_client"),
        args,
        kwargs,
    )
    return (
        [call["input"]],
        call["client"],
        call["model"],
        call["sampling_args"],
        call["max_retries"],
        call["state_columns"],
    )


def _is_data(dataset: Any) -> bool:
    return dataset is not None and not callable(dataset)


def release_of(cls: type) -> classic.Release:
    """The release an environment class runs as: its ``verifiers_release`` attribute when it
    names one, else the release in effect where it is built (``verifiers.classic.current``)."""
    pinned = getattr(cls, "verifiers_release", None)
    if pinned:
        return classic.Release(classic.releases.parse_version(pinned))
    return classic.current()


def run_sync(coro: Any) -> Any:
    """Run ``coro`` to completion from synchronous code, even inside a running loop (Jupyter).

    Its result is handed out past the main task, never kept as the task's result: on its way
    out ``asyncio.run`` looks up its SIGINT handler, a ``partial`` holding the main task, and
    ``signal.getsignal`` formats it with ``repr`` (``enum`` builds a ``ValueError`` message
    for a handler that is no ``Handlers`` member), task result included: every rollout state
    of a run, 0.5 s of CPU at 600 rollouts, twice."""
    result: list[Any] = []

    async def main() -> None:
        result.append(await coro)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(main())
        return result[0]
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, main()).result()
    return result[0]


def _subset(dataset: Dataset, n: int, seed: int | None) -> Dataset:
    # Dataset.shuffle returns a new dataset: the environment's own copy keeps its order.
    if seed is not None:
        dataset = dataset.shuffle(seed=seed)
    if n is not None and n > 0:
        dataset = dataset.select(range(min(n, len(dataset))))
    return dataset
