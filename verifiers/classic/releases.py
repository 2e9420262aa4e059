"""Which classic ``verifiers`` release an environment was written for.

The classic API changed behaviour between releases without changing names, and environments
depend on the behaviour of theirs. So each environment runs with the behaviour of one release:

- the lower bound of its package's ``verifiers`` requirement (``verifiers>=0.1.9`` → 0.1.9),
  read by ``vf.load_environment`` before the package's code runs;
- else ``with vf.written_for("0.1.8"):`` around code that builds environments inline;
- else the ``VF_API_VERSION`` environment variable;
- else the latest classic release (``LATEST``).

The release is fixed on the environment when it is built (``Environment.release``); the engine
scopes it around each rollout and each scoring, so code they call that asks ``current()`` gets
the release of the environment it runs for, also beside environments of other releases.

What differs, by the release that changed it (``Release`` answers each question):

======== ===================================================================================
0.1.9    multi-turn monitor metrics (``num_turns``; ``total_tool_calls`` and ``<tool>_calls``
         for tool environments), ``state["final_env_response"]``, MathRubric's metric is
         named ``correct_answer`` (before: ``correct_answer_reward_func``);
         ``get_model_response(state, prompt)`` raises ``EmptyModelResponseError`` for a reply
         that is None or has no ``choices``
0.1.10   ``get_model_response`` also raises ``InvalidModelResponseError`` for a reply with other
         than one choice and ``EmptyModelResponseError`` for one with no content and no tool
         calls; ``state_to_output`` rows carry ``oai_tools`` (``tool_defs`` from 0.1.11)
0.1.11   typed messages (``vf.UserMessage``... objects instead of dicts), tool definitions as
         ``vf.Tool`` (``tool_defs``; ``oai_tools`` become them), replies as ``vf.Response``
         objects, completion prompts as ``vf.TextMessage`` lists, results as ``outputs`` rows
0.1.12   MathRubric scores only a ``\\boxed{}`` answer (before: the whole reply when it has
         none) and skips answers over 50,000 characters (before: no limit; here 100,000)
0.1.14   a JSON ``task`` is the row's payload (a plain string stays a task name) and output rows
         no longer carry ``task``; ``EnvGroup`` routes rows by ``info["env_id"]`` instead of
         ``task``; the completion is rendered by a ``render_state`` cleanup handler that runs
         first
0.2.0    tool definitions built from functions are ``strict``
======== ===================================================================================
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cached_property, lru_cache

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

LATEST = Version("0.3.1")
"""The last classic release (upstream removed the classic API in 0.4)."""
OLDEST = Version("0.1.0")
ENV_VAR = "VF_API_VERSION"

_SCOPED: ContextVar[Version | None] = ContextVar("verifiers_api_version", default=None)


@dataclass(frozen=True)
class Release:
    """The behaviour of one classic release, as the questions the engine asks."""

    version: Version

    @cached_property
    def monitor_metrics(self) -> bool:
        return self.version >= Version("0.1.9")

    @cached_property
    def final_env_response_key(self) -> bool:
        return self.version >= Version("0.1.9")

    @cached_property
    def math_metric_name(self) -> str:
        return (
            "correct_answer" if self.version >= Version("0.1.9") else "correct_answer_reward_func"
        )

    @cached_property
    def rejects_missing_reply(self) -> bool:
        """A reply that is None or has no ``choices`` is an ``EmptyModelResponseError``."""
        return self.version >= Version("0.1.9")

    @cached_property
    def rejects_malformed_reply(self) -> bool:
        """``get_model_response`` itself refuses other than one choice and an empty reply."""
        return self.version >= Version("0.1.10")

    @cached_property
    def typed_messages(self) -> bool:
        return self.version >= Version("0.1.11")

    @cached_property
    def math_needs_boxed(self) -> bool:
        """MathRubric's default parser finds no answer in a reply without ``\\boxed{}``."""
        return self.version >= Version("0.1.12")

    @cached_property
    def math_max_verify_chars(self) -> int:
        """MathRubric's default limit on an answer's length: 50,000 from 0.1.12. Earlier
        releases set none; 100,000 still verifies every answer their own tests verify, while a
        reply of a million characters cannot hold the verifier's threads (the flaw 0.1.12
        fixed)."""
        return 50_000 if self.version >= Version("0.1.12") else 100_000

    @cached_property
    def task_is_payload(self) -> bool:
        """A JSON ``task`` is the row's payload (a plain string is still a task name)."""
        return self.version >= Version("0.1.14")

    @cached_property
    def env_group_routes_by_info(self) -> bool:
        return self.version >= Version("0.1.14")

    @cached_property
    def strict_tool_defs(self) -> bool:
        """Tool definitions built from functions are marked ``strict`` (sent as such)."""
        return self.version >= Version("0.2.0")

    @cached_property
    def render_state_cleanup(self) -> bool:
        """The completion is rendered by a ``render_state`` cleanup handler (priority 100)."""
        return self.version >= Version("0.1.14")

    def __str__(self) -> str:
        return str(self.version)


@lru_cache(maxsize=256)
def parse_version(value: str | Version) -> Version:
    """A release number, clamped to the classic range; a clear error for anything else.
    Cached: the engine scores each rollout ``written_for`` its environment's release, and
    parsing it again took two ``Version`` parses a rollout."""
    if isinstance(value, Version):
        version = value
    else:
        try:
            version = Version(str(value).strip())
        except InvalidVersion:
            raise ValueError(
                f"{value!r} is not a verifiers release number (e.g. 0.1.8, 0.1.14, 0.3.1)"
            ) from None
    base = Version(version.base_version)
    return min(max(base, OLDEST), LATEST)


def lower_bound(specifier: SpecifierSet | str) -> Version | None:
    """The oldest release a requirement's specifier admits (``>=0.1.9,<0.4`` → 0.1.9)."""
    spec = SpecifierSet(str(specifier)) if not isinstance(specifier, SpecifierSet) else specifier
    bounds = []
    for clause in spec:
        if clause.operator in (">=", "==", "~=", "===") and "*" not in clause.version:
            bounds.append(Version(clause.version))
        elif clause.operator == ">":
            bounds.append(Version(clause.version))
        elif clause.operator == "==" and clause.version.endswith(".*"):
            bounds.append(Version(clause.version[:-2]))
    return max(bounds) if bounds else None


def from_requirements(requires: list[str] | None) -> Version | None:
    """The release a distribution's ``Requires-Dist`` entries name for ``verifiers``."""
    for line in requires or []:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if requirement.name.lower().replace("_", "-") != "verifiers":
            continue
        if requirement.marker is not None and "extra" in str(requirement.marker):
            continue
        bound = lower_bound(requirement.specifier)
        return parse_version(bound) if bound is not None else None
    return None


def current() -> Release:
    """The release code running now was written for (see the module docstring for the order)."""
    scoped = _SCOPED.get()
    if scoped is not None:
        return _release(scoped)
    configured = os.environ.get(ENV_VAR, "").strip()
    if configured:
        return _release(parse_version(configured))
    return _release(LATEST)


@lru_cache(maxsize=256)
def _release(version: Version) -> Release:
    """One ``Release`` per version (frozen), so its answers are worked out once, not per call."""
    return Release(version)


@contextmanager
def written_for(version: str | Version | None) -> Iterator[Release]:
    """Build environments inside this block with the behaviour of release ``version``."""
    if version is None:
        yield current()
        return
    token = _SCOPED.set(parse_version(version))
    try:
        yield current()
    finally:
        _SCOPED.reset(token)
