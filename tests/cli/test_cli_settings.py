"""Every CLI's settings are declared once, in its settings model: ``--help`` shows each field
with its default and description, and shows nothing the model does not declare (a flag or a
default written in a parser by hand fails here)."""

from __future__ import annotations

import json
import re
import types
from typing import Any, Union, get_args, get_origin

import pytest
from pydantic import BaseModel

from verifiers.cli.eval.defaults import EvalDefaults
from verifiers.cli.serve import ServeSettings
from verifiers.cli.settings import (
    CommandSettings,
    build_parser,
    flag_of,
    long_flag,
    parse_settings,
)
from verifiers.rl.configs.rl import RLConfig
from verifiers.rl.configs.sft import SFTConfig


def shown(value: Any, none: str) -> str:
    """How a default reads in --help: strings bare, None as ``none`` (``null`` in a TOML
    config's help), the rest JSON."""
    if value is None:
        return none
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return shown(getattr(value, "name", None), none)
    return json.dumps(value)


def help_of(main: Any, capsys: pytest.CaptureFixture[str], monkeypatch: Any) -> str:
    monkeypatch.setenv("COLUMNS", "1000")  # one line per flag: what a reader sees, unwrapped
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    return capsys.readouterr().out


def flat(text: str) -> str:
    return " ".join(text.split())


# --- vf-serve and vf-eval: argparse made from the model ----------------------------------------


COMMANDS = {  # module of verifiers/cli -> (command, its settings model's module and name)
    "eval": ("vf-eval", "verifiers.cli.eval.settings", "EvalSettings"),
    "serve": ("vf-serve", "verifiers.cli.serve", "ServeSettings"),
    "init": ("vf-init", "verifiers.cli.init", "InitSettings"),
    "install": ("vf-install", "verifiers.cli.install", "InstallSettings"),
    "data": ("vf-data", "verifiers.cli.data", "DataSettings"),
    "report": ("vf-report", "verifiers.cli.report", "ReportSettings"),
    "env_server": ("vf-env-server", "verifiers.cli.env_server", "EnvServerSettings"),
}
TOML_COMMANDS = {"rl", "sft"}  # @ file.toml + --dotted.key: their help is checked below


def command_mains() -> list[tuple[str, type[CommandSettings], Any]]:
    import importlib

    return [
        (
            prog,
            getattr(importlib.import_module(module), model),
            importlib.import_module(f"verifiers.cli.{name}").main,
        )
        for name, (prog, module, model) in COMMANDS.items()
    ]


def entries(text: str) -> dict[str, str]:
    """argparse's help as {flags: flattened help}: an entry starts at a line indented by two."""
    found: dict[str, list[str]] = {}
    head = None
    for line in text.splitlines():
        if re.match(r"^  \S", line):
            head, _, rest = line.strip().partition("  ")
            found[head] = [rest]
        elif head is not None and line.startswith("   "):
            found[head].append(line)
        else:
            head = None
    return {key: flat(" ".join(value)) for key, value in found.items()}


def entry_of(help_entries: dict[str, str], names: list[str]) -> str | None:
    for head, body in help_entries.items():
        flags = {part.split()[0] for part in head.split(", ")}
        if flags & set(names):
            return body
    return None


def assert_help_shows_each_setting(prog: str, model: type[CommandSettings], text: str) -> None:
    """Every field of ``model`` in ``text`` (--help) with its flags, default and description; a
    hidden flag not at all."""
    help_entries = entries(text)
    for name, field in model.model_fields.items():
        flag = flag_of(field)
        assert field.description, f"{prog}: {name} has no description"
        if flag.hidden:
            assert long_flag(name) not in text, f"{prog}: hidden {name} shown"
            continue
        assert flat(field.description) in flat(text), f"{prog}: {name}'s help"
        if flag.env:
            assert f"${flag.env}" in text, f"{prog}: {name}'s environment variable"
        if not flag.command_line:
            continue
        names = [flag.metavar or name] if flag.positional else [*flag.aliases, long_flag(name)]
        body = entry_of(help_entries, names)
        assert body is not None, f"{prog}: no {names} in --help"
        assert flat(field.description) in body
        if field.is_required():
            assert "(required)" in body
        else:
            default = field.get_default(call_default_factory=True)
            assert f"(default: {shown(default, 'none')}" in body, (name, body)


