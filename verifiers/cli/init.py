"""vf-init: scaffold a new environment package that installs and evaluates out of the box."""

from __future__ import annotations

import sys
from typing import Annotated

from pydantic import Field

from verifiers.cli.scaffold import scaffold
from verifiers.cli.settings import CommandSettings, Flag, parse_settings
from verifiers.cli.usage import command


class InitSettings(CommandSettings):
    """Every vf-init flag: its default and help, declared once."""

    name: Annotated[str, Flag(positional=True)] = Field(
        description="environment name, e.g. word-count"
    )
    path: Annotated[str, Flag("-p")] = Field("./environments", description="parent directory")
    multi_file: bool = Field(False, description="a package with dataset/rubric/environment modules")
    v1: bool = Field(
        False, description="a verifiers.v1 taskset package (Taskset, Task, Toolset) instead"
    )


@command("vf-init")
def main(argv: list[str] | None = None) -> int:
    args = parse_settings(InitSettings, argv, "vf-init", __doc__)
    # ScaffoldError: exit 2
    root = scaffold(args.name, args.path, multi_file=args.multi_file, v1=args.v1)
    print(f"created {root}\nnext: vf-install {args.name} -p {args.path} && vf-eval {args.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
