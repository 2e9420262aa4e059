"""Environment: a dataset, a rollout protocol and a rubric.

Subclasses define ``rollout`` (``MultiTurnEnv`` does, with ``env_response`` as the hook); this base
class formats datasets, talks to the model through the client layer, and runs many rollouts
concurrently with ``generate``/``evaluate`` (see ``verifiers.envs.generation``).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import random
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from verifiers import decorators
from verifiers.clients import resolve_client
from verifiers.envs.dataset_format import format_rows, to_rows
from verifiers.errors import EmptyModelResponseError
from verifiers.parsers.parser import Parser
from verifiers.rubrics.rubric import Rubric
from verifiers.types import (
    GenerateOutputs,
    Messages,
    MessageType,
    ModelResponse,
    RolloutInput,
    SamplingArgs,
    State,
    TokenData,
    TrajectoryStep,
)

if TYPE_CHECKING:
    from datasets import Dataset

logger = logging.getLogger("verifiers.envs")


class Environment(ABC):
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
        max_seq_len: int | None = None,
        **kwargs: Any,
    ) -> None:
        if message_type not in ("chat", "completion"):
            raise ValueError(f"message_type must be 'chat' or 'completion', got {message_type!r}")
        if dataset is None and eval_dataset is None:
            raise ValueError("an Environment needs a dataset or an eval_dataset (or both)")
        self.message_type: MessageType = message_type
        self.system_prompt = system_prompt
        self.few_shot = few_shot
        self.parser = parser or Parser()
        self.rubric = rubric or Rubric(parser=self.parser)
        if (
            rubric is not None
            and parser is not None
            and rubric.parser is not parser
            and type(rubric.parser) is Parser
        ):
            rubric.parser = parser
            rubric.class_objects["parser"] = parser
        self.sampling_args: SamplingArgs = {"n": 1, "extra_body": {}}
        self.sampling_args.update(sampling_args or {})
        self.oai_tools = oai_tools
        self.max_workers = max_workers
        self.env_id = env_id or ""
        self.env_args = dict(env_args or {})
        self.max_seq_len = max_seq_len
        self.logger = logging.getLogger(f"verifiers.envs.{type(self).__name__}")
        for key, value in kwargs.items():
            setattr(self, key, value)
        self._rows: dict[str, list[dict[str, Any]] | None] = {
            "train": self.format_rows(dataset) if dataset is not None else None,
            "eval": self.format_rows(eval_dataset) if eval_dataset is not None else None,
        }
        self._hf: dict[str, Dataset | None] = {"train": None, "eval": None}
        self._torn_down = False

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
        """Build ``prompt`` from ``question`` (+ system prompt, few-shot), add ``example_id`` and defaults.

        Bad rows fail here, before any model call, with the row number and what is wrong.
        """
        return format_rows(
            to_rows(dataset),
            message_type=self.message_type,
            system_prompt=system_prompt if system_prompt is not None else self.system_prompt,
            few_shot=few_shot if few_shot is not None else self.few_shot,
            question_key=question_key,
            answer_key=answer_key,
        )

    def format_dataset(
        self, dataset: Dataset | list[dict[str, Any]], *args: Any, **kwargs: Any
    ) -> Dataset:
        """``format_rows`` as a ``datasets.Dataset`` (classic API)."""
        from datasets import Dataset

        return Dataset.from_list(self.format_rows(dataset, *args, **kwargs))

    def _view(self, split: str) -> Dataset | None:
        if self._hf[split] is None and self._rows[split] is not None:
            from datasets import Dataset

            self._hf[split] = Dataset.from_list(self._rows[split])
        return self._hf[split]

    def _assign(self, split: str, dataset: Any) -> None:
        self._rows[split] = self.format_rows(dataset) if dataset is not None else None
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
        if self._rows["train"] is None:
            raise ValueError(
                f"{type(self).__name__} has no training dataset (only an eval_dataset)"
            )
        return _subset(self.dataset, n, seed)

    def get_eval_dataset(self, n: int = -1, seed: int | None = None) -> Dataset:
        if self._rows["eval"] is None:
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
            raise ValueError(
                f"{type(self).__name__} has no training dataset (only an eval_dataset)"
            )
        rows = random.Random(seed).sample(rows, len(rows)) if seed is not None else list(rows)
        return rows[:n] if n is not None and n > 0 else rows

    # --- model calls ---------------------------------------------------------------------------
    async def get_model_response(
        self,
        client: Any,
        model: str,
        prompt: Messages,
        oai_tools: list[dict[str, Any]] | None = None,
        sampling_args: SamplingArgs | None = None,
        message_type: MessageType | None = None,
        **kwargs: Any,
    ) -> ModelResponse:
        """One model call; raises a typed ``ModelError`` after the client's retries."""
        model_client = resolve_client(client)
        args = dict(sampling_args or {})
        args.pop("n", None)  # one rollout = one sample; groups are separate rollouts
        if (message_type or self.message_type) == "chat":
            if not isinstance(prompt, list):
                raise TypeError("chat environments need a list of messages as the prompt")
            return await model_client.chat(
                model=model, messages=prompt, tools=oai_tools, sampling_args=args
            )
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
        if extra:
            merged["extra_body"] = extra
        return merged

    # --- rollout state -------------------------------------------------------------------------
    def init_state(
        self, input: RolloutInput, client: Any, model: str, sampling_args: SamplingArgs | None
    ) -> State:
        row = dict(input)
        info = row.get("info") or {}
        row["info"] = info
        state = State(
            input=row,
            completion=[] if self.message_type == "chat" else "",
            responses=[],
            trajectory=[],
            turn=0,
            reward=None,
            advantage=None,
            metrics={},
            error=None,
            is_completed=False,
            stop_condition=None,
            prompt_too_long=False,
            is_truncated=False,
            usage={"prompt_tokens": 0, "completion_tokens": 0},
            timing={"generation_ms": 0.0, "scoring_ms": 0.0, "total_ms": 0.0, "model_ms": 0.0},
            model=model,
            client=client,
            sampling_args=self.merge_sampling_args(sampling_args),
            oai_tools=info.get("oai_tools")
            if isinstance(info, dict) and info.get("oai_tools")
            else self.oai_tools,
        )
        return state

    def record_model_response(
        self, state: State, prompt: Messages, response: ModelResponse
    ) -> Messages:
        """Append the model's reply to the completion and the trajectory; returns the new messages."""
        choice = response["choices"][0]
        usage = response.get("usage") or {}
        state["usage"]["prompt_tokens"] += int(usage.get("prompt_tokens") or 0)
        state["usage"]["completion_tokens"] += int(usage.get("completion_tokens") or 0)
        if choice.get("finish_reason") == "length":
            state["is_truncated"] = True
        empty = False
        if self.message_type == "chat":
            message = assistant_message(choice.get("message") or {})
            empty = not message.get("content") and not message.get("tool_calls")
            new: Messages = [message]
        else:
            new = choice.get("text") or ""
        state["responses"].append(response)
        step: TrajectoryStep = {
            "prompt": list(prompt) if isinstance(prompt, list) else prompt,
            "completion": new,
            "response": response,
            "tokens": token_data(response, choice),
            "reward": None,
            "advantage": None,
            "extras": {},
        }
        state["trajectory"].append(step)
        if empty:  # kept in the trajectory first: a trainer learns from empty replies too
            raise EmptyModelResponseError(
                f"the model returned no content and no tool calls (finish_reason={choice.get('finish_reason')!r})"
            )
        return new

    async def end_run(self) -> None:
        """Release what was bound to this run's event loop (e.g. warm sandbox pools); called by
        ``generate`` when it finishes, however it finishes."""
        return None

    def run_metadata(self) -> dict[str, Any]:
        """Extra facts for a run's metadata.json (e.g. the sandbox isolation mode)."""
        return {}

    # --- lifecycle -----------------------------------------------------------------------------
    async def run_cleanup(self, state: State) -> None:
        for handler in decorators.collect(self, "cleanup"):
            try:
                await _call_maybe_async(handler, state)
            except Exception as exc:  # cleanup must run for every handler, whatever one does
                logger.warning("cleanup %s failed: %s", handler.__name__, exc)
                state.setdefault("cleanup_errors", []).append(
                    f"{handler.__name__}: {type(exc).__name__}: {exc}"
                )

    async def teardown(self) -> None:
        """Run ``@vf.teardown`` handlers once (sandboxes, servers, pools the environment holds)."""
        if self._torn_down:
            return
        self._torn_down = True
        for handler in decorators.collect(self, "teardown"):
            try:
                await _call_maybe_async(handler)
            except Exception as exc:
                logger.warning("teardown %s failed: %s", handler.__name__, exc)

    async def __aenter__(self) -> Environment:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.teardown()

    @abstractmethod
    async def rollout(
        self,
        input: RolloutInput,
        client: Any,
        model: str,
        sampling_args: SamplingArgs | None = None,
    ) -> State:
        """Run one rollout to completion; errors are recorded on the returned state."""

    # --- running many rollouts -----------------------------------------------------------------
    async def generate(
        self,
        inputs: Any,
        client: Any,
        model: str,
        sampling_args: SamplingArgs | None = None,
        rollouts_per_example: int = 1,
        max_concurrent: int = -1,
        max_concurrent_scoring: int = -1,
        score_rollouts: bool = True,
        results_path: str | None = None,
        state_columns: list[str] | None = None,
        on_progress: Callable[..., Any] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> GenerateOutputs:
        """Run ``rollouts_per_example`` rollouts for every input row, scored per group.

        ``results_path`` (a run directory) makes results stream to disk as each group finishes;
        pointing it at an existing run resumes it. See ``verifiers.envs.generation``.
        """
        from verifiers.envs.generation import run_generation

        return await run_generation(
            self,
            inputs,
            client,
            model,
            sampling_args=sampling_args,
            rollouts_per_example=rollouts_per_example,
            max_concurrent=max_concurrent,
            max_concurrent_scoring=max_concurrent_scoring,
            score_rollouts=score_rollouts,
            results_path=results_path,
            state_columns=state_columns,
            on_progress=on_progress,
            metadata=metadata,
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
        max_concurrent_scoring: int = -1,
        results_path: str | None = None,
        save_results: bool = False,
        output_dir: str = "outputs",
        state_columns: list[str] | None = None,
        on_progress: Callable[..., Any] | None = None,
        seed: int | None = None,
        **kwargs: Any,
    ) -> GenerateOutputs:
        """Evaluate ``model`` on the eval dataset (or the train dataset if there is none)."""
        from verifiers.results.layout import new_run_dir

        dataset = self.dataset_rows("eval", n=num_examples, seed=seed)
        if results_path is None and save_results:
            results_path = str(new_run_dir(output_dir, self.env_id or type(self).__name__, model))
        return await self.generate(
            dataset,
            client,
            model,
            sampling_args=sampling_args,
            rollouts_per_example=rollouts_per_example,
            max_concurrent=max_concurrent,
            max_concurrent_scoring=max_concurrent_scoring,
            results_path=results_path,
            state_columns=state_columns,
            on_progress=on_progress,
        )

    def evaluate_sync(self, *args: Any, **kwargs: Any) -> GenerateOutputs:
        """``evaluate`` for synchronous code. Ctrl-C stops cleanly; saved results stay resumable."""
        return asyncio.run(self.evaluate(*args, **kwargs))

    def generate_sync(self, *args: Any, **kwargs: Any) -> GenerateOutputs:
        return asyncio.run(self.generate(*args, **kwargs))

    def make_dataset(
        self, results: GenerateOutputs, state_columns: list[str] | None = None
    ) -> Dataset:
        """A ``datasets.Dataset`` of finished rollouts (for inspection, upload or SFT)."""
        from datasets import Dataset

        from verifiers.results.records import rollout_record

        return Dataset.from_list([rollout_record(s, state_columns) for s in results.state])


def assistant_message(message: dict[str, Any]) -> dict[str, Any]:
    """The reply as a chat message, keeping tool calls and reasoning exactly as the server sent them."""
    out: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if message.get("tool_calls"):
        out["tool_calls"] = message["tool_calls"]
    elif out["content"] is None:
        out["content"] = ""
    for key in ("reasoning_content", "reasoning"):
        if message.get(key):
            out[key] = message[key]
    return out


def token_data(response: dict[str, Any], choice: dict[str, Any]) -> TokenData | None:
    """Token ids and logprobs when the server returned them (vLLM-style fields)."""
    completion_ids = choice.get("token_ids")
    prompt_ids = response.get("prompt_token_ids") or choice.get("prompt_token_ids")
    logprobs_obj = choice.get("logprobs") or {}
    logprobs: list[float] | None = None
    if isinstance(logprobs_obj, dict):
        content = logprobs_obj.get("content")
        if isinstance(content, list):
            logprobs = [float(t.get("logprob", 0.0)) for t in content]
            if (
                completion_ids is None
                and content
                and str(content[0].get("token", "")).startswith("token_id:")
            ):
                completion_ids = [int(str(t["token"]).split(":", 1)[1]) for t in content]
        elif isinstance(logprobs_obj.get("token_logprobs"), list):
            logprobs = [float(x or 0.0) for x in logprobs_obj["token_logprobs"]]
    if completion_ids is None or prompt_ids is None:
        return None
    return {
        "prompt_ids": list(prompt_ids),
        "prompt_mask": [0] * len(prompt_ids),
        "completion_ids": list(completion_ids),
        "completion_mask": [1] * len(completion_ids),
        "completion_logprobs": logprobs if logprobs is not None else [0.0] * len(completion_ids),
    }


async def _call_maybe_async(func: Callable[..., Any], *args: Any) -> Any:
    result = func(*args)
    if inspect.isawaitable(result):
        result = await result
    return result


def _subset(dataset: Dataset, n: int, seed: int | None) -> Dataset:
    # Dataset.shuffle returns a new dataset: the environment's own copy keeps its order.
    if seed is not None:
        dataset = dataset.shuffle(seed=seed)
    if n is not None and n > 0:
        dataset = dataset.select(range(min(n, len(dataset))))
    return dataset