@pytest.mark.parametrize("prog, model, main", command_mains(), ids=lambda v: str(v)[:8])
def test_argparse_help_shows_every_setting_with_its_default_and_description(
    prog, model, main, capsys, monkeypatch
):
    assert_help_shows_each_setting(prog, model, help_of(main, capsys, monkeypatch))


@pytest.mark.parametrize("prog, model, main", command_mains(), ids=lambda v: str(v)[:8])
def test_argparse_help_shows_no_flag_the_model_does_not_declare(
    prog, model, main, capsys, monkeypatch
):
    text = help_of(main, capsys, monkeypatch)
    declared = {long_flag(name) for name in model.model_fields} | {"--help"}
    listed = {
        part.split()[0]
        for head in entries(text)
        for part in head.split(", ")
        if part.startswith("--")
    }
    assert listed and listed <= declared, listed - declared


def help_flags(text: str) -> set[str]:
    """Every flag and positional that --help lists (its argument sections only)."""
    flags: set[str] = set()
    section = None
    for line in text.splitlines():
        if line and not line[0].isspace():
            section = line.rstrip(":") if line.endswith(":") else None
        elif section in ("positional arguments", "options") and re.match(r"^  \S", line):
            head = line.strip().partition("  ")[0]
            flags.update(part.split()[0] for part in head.split(", "))
    return flags


def model_flags(model: type[CommandSettings]) -> set[str]:
    """What --help lists for ``model``: each shown field's flags (a positional's name), and -h."""
    expected = {"-h", "--help"}
    for name, field in model.model_fields.items():
        flag = flag_of(field)
        if flag.command_line and not flag.hidden:
            expected |= (
                {flag.metavar or name} if flag.positional else {*flag.aliases, long_flag(name)}
            )
    return expected


@pytest.mark.parametrize("prog, model, main", command_mains(), ids=lambda v: str(v)[:8])
def test_help_lists_exactly_the_settings_models_flags(prog, model, main, capsys, monkeypatch):
    """Every command's flags are its settings model's fields (and -h): none written by hand."""
    assert help_flags(help_of(main, capsys, monkeypatch)) == model_flags(model)


# --- prime: each subcommand's parser made from its model (hub_client.settings) ------------------

PRIME_SUBCOMMANDS = {
    "login",
    "whoami",
    "token create",
    "token list",
    "token revoke",
    "account delete",
    "env init",
    "env push",
    "env install",
    "env uninstall",
    "env pull",
    "env list",
    "env search",
    "env info",
    "env versions",
    "env yank",
    "env delete",
    "data push",
    "data list",
    "eval push",
}


def prime_commands() -> dict[str, type[CommandSettings] | None]:
    """Every leaf of prime's parser (its words) and the settings model it was made from (None:
    a subcommand written by hand). ``prime hub`` is hub_server's own (tests/hub_client/test_hub_cli.py)."""
    import argparse

    from hub_client.cli import build_parser as prime_parser

    found: dict[str, type[CommandSettings] | None] = {}

    def walk(parser: argparse.ArgumentParser, words: tuple[str, ...]) -> None:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        for action in subs:
            for name, sub in action.choices.items():
                walk(sub, (*words, name))
        if not subs and words != ("hub",):
            command = parser.get_default("command_")
            found[" ".join(words)] = command and command.model

    walk(prime_parser(), ())
    return found


