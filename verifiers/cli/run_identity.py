"""What a ``vf-eval`` run is: everything that decides its rows, recorded when it starts.

``--resume RUN`` with nothing else on the command line restores all of it (the split, the
examples and their order, the endpoint, the key's variable, the sampling args...), so the line
printed after Ctrl-C continues exactly the run that was interrupted; a flag that would change
any of it is refused with each difference named. Without this a ``--split train`` run resumed
on the eval rows under the same example ids, and a run against ``-b URL -k VAR`` resumed
against the built-in model.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class RunIdentity(BaseModel):
    """``metadata.json``'s ``identity``: the settings that decide a run's rows."""

    model_config = ConfigDict(extra="ignore")

    env: str  # the id as given (owner/name@version)
    env_args: dict[str, Any] = {}
    split: str = "eval"
    seed: int | None = None
    num_examples: int  # as asked for (-n; -1: all)
    rollouts_per_example: int
    sampling_args: dict[str, Any] = {}
    model: str
    base_url: str | None = None  # None: the built-in server the run starts itself
    api: str = "chat"
    api_key_var: str | None = None  # the variable's name, never its value
    release: str | None = None  # the classic release the environment ran as
    state_columns: list[str] | None = None  # -C: the state keys saved in every row

    @classmethod
    def recorded(cls, metadata: dict[str, Any]) -> RunIdentity | None:
        """The identity a run recorded (None for a run from before identities were kept)."""
        saved = metadata.get("identity")
        return cls.model_validate(saved) if isinstance(saved, dict) else None


FLAGS = {
    "env": "ENV",
    "env_args": "-a/--env-args",
    "split": "--split",
    "seed": "--seed",
    "num_examples": "-n/--num-examples",
    "rollouts_per_example": "-r/--rollouts-per-example",
    "sampling_args": "-S/-t/-T (sampling args)",
    "model": "-m/--model",
    "base_url": "-b/--api-base-url",
    "api": "--api",
    "api_key_var": "-k/--api-key-var",
    "state_columns": "-C/--state-columns",
}


def differences(recorded: RunIdentity, given: dict[str, Any]) -> list[str]:
    """Each setting given on a resume's command line that differs from the run's, as
    ``--split: the run has 'train', not 'eval'``. Sampling args compare key by key (a resume
    may repeat some of them)."""
    found = []
    for key, value in given.items():
        was = getattr(recorded, key)
        if key == "sampling_args":
            changed = {k: v for k, v in value.items() if was.get(k) != v}
            if changed:
                had = {k: was.get(k) for k in changed}
                found.append(f"{FLAGS[key]}: the run has {had}, not {changed}")
        elif key == "base_url" and _same_url(was, value):
            continue
        elif key == "env" and _same_env(was, value):
            continue
        elif was != value:
            found.append(f"{FLAGS[key]}: the run has {was!r}, not {value!r}")
    return found


def _same_url(a: str | None, b: str | None) -> bool:
    return (a or "").rstrip("/") == (b or "").rstrip("/")


def _same_env(a: str, b: str) -> bool:
    """One environment id (its name in any case) at one version: ``OWNER/NAME@1.0`` resumed as
    ``owner/name@1.0``, not as ``owner/name@2.0`` or as whatever is installed."""
    from verifiers.loading.env_id import EnvId, EnvIdError

    try:
        x, y = EnvId.parse(a), EnvId.parse(b)
    except EnvIdError:
        return a.lower() == b.lower()
    return x == y  # parsed: owner and name lowercased, "@latest" as no version
