"""The orchestrator: rollouts from an environment against the inference server, turned into samples.

It samples a batch of examples for a step (deterministically from the step number, so a resumed
run sees the same data), runs ``env.generate`` with token ids and logprobs requested, computes
advantages from each group's final rewards, and records which policy version produced each
sample (the oldest version any of its turns came from, as reported by the server).

Batch forming, in order: rollouts that failed for reasons not the policy's leave their group
(they are neither baseline nor sample); truncated ones are kept, masked out or penalized
(``overlong``: DAPO's soft overlong punishment); groups whose rewards are all equal have no
advantage under any estimator and are dropped, and with ``dynamic_sampling`` further examples
are rolled out until the step has its groups (DAPO §3.2) — each example at most once a step.
Advantages are computed once the step's groups are known (batch-level std needs them all).
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from verifiers.errors import EmptyModelResponseError, ModelConnectionError, ModelTimeoutError
from verifiers.rl.algorithm.advantages import ESTIMATORS, batch_advantages
from verifiers.rl.algorithm.batching import Sample, samples_from_state
from verifiers.rl.configs.rl import GRPOLoss, OrchestratorConfig
from verifiers.weights.errors import InferenceServerError


@dataclass
class Batch:
    step: int
    samples: list[Sample]
    rewards: list[float]
    errors: int
    generation_s: float
    versions: list[int] = field(default_factory=list)
    stats: dict[str, float] = field(default_factory=dict)  # per-step batch metrics
    recorded: list[dict[str, Any]] = field(default_factory=list)  # groups vf-report shows

    @property
    def mean_reward(self) -> float:
        return statistics.fmean(self.rewards) if self.rewards else 0.0


class Orchestrator:
    def __init__(
        self,
        env: Any,
        client: Any,
        model: str,
        config: OrchestratorConfig | None = None,
        *,
        advantage: str | None = None,
        seed: int = 0,
        health: Any = None,
        **settings: Any,
    ) -> None:
        """``config`` (or keyword ``settings``, validated the same way) is the run's
        ``[orchestrator]`` section; ``advantage`` is the loss's estimator (default: GRPO's)."""
        config = OrchestratorConfig.model_validate(
            {**(config or OrchestratorConfig()).model_dump(), **settings}
        )
        advantage = advantage or GRPOLoss.model_fields["advantage"].default
        if advantage not in ESTIMATORS:
            raise ValueError(
                f"unknown advantage estimator {advantage!r}; choose from {', '.join(ESTIMATORS)}"
            )
        self.env, self.client, self.model = env, client, model
        self.config = config
        self.rows = env.dataset_rows("train")
        self.advantage = advantage
        self.seed = seed
        # the version the server was last told to serve (set by the loop): stands in for the
        # per-reply policy_version if a server does not report one
        self.served_version = 0
        self.health = (
            health  # () -> problem | None: a dead server is reported in ~0.5 s, not after retries
        )
        self.workers: Any = None  # the environment workers, once started (start_workers)
        self.sampling_args = {
            "max_tokens": config.max_tokens,
            "temperature": config.temperature,
            "logprobs": True,
            "extra_body": {"return_token_ids": True},
        }

    def examples_for(self, step: int, round_: int = 0) -> list[dict[str, Any]]:
        """The step's examples (round 0), or dynamic sampling's refills (rounds 1, 2, …): slices
        of one shuffle of the rows per step, so no example is drawn twice in a step (a round
        past the end of the rows gets none)."""
        rng = random.Random(self.seed * 1_000_003 + step)
        order = rng.sample(range(len(self.rows)), len(self.rows))
        size = self.config.examples_per_step
        return [self.rows[i] for i in order[round_ * size : (round_ + 1) * size]]

    async def start_workers(self) -> None:
        """Start the environment workers the config asks for (see ``env_workers``)."""
        spec = self.config.env_workers
        loaded_by_id = bool(getattr(self.env, "loaded_as", None))
        if self.workers is not None or spec == "none" or (spec == "auto" and not loaded_by_id):
            return
        from verifiers.workers import client_config_of, start_workers

        if getattr(self.client, "api_key", None):  # vf-rl's server has a key of this run's
            client_config_of(self.client)  # put where workers inherit it, before they start
        self.workers = await start_workers(spec, self.env)

    async def close(self) -> None:
        if self.workers is not None:
            await self.workers.close()
            self.workers = None

    def worker_stats(self) -> dict[str, float]:
        if self.workers is None:
            return {"env_workers": 0.0}
        described = self.workers.describe()
        return {
            "env_workers": float(described.get("workers", 0)),
            "env_worker_restarts": float(described.get("restarts", 0)),
        }

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
            max_concurrent=self.config.max_concurrent,
            env_workers=self.workers,
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
        rewards: list[float] = []
        drawn: list[float] = []  # every trainable reward of the step (batch-level std)
        kept: list[tuple[list[Any], list[float]]] = []
        errors = 0
        counts = dict.fromkeys(
            ("groups", "zero_advantage", "solve_all", "solve_none", "truncated"), 0
        )
        lengths: list[int] = []
        rounds = self.config.max_sampling_rounds if self.config.dynamic_sampling else 1
        round_ = 0
        for round_ in range(rounds):
            if not self.examples_for(step, round_):
                break  # every example was drawn this step
            out = await self._rollouts(step, round_)
            errors += sum(1 for s in out.state if s.get("error"))
            if round_ == 0:
                rewards = [float(r or 0.0) for r in out.reward]
            groups: dict[Any, list[Any]] = {}
            for state in out.state:
                groups.setdefault(state["example_id"], []).append(state)
            for states in groups.values():
                if round_ and len(kept) >= self.config.examples_per_step:
                    break  # a refill tops the batch up to its size, no further
                group = self._group(states, counts, lengths)
                if group is None:
                    continue
                drawn += group[1]
                if max(group[1]) - min(group[1]) < 1e-9:  # no advantage under any estimator
                    counts["zero_advantage"] += 1
                    if self.config.filter_zero_advantage:
                        continue
                kept.append(group)
            if len(kept) >= self.config.examples_per_step:
                break
        advantages = batch_advantages(self.advantage, [r for _, r in kept], drawn)
        samples: list[Sample] = []
        versions: list[int] = []
        recorded = []
        for index, ((members, group_rewards), group_advantages) in enumerate(
            zip(kept, advantages, strict=True)
        ):
            record = index < self.config.report_groups
            group_samples, group_versions = self._samples(
                members, group_advantages, at_start, record
            )
            samples += group_samples
            versions += group_versions
            if record:
                recorded.append(
                    {
                        "example_id": members[0].get("example_id"),
                        "group_rewards": group_rewards,
                        "samples": group_samples,
                    }
                )
        n_groups = max(counts["groups"], 1)
        stats = {
            "groups_trained": len(kept),
            "zero_advantage_groups": counts["zero_advantage"],
            "solve_all": counts["solve_all"] / n_groups,
            "solve_none": counts["solve_none"] / n_groups,
            "truncated_fraction": counts["truncated"] / max(len(lengths), 1),
            "completion_tokens": statistics.fmean(lengths) if lengths else 0.0,
            "sampling_rounds": round_ + 1,
            **self.worker_stats(),
        }
        batch = Batch(step, samples, rewards, errors, time.perf_counter() - start, versions, stats)
        batch.recorded = recorded
        return batch

    async def _rollouts(self, step: int, round_: int) -> Any:
        rows = self.examples_for(step, round_)
        seed = self.seed * 1_000_003 + step * 7919 + round_ * 104_729
        out = await self.env.generate(
            rows,
            self.client,
            self.model,
            sampling_args=dict(self.sampling_args, seed=seed),
            rollouts_per_example=self.config.rollouts_per_example,
            max_concurrent=self.config.max_concurrent,
            env_workers=self.workers,
        )
        errors = [s for s in out.state if s.get("error")]
        connection = [
            s for s in errors if isinstance(s["error"], ModelConnectionError | ModelTimeoutError)
        ]
        if out.state and len(connection) == len(out.state):
            raise InferenceServerError(
                f"the inference server stopped answering: {connection[0]['error']}"
            )
        return out

    def _group(
        self, states: list[Any], counts: dict[str, int], lengths: list[int]
    ) -> tuple[list[Any], list[float]] | None:
        """One prompt's rollouts that belong in its baseline, with their rewards (after the
        overlong penalty); None when none does."""
        members = [s for s in states if not s.get("error") or _trainable_error(s)]
        if not members:
            return None
        counts["groups"] += 1
        rewards = [float(s.get("reward") or 0.0) for s in members]
        counts["solve_all"] += all(r >= 1.0 for r in rewards)
        counts["solve_none"] += all(r <= 0.0 for r in rewards)
        counts["truncated"] += sum(bool(s.get("is_truncated")) for s in members)
        lengths += [_completion_tokens(s) for s in members]
        if self.config.overlong == "penalize":
            rewards = [r + self.overlong_penalty(s) for r, s in zip(rewards, members, strict=True)]
        return members, rewards

    def overlong_penalty(self, state: Any) -> float:
        """DAPO's soft overlong punishment (eq. 13): 0 up to max_tokens - L_cache tokens, then
        linear down to -overlong_penalty at max_tokens; a truncated reply gets all of it."""
        config = self.config
        if state.get("is_truncated"):
            return -config.overlong_penalty
        length, begin = _longest_turn(state), config.overlong_start()
        if length <= begin:
            return 0.0
        return -config.overlong_penalty * min(1.0, (length - begin) / (config.max_tokens - begin))

    def _samples(
        self, members: list[Any], advantages: list[float], at_start: int, record: bool
    ) -> tuple[list[Sample], list[int]]:
        """A group's rollouts as samples (truncated ones left out under ``overlong = mask``:
        they stay in the baseline), each with the policy version it came from."""
        samples: list[Sample] = []
        versions: list[int] = []
        for state, advantage in zip(members, advantages, strict=True):
            if state.get("is_truncated") and self.config.overlong == "mask":
                continue
            version = min(
                (
                    int(step["response"].get("policy_version", at_start))
                    for step in state.get("trajectory") or []
                    if step.get("response") is not None
                ),
                default=at_start,
            )
            versions.append(version)
            for sample in samples_from_state(state, advantage, version):
                sample.record = record
                samples.append(sample)
        return samples, versions


def _turn_lengths(state: Any) -> list[int]:
    return [
        len((step.get("tokens") or {}).get("completion_ids") or [])
        for step in state.get("trajectory") or []
    ]


def _completion_tokens(state: Any) -> int:
    return sum(_turn_lengths(state))


def _longest_turn(state: Any) -> int:
    return max(_turn_lengths(state), default=0)


def _trainable_error(state: dict[str, Any]) -> bool:
    """An empty reply is the policy's own doing: its tokens (an end-of-sequence) are trained on
    with the rollout's reward, so a policy cannot drift into saying nothing unpenalized. Errors
    of the server, the environment or the tools are not the policy's and are dropped."""
    return isinstance(state["error"], EmptyModelResponseError) and bool(state.get("trajectory"))