def test_every_prime_subcommand_is_made_from_a_settings_model():
    commands = prime_commands()
    assert set(commands) == PRIME_SUBCOMMANDS
    assert all(commands.values()), [words for words, model in commands.items() if model is None]


def prime_main(words: str) -> Any:
    from hub_client.cli import main

    return lambda argv: main([*words.split(), *argv])


@pytest.mark.parametrize("words", sorted(PRIME_SUBCOMMANDS))
def test_prime_help_shows_exactly_its_settings_model(words, capsys, monkeypatch):
    model = prime_commands()[words]
    assert model is not None
    text = help_of(prime_main(words), capsys, monkeypatch)
    assert text.startswith(f"usage: prime {words} ")
    assert_help_shows_each_setting(f"prime {words}", model, text)
    assert help_flags(text) == model_flags(model)


def test_every_command_module_is_checked():
    """A command module added to verifiers/cli (one with a ``main``) gets its settings model
    checked here."""
    import ast
    from pathlib import Path

    import verifiers.cli

    root = Path(verifiers.cli.__file__).parent
    commands = set()
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text())
        if any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body):
            rel = path.relative_to(root).with_suffix("")
            commands.add(rel.parts[0] if len(rel.parts) > 1 else rel.name)
    assert commands == set(COMMANDS) | (TOML_COMMANDS & commands), commands


def test_vf_eval_shows_the_built_in_defaults_an_environment_table_may_change(capsys, monkeypatch):
    from verifiers.cli.eval import main

    help_entries = entries(help_of(main, capsys, monkeypatch))
    for name, field in EvalDefaults.model_fields.items():
        body = entry_of(help_entries, [long_flag(name)])
        assert body is not None and flat(field.description or "") in body
        assert f"(default: {shown(field.default, 'none')})" in body


def test_every_vf_eval_flag_has_one_part_in_resume():
    """A new vf-eval flag must say whether --resume restores it (identity or execution) or not;
    the identity flags are exactly those a resume compares with the run's ``RunIdentity``."""
    from verifiers.cli.eval.settings import ON_RESUME, WORKERS, EvalSettings, OnResume
    from verifiers.cli.run_identity import FLAGS, RunIdentity

    assert set(ON_RESUME) == set(EvalSettings.model_fields)
    recorded_as = {"api_base_url": "base_url", "max_tokens": "sampling_args"}
    recorded_as["temperature"] = "sampling_args"
    identity = {n for n, part in ON_RESUME.items() if part is OnResume.IDENTITY}
    assert {recorded_as.get(n, n) for n in identity} == set(FLAGS)
    assert set(FLAGS) == set(RunIdentity.model_fields) - {"release"}  # release: not a flag
    assert all(ON_RESUME[name] is OnResume.EXECUTION for name in WORKERS)


def test_a_flag_wins_then_its_environment_variable_then_the_default():
    environ = {"VF_SERVE_API_KEY": "from-env", "VF_TRUSTED_WEIGHTS_DIRS": "/b:/c"}
    settings = parse_settings(ServeSettings, [], "vf-serve", environ=environ)
    assert settings.api_key == "from-env" and not settings.given("api_key")
    assert settings.trusted_weights_dir == ["/b", "/c"] and settings.port == 8000
    settings = parse_settings(
        ServeSettings,
        ["m", "--api-key", "flag", "--trusted-weights-dir", "/a", "--port", "9"],
        "vf-serve",
        environ=environ,
    )
    assert settings.api_key == "flag" and settings.given("api_key")
    assert settings.trusted_weights_dir == ["/a", "/b", "/c"]  # the variable adds to the flags
    assert (settings.model, settings.port) == ("m", 9)
    secret = parse_settings(ServeSettings, [], "vf-serve", environ={"VF_WEIGHTS_SECRET": "s"})
    assert secret.weights_secret == "s"


def test_the_weights_secret_is_never_a_flag():
    """Any local user reads /proc/PID/cmdline: the secret comes from the environment only."""
    parser = build_parser(ServeSettings, "vf-serve")
    assert "weights_secret" not in {action.dest for action in parser._actions}
    assert "$VF_WEIGHTS_SECRET" in parser.format_help()


