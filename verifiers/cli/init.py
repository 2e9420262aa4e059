"""vf-init: scaffold a new environment package that installs and evaluates out of the box."""

from __future__ import annotations

import argparse
import sys

from verifiers.cli.scaffold import ScaffoldError, scaffold


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vf-init", description=__doc__)
    parser.add_argument("name", help="environment name, e.g. word-count")
    parser.add_argument(
        "-p", "--path", default="./environments", help="parent directory (default ./environments)"
    )
    parser.add_argument(
        "--multi-file",
        action="store_true",
        help="a package with dataset/rubric/environment modules",
    )
    args = parser.parse_args(argv)
    try:
        root = scaffold(args.name, args.path, multi_file=args.multi_file)
    except ScaffoldError as exc:
        print(f"vf-init: {exc}", file=sys.stderr)
        return 2
    print(f"created {root}\nnext: vf-install {args.name} -p {args.path} && vf-eval {args.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
