"""The orchestrator: rollouts from an environment against the inference server, turned into samples.

It samples a batch of examples for a step (deterministically from the step number, so a resumed
run sees the same data), runs ``env.generate`` with token ids and logprobs requested, computes
advantages from each group's final rewards, and records which policy version produced each
sample (the oldest version any of its turns came from, as reported by the server).
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from verifiers.errors import EmptyModelResponseError, ModelConnectionError, ModelTimeoutError
from verifiers.rl.advantages import ESTIMATORS
from verifiers.rl.batching import Sample, samples_from_state


class InferenceServerError(RuntimeError):
    """The inference server stopped answering; training cannot continue."""


@dataclass
class Batch:
    step: int
    samples: list[Sample]
    rewards: list[float]
    errors: int
    generation_s: float
    versions: list[int] = field(default_factory=list)

    @property
    def mean_reward(self) -> float:
        return statistics.fmean(self.rewards) if self.rewards else 0.0


class Orchestrator:
    def __init__(
        self,
        env: Any,
        client: Any,
        model: str,
        *,
        examples_per_step: int,
        rollouts_per_example: int,
        max_tokens: int,
        temperature: float = 1.0,
        max_concurrent: int = 32,
        advantage: str = "group_mean",
        seed: int = 0,
        health: Any = None,
    ) -> None:
        if advantage not in ESTIMATORS:
            raise ValueError(
                f"unknown advantage estimator {advantage!r}; choose from {', '.join(ESTIMATORS)}"
            )
        self.env, self.client, self.model = env, client, model
        self.rows = env.dataset_rows("train")
        self.examples_per_step = examples_per_step
        self.rollouts_per_example = rollouts_per_example
        self.max_concurrent = max_concurrent
        self.estimator = ESTIMATORS[advantage]
        self.seed = seed
        # the version the server was last told to serve (set by the loop): stands in for the
        # per-reply policy_version if a server does not report one
        self.served_version = 0
        self.health = (
            health  # () -> problem | None: a dead server is reported in ~0.5 s, not after retries
        )
        self.sampling_args = {
            "max_tokens": max_tokens,
            "temperature": temperature,
            "logprobs": True,
            "extra_body": {"return_token_ids": True},
        }

    def examples_for(self, step: int) -> list[dict[str, Any]]:
        rng = random.Random(self.seed * 1_000_003 + step)
        return rng.sample(self.rows, min(self.examples_per_step, len(self.rows)))

    async def generate(self, step: int) -> Batch:
        return await self._watched(self._generate(step))

    async def evaluate(
        self, rows: list[dict[str, Any]], rollouts_per_example: int, temperature: float, seed: int
    ) -> dict[str, float]:
        """Mean reward of the served policy on fixed rows with fixed seeds (comparable across
        steps); no token ids or logprobs are needed."""
        return await self._watched(self._evaluate(rows, rollouts_per_example, temperature, seed))

    async def _evaluate(self, rows, rollouts_per_example, temperature, seed) -> dict[str, float]:
        start = time.perf_counter()
        sampling = {
            "max_tokens": self.sampling_args["max_tokens"],
            "temperature": temperature,
            "seed": seed,
        }
        out = await self.env.generate(
            rows,
            self.client,
            self.model,
            sampling_args=sampling,
            rollouts_per_example=rollouts_per_example,
            max_concurrent=self.max_concurrent,
        )
        rewards = [float(r or 0.0) for r in out.reward]
        return {
            "eval_reward": statistics.fmean(rewards) if rewards else 0.0,
            "eval_reward_std": statistics.pstdev(rewards) if len(rewards) > 1 else 0.0,
            "eval_rollouts": len(rewards),
            "eval_errors": sum(1 for s in out.state if s.get("error")),
            "eval_s": time.perf_counter() - start,
        }

    async def _watched(self, coro: Any) -> Any:
        """Run ``coro``, but give up within ~0.5 s of the server dying (not after retries)."""
        work = asyncio.ensure_future(coro)
        while self.health is not None and not work.done():
            await asyncio.wait({work}, timeout=0.5)
            problem = None if work.done() else self.health()
            if problem:
                work.cancel()
                await asyncio.gather(work, return_exceptions=True)
                raise InferenceServerError(problem)
        return await work

    async def _generate(self, step: int) -> Batch:
        start = time.perf_counter()
        at_start = self.served_version
        rows = self.examples_for(step)
        sampling = dict(self.sampling_args, seed=self.seed * 1_000_003 + step * 7919)
        out = await self.env.generate(
            rows,
            self.client,
            self.model,
            sampling_args=sampling,
            rollouts_per_example=self.rollouts_per_example,
            max_concurrent=self.max_concurrent,
        )
        errors = [s for s in out.state if s.get("error")]
        connection = [
            s for s in errors if isinstance(s["error"], ModelConnectionError | ModelTimeoutError)
        ]
        if out.state and len(connection) == len(out.state):
            raise InferenceServerError(
                f"the inference server stopped answering: {connection[0]['error']}"
            )
        groups: dict[int, list[Any]] = {}
        for state in out.state:
            groups.setdefault(state["example_id"], []).append(state)
        samples: list[Sample] = []
        versions: list[int] = []
        for states in groups.values():
            advantages = self.estimator([float(s.get("reward") or 0.0) for s in states])
            for state, advantage in zip(states, advantages, strict=True):
                if state.get("error") and not _trainable_error(state):
                    continue
                version = min(
                    (int(r.get("policy_version", at_start)) for r in state["responses"]),
                    default=at_start,
                )
                versions.append(version)
                samples.extend(samples_from_state(state, advantage, version))
        return Batch(
            step, samples, list(out.reward), len(errors), time.perf_counter() - start, versions
        )


def _trainable_error(state: dict[str, Any]) -> bool:
    """An empty reply is the policy's own doing: its tokens (an end-of-sequence) are trained on
    with the rollout's reward, so a policy cannot drift into saying nothing unpenalized. Errors
    of the server, the environment or the tools are not the policy's and are dropped."""
    return isinstance(state["error"], EmptyModelResponseError) and bool(state.get("trajectory"))