# --- vf-rl and vf-sft: a TOML config, every key listed ---------------------------------------


def expected_keys(model: type[BaseModel], instance: Any, prefix: str = "") -> list[tuple]:
    """(dotted key, default, description) of every setting, nested tables walked."""
    rows = []
    for name, field in model.model_fields.items():
        key = prefix + name
        value = getattr(instance, name)
        args = (
            get_args(field.annotation)
            if get_origin(field.annotation) in (Union, types.UnionType)
            else (field.annotation,)
        )
        tables = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
        if len(tables) == 1 and len(args) == 1:
            rows += expected_keys(tables[0], value, key + ".")
            continue
        rows.append((key, shown(value, "null"), field.description))
        for table in tables:
            own = value if isinstance(value, table) else table.model_construct()
            for row in expected_keys(table, own, key + "."):
                if row[0] != f"{key}.name" or len(tables) == 1:
                    rows.append(row)
    return rows


@pytest.mark.parametrize("config", [RLConfig, SFTConfig], ids=["vf-rl", "vf-sft"])
def test_trainer_help_lists_every_key_with_its_type_default_and_description(
    config, capsys, monkeypatch
):
    from verifiers.cli import rl, sft

    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")  # what the command sets: restored after
    main = rl.main if config is RLConfig else sft.main
    text = help_of(main, capsys, monkeypatch)
    lines = text.splitlines()
    for key, default, description in expected_keys(config, config.model_construct()):
        assert description, f"{key} has no description"
        matches = [line for line in lines if line.split()[:1] == [f"--{key}"]]
        assert any(f"(default: {default})" in line and description in line for line in matches), (
            key,
            default,
            matches,
        )
    listed = {line.split()[0][2:] for line in lines if line.startswith("  --")}
    assert listed == {key for key, _, _ in expected_keys(config, config.model_construct())}


def test_vf_sft_help_shows_its_own_trainer_defaults(capsys, monkeypatch):
    from verifiers.cli.sft import main

    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    text = help_of(main, capsys, monkeypatch)
    line = next(line for line in text.splitlines() if line.split()[:1] == ["--trainer.lr"])
    assert "(default: 2e-05)" in line
    line = next(line for line in text.splitlines() if line.split()[:1] == ["--trainer.loss"])
    assert "(default: sft)" in line


def test_overrides_still_reach_the_config(tmp_path):
    from verifiers.cli.rl import parse_args

    toml = tmp_path / "run.toml"
    toml.write_text('steps = 3\n[trainer]\nloss = "dapo"\n')
    config, resume = parse_args(
        ["@", str(toml), "--trainer.loss.clip_high", "0.3", "--trainer.lr", "2e-5", "--resume"]
    )
    assert (config.steps, config.trainer.loss.name, config.trainer.loss.clip_high) == (
        3,
        "dapo",
        0.3,
    )
    assert config.trainer.lr == 2e-5 and resume


def test_the_default_model_is_declared_once(tmp_path, monkeypatch):
    from verifiers.local_model.models import DEFAULT_MODEL

    monkeypatch.chdir(tmp_path)  # no endpoints.toml here

    defaults = {
        ServeSettings.model_fields["model"].default,
        RLConfig.model_fields["model"].default,
        SFTConfig.model_fields["model"].default,
    }
    assert defaults == {DEFAULT_MODEL}
    from verifiers.cli.endpoints import resolve_endpoint

    assert resolve_endpoint(None, None, "OPENAI_API_KEY", None).model == DEFAULT_MODEL


