"""Every ``prime`` subcommand's flags, declared once as its settings model.

A field's type, default and description are its flag's (``verifiers.cli.settings``:
``add_settings`` makes the subcommand's parser from the model, ``validate_settings`` the settings
its ``cmd_*`` function gets). The field names are the attribute names the commands read, and the
flags are those ``prime`` has always taken: scripts call it. ``prime hub ...`` is the server's
command line (``hub_server.settings``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from hub_client.versions import Bump
from hub_protocol.wire import Scope, Sort, Visibility
from verifiers.cli.settings import CommandSettings, Flag

Output = Literal["table", "json"]
LOCK_FILE = "environments.lock"

POSITIONAL = Flag(positional=True)


class NoSettings(CommandSettings):
    """A subcommand that takes no flags (``prime whoami``, ``prime token list``)."""


class LoginSettings(CommandSettings):
    url: str | None = Field(None, description="the hub's URL (kept in the config file)")
    # kept for scripts, not advertised: argv is readable by every local user (ps)
    token: Annotated[str | None, Flag(hidden=True)] = Field(
        None, description="the API token (prefer the prompt or stdin)"
    )


class TokenCreateSettings(CommandSettings):
    name: Annotated[str, POSITIONAL] = Field(description="the token's name")
    scope: list[Scope] | None = Field(
        None, description="what the token may do, repeatable; without it, read"
    )
    expires_in_days: int | None = Field(
        None, description="days until it expires; without it, never"
    )


class TokenRevokeSettings(CommandSettings):
    id: Annotated[int, POSITIONAL] = Field(description="the token's id (prime token list)")


class AccountDeleteSettings(CommandSettings):
    user: str | None = Field(
        None, description="an admin deletes this user's account; without it, your own"
    )
    yes: bool = Field(False, description="confirm the deletion: without it prime refuses")


class EnvInitSettings(CommandSettings):
    name: Annotated[str, POSITIONAL] = Field(description="the environment's name")
    path: Annotated[str, Flag("-p")] = Field(
        "./environments", description="the folder to create it in"
    )
    multi_file: bool = Field(False, description="a package of several modules, not one file")
    v1: bool = Field(
        False, description="a verifiers.v1 taskset package (Taskset, Task, Toolset) instead"
    )


class EnvPushSettings(CommandSettings):
    path: str = Field(".", description="the environment's folder")
    owner: str | None = Field(None, description="namespace: a team you belong to; without it, you")
    visibility: Visibility | None = Field(
        None,
        description="a new environment is public unless given; an existing one keeps its "
        "visibility",
    )
    bump: Bump | None = Field(None, description="raise [project].version first")
    tag: list[str] = Field([], description="a tag to add, repeatable")


class EnvInstallSettings(CommandSettings):
    specs: Annotated[list[str], Flag(positional=True, metavar="owner/name[@version]")] = Field(
        [], description="the environments to install and pin in the lock file"
    )
    locked: bool = Field(False, description="install exactly what the lock file records")
    lock_file: str = Field(LOCK_FILE, description="the lock file")
    python: str | None = Field(
        None, description="the interpreter to install into; without it, this one"
    )


class EnvUninstallSettings(CommandSettings):
    spec: Annotated[str, POSITIONAL] = Field(description="owner/name of the environment")
    lock_file: str = Field(LOCK_FILE, description="the lock file to remove it from")
    python: str | None = Field(
        None, description="the interpreter to uninstall from; without it, this one"
    )


class EnvPullSettings(CommandSettings):
    spec: Annotated[str, POSITIONAL] = Field(description="owner/name[@version]")
    dir: Annotated[str, Flag("-d")] = Field(".", description="the folder to extract into")


class EnvListSettings(CommandSettings):
    owner: str | None = Field(None, description="only this owner's environments")
    tag: str | None = Field(None, description="only environments with this tag")
    sort: Sort = Field("updated", description="the order")
    page: int = Field(1, description="the page of results")
    output: Output = Field("table", description="a table, or JSON for scripts")


class EnvSearchSettings(EnvListSettings):
    query: Annotated[str, POSITIONAL] = Field(description="words in a name or description")


class EnvShowSettings(CommandSettings):
    """``prime env info`` and ``prime env versions``."""

    spec: Annotated[str, POSITIONAL] = Field(description="owner/name[@version]")
    output: Output = Field("table", description="a table, or JSON for scripts")


class EnvYankSettings(CommandSettings):
    spec: Annotated[str, Flag(positional=True, metavar="owner/name@version")] = Field(
        description="the version to yank"
    )
    reason: str | None = Field(None, description="why, shown to whoever installs it")
    undo: bool = Field(False, description="un-yank: make the version installable again")


class EnvDeleteSettings(CommandSettings):
    spec: Annotated[str, POSITIONAL] = Field(
        description="owner/name@version, or owner/name for every version"
    )
    yes: bool = Field(False, description="confirm the deletion: without it prime refuses")


class DataPushSettings(CommandSettings):
    dataset_dir: Annotated[str, POSITIONAL] = Field(description="a vf-data dataset's folder")
    env: str | None = Field(
        None, description="owner/name@version; without it, the one its runs name"
    )


class DataListSettings(CommandSettings):
    spec: Annotated[str, POSITIONAL] = Field(description="owner/name[@version]")
    output: Output = Field("table", description="a table, or JSON for scripts")


class EvalPushSettings(CommandSettings):
    run_dir: Annotated[str, POSITIONAL] = Field(description="a vf-eval run's folder")
    env: str | None = Field(
        None, description="owner/name@version; without it, the run's metadata names it"
    )
