"""What vf-rl and vf-sft share as command lines: ``@ file.toml`` plus ``--dotted.key value``
overrides and ``--resume`` into their config model, ``--help`` made from it, exit codes.

The run itself (the output dir held, resume, Ctrl-C) is ``verifiers.rl.run.command``'s.
"""

from __future__ import annotations

import json
import os
import sys
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from verifiers.cli.settings import for_users, settings_help
from verifiers.errors import UsageError
from verifiers.rl.run.command import run_command

HELP_USAGE = (
    "A value is read as JSON when it parses (2e-5, true, [1, 2], null), else as a string; a key "
    "in a TOML table [a.b] is --a.b.key on the command line."
)


def parse_overrides(
    argv: list[str], doc: str | None, model: type[BaseModel], example: str
) -> tuple[dict[str, Any], bool]:
    """``@ file.toml`` (or a bare .toml path), then ``--dotted.key value`` overrides and
    ``--resume``: the raw settings (validated by the caller's config model) and the resume flag.
    ``--help`` prints ``doc`` and every key of ``model`` with its type, default and help."""
    data: dict[str, Any] = {}
    resume = False
    rest = list(argv)
    if rest and rest[0] == "@":
        rest.pop(0)
    if rest and rest[0].endswith(".toml"):
        path = Path(rest.pop(0))
        try:
            data = tomllib.loads(path.read_text())
        except FileNotFoundError:
            raise UsageError(f"no config file {path}; start from {example}") from None
        except tomllib.TOMLDecodeError as exc:
            raise UsageError(f"{path} is not valid TOML: {exc}") from None
    while rest:
        flag = rest.pop(0)
        if flag == "--resume":
            resume = True
            continue
        if flag in ("-h", "--help"):
            print(for_users(doc))
            print(HELP_USAGE)
            print(settings_help(model))
            sys.exit(0)
        if not flag.startswith("--") or not rest:
            raise UsageError(f"expected '--key value', got {flag!r}")
        value = rest.pop(0)
        try:
            parsed: Any = json.loads(value)
        except json.JSONDecodeError:
            parsed = value
        target = data
        keys = flag[2:].replace("-", "_").split(".")
        for key in keys[:-1]:
            if isinstance(target.get(key), str):  # loss = "dapo", then --trainer.loss.clip_high
                target[key] = {"name": target[key]}
            target = target.setdefault(key, {})
        target[keys[-1]] = parsed
    return data, resume


def command_main(
    prog: str,
    parse: Any,
    run: Any,
    argv: list[str] | None,
    before_run: Any = None,
    input_problem: Any = None,
) -> int:
    """A trainer command from argv to exit code: config mistakes are one line and exit 2; the
    run (``verifiers.rl.run.command.run_command``) says the rest."""
    # Two processes (trainer, inference server) share the cores: spinning OpenMP threads would
    # slow both many times over. Must be set before torch is imported.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    argv = sys.argv[1:] if argv is None else argv
    try:
        config, resume = parse(argv)
    except ValidationError as exc:
        print(f"{prog}: invalid config: {exc}", file=sys.stderr)
        return 2
    except UsageError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    if before_run is not None:
        before_run(config)
    return run_command(prog, config, resume, run, input_problem, argv)