@pytest.mark.parametrize("command", ["vf-eval", "vf-rl", "vf-sft"])
def test_help_shows_users_no_note_to_maintainers(command):
    """A long command module's docstring says why it is not split; --help is for users."""
    import subprocess
    import sys
    from pathlib import Path

    from verifiers.cli.settings import MAINTAINER_NOTE

    shown = subprocess.run(
        [str(Path(sys.executable).parent / command), "--help"], capture_output=True, text=True
    )
    assert shown.returncode == 0 and command in shown.stdout
    assert MAINTAINER_NOTE not in shown.stdout and "not split" not in shown.stdout


def test_the_remaining_time_is_the_runs_own_rate_over_what_is_left():
    """rich's estimate said 30 s with 2,336 rollouts left at 0.5/s."""
    from verifiers.cli.display import remaining_time

    assert remaining_time(2336, 0.5) == "1:17:52"
    assert remaining_time(10, 0.0) == "-" and remaining_time(0, 3.0) == "0:00:00"


def test_a_run_whose_output_is_no_terminal_prints_progress_lines_before_any_rollout_ends(
    server, tmp_path, capsys, monkeypatch
):
    """rich draws nothing where stderr is a log file: a slow run was silent for 29 minutes."""
    from verifiers import heartbeat
    from verifiers.cli.eval import main
    from verifiers.testing import Reply

    monkeypatch.setattr(heartbeat, "PLAIN_EVERY_S", 0.2)
    server.set_handler(lambda request: Reply(content="<answer>x</answer>", delay=1.5))
    argv = ["reverse-text", "-b", server.base_url, "-n", "2", "-r", "1", "--no-env-workers"]
    assert main([*argv, "--output-dir", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("rollouts ")]
    assert lines[0].startswith("rollouts 0/2") and "eta -" in lines[0], err
    waiting = [line for line in lines if line.startswith("rollouts 0/2")]
    assert len(waiting) >= 3, lines  # the start, then lines while the first replies stall
    assert lines[-1].startswith("rollouts 2/2 · ") and "eta 0:00:00" in lines[-1], lines


# --- one table of environment variables ------------------------------------------------------


def table_variables() -> list[str]:
    from pathlib import Path

    doc = Path(__file__).resolve().parents[2] / "docs" / "environment-variables.md"
    return re.findall(r"^\| `([A-Z][A-Z0-9_]*)` \|", doc.read_text(), re.MULTILINE)


def test_the_env_var_table_lists_exactly_the_variables_read():
    """docs/environment-variables.md lists each variable once: the commands' settings models'
    (``Flag(env=...)``) and the library's (``verifiers/cli/env_vars.py``), no other."""
    from verifiers.cli.env_vars import INTERNAL_VARIABLES, LIBRARY_VARIABLES

    declared = {
        env
        for _, model, _ in command_mains()
        for field in model.model_fields.values()
        if (env := flag_of(field).env) is not None
    }
    listed = table_variables()
    assert len(listed) == len(set(listed)), "a variable listed twice"
    assert set(listed) == declared | set(LIBRARY_VARIABLES)
    assert not (declared | set(LIBRARY_VARIABLES)) & INTERNAL_VARIABLES


def test_every_vf_variable_the_library_names_is_declared():
    """A ``VF_...`` variable named anywhere in verifiers/ is in the table or said internal; each
    library variable of the table is still named somewhere in the code."""
    from pathlib import Path

    import verifiers
    from verifiers.cli.env_vars import INTERNAL_VARIABLES, LIBRARY_VARIABLES

    root = Path(verifiers.__file__).parent
    named: set[str] = set()
    for path in root.rglob("*.py"):
        if path.name != "env_vars.py":
            named |= set(re.findall(r"[\"']([A-Z][A-Z0-9]*_[A-Z0-9_]+)[\"']", path.read_text()))
    vf_named = {n for n in named if n.startswith("VF_")}
    assert vf_named <= set(table_variables()) | INTERNAL_VARIABLES, vf_named
    assert set(LIBRARY_VARIABLES) - named <= {"RAY_ADDRESS"}  # ray.init reads it, not our code
