"""Where a model is served: an endpoints registry (TOML), explicit flags, or the embedded model.

The registry read without ``--endpoints`` is the user's own, ``$XDG_CONFIG_HOME/verifiers/
endpoints.toml`` (``~/.config/...``), used only when it is theirs and nobody else may write it.
A file found in the working directory never chooses where a key goes: a pulled environment's
``endpoints.toml`` could send ``$OPENAI_API_KEY`` to its own URL, so ``./endpoints.toml`` is read
only when named (``--endpoints endpoints.toml``). No alias may take an embedded model's name.

``endpoints.toml``::

    [models.mini]
    model = "gpt-4.1-mini"             # the model name sent to the endpoint
    url = "https://api.openai.com/v1"  # base URL
    key = "OPENAI_API_KEY"             # name of the environment variable holding the key
    api = "chat"                       # optional: chat, completions, responses or anthropic
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from verifiers.errors import UsageError
from verifiers.local_model.models import DEFAULT_MODEL
from verifiers.processes.credential_file import trusted_file

Api = Literal["chat", "completions", "responses", "anthropic"]
DEFAULT_KEY_VAR = "OPENAI_API_KEY"  # where an endpoint's key is read from, unless told otherwise
DEFAULT_REGISTRY = "endpoints.toml"  # the file name, in the user's config dir (see above)


def user_registry() -> Path:
    """The registry read without ``--endpoints``: the user's own."""
    config_home = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config_home) / "verifiers" / DEFAULT_REGISTRY


class EndpointEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str
    url: str
    key: str = DEFAULT_KEY_VAR
    api: Api | None = None


CLIError = UsageError  # vf-eval's name for it: a problem with the user's input (one line, exit 2)


@dataclass(frozen=True)
class Endpoint:
    model: str
    base_url: str | None  # None: start the embedded model server
    api_key: str | None
    api: str | None = None  # the API the endpoint speaks, when its registry entry says
    key_var: str | None = None  # the environment variable the key came from

    @property
    def url(self) -> str:
        """The base URL, once there is one (the embedded server, if any, has started)."""
        if self.base_url is None:
            raise CLIError(f"{self.model} has no endpoint URL: the built-in server is not started")
        return self.base_url


def load_registry(path: Path) -> dict[str, EndpointEntry]:
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError as exc:
        raise CLIError(f"endpoints file {path} does not exist") from exc
    except tomllib.TOMLDecodeError as exc:
        raise CLIError(f"endpoints file {path} is not valid TOML: {exc}") from exc
    models = data.get("models", {})
    if not isinstance(models, dict):
        raise CLIError(f"endpoints file {path}: [models] must be a table of aliases")
    try:
        registry = {alias: EndpointEntry.model_validate(e) for alias, e in models.items()}
    except ValidationError as exc:
        raise CLIError(
            f"endpoints file {path}: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}"
        ) from exc
    from verifiers.local_model.models import ALIASES, EMBEDDED

    for alias in registry:
        if ALIASES.get(alias.lower(), alias.lower()) in EMBEDDED:
            raise CLIError(
                f"endpoints file {path}: the alias {alias!r} is the embedded model's name; an "
                "alias may not take it (rename the alias)"
            )
    return registry


def resolve_endpoint(
    model: str | None, base_url: str | None, key_var: str, endpoints_file: str | None
) -> Endpoint:
    """Explicit ``-b`` wins (with ``-m``, or the model it serves); then an alias from the
    registry; otherwise the embedded model."""
    registry: dict[str, EndpointEntry] = {}
    if endpoints_file:
        registry = load_registry(Path(endpoints_file))
    elif trusted_file(user_registry()):
        registry = load_registry(user_registry())
    if base_url:  # no -m: the model the server serves (``served_model``, once it answers)
        return Endpoint(model or "", base_url, os.environ.get(key_var) or "EMPTY")
    if model and model in registry:
        entry = registry[model]
        key = os.environ.get(entry.key)
        if key is None:
            raise CLIError(
                f"endpoint alias {model!r} reads its API key from ${entry.key}, which is not set"
            )
        return Endpoint(entry.model, entry.url, key, entry.api, entry.key)
    if model:
        unknown_model(model, registry, endpoints_file or str(user_registry()))
    return Endpoint(model or DEFAULT_MODEL, None, None)


def unknown_model(model: str, registry: dict[str, EndpointEntry], registry_name: str) -> None:
    """Fail before any server starts when ``-m`` names nothing this run could use: not an
    alias, not a local model directory, not an embedded model (the closest alias suggested)."""
    import difflib

    from verifiers.local_model.models import is_servable

    if is_servable(model):
        return
    close = difflib.get_close_matches(model, list(registry), n=1, cutoff=0.6)
    if close:
        where = f"not an alias in {registry_name} (did you mean {close[0]!r}?)"
    elif registry:
        where = f"not an alias in {registry_name} (aliases: {', '.join(sorted(registry))})"
    else:
        where = f"not an alias (no {registry_name})"
    here = Path(DEFAULT_REGISTRY)
    if here.is_file() and here.resolve() != Path(registry_name).expanduser().resolve():
        where += (
            f"; ./{DEFAULT_REGISTRY} is not read unless named (--endpoints {DEFAULT_REGISTRY}): "
            "a file in the working directory never chooses where a key goes"
        )
    raise CLIError(
        f"-m {model}: {where}, not a local model directory and not the embedded model; "
        "for a model on a server pass -b URL as well"
    )
