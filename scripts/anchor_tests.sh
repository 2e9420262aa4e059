#!/usr/bin/env bash
# Run the classic verifiers' own public-API tests, unchanged, against this SDK.
#   bash scripts/anchor_tests.sh PATH_TO_VERIFIERS_CHECKOUT   (e.g. a clone at tag v0.1.8.post2)
# The tests are copied next to nothing of the checkout's package, so `import verifiers` is this SDK.
set -euo pipefail
anchor=${1:?usage: scripts/anchor_tests.sh PATH_TO_VERIFIERS_CHECKOUT}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$anchor/tests" "$work/tests"
cd "$work"
files=(test_parser test_xml_parser test_think_parser test_maybe_think_parser test_rubric
  test_rubric_group test_singleturn_env test_multiturn_env test_decorator_ranks test_env_group
  test_tool_env test_stateful_tool_env test_environment)
python -m pytest -q -p no:cacheprovider -o asyncio_mode=auto \
  -o asyncio_default_fixture_loop_scope=function $(printf "tests/%s.py " "${files[@]}") -o addopts="" "${@:2}"
