#!/usr/bin/env bash
# Run the classic verifiers' own public-API tests, unchanged, against this SDK.
#   bash scripts/anchor_tests.sh PATH_TO_VERIFIERS_CHECKOUT [pytest args...]
# PATH is a checkout of PrimeIntellect-ai/verifiers at a release tag (v0.1.8.post2, v0.1.14,
# v0.3.0, ...). The tests are copied next to nothing of the checkout's package, so `import
# verifiers` is this SDK; they run with the behaviour of the checkout's release (VF_API_VERSION:
# the checkout's git tag, else its verifiers/__init__.py __version__, else set it yourself), and
# a table of passed/failed per file is printed at the end.
set -euo pipefail
anchor=${1:?usage: scripts/anchor_tests.sh PATH_TO_VERIFIERS_CHECKOUT [pytest args...]}
anchor=$(cd "$anchor" && pwd)
here=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$here/.venv/bin/python}
[ -x "$python" ] || python=python
release=${VF_API_VERSION:-}
if [ -z "$release" ]; then
  release=$(git -C "$anchor" describe --tags --exact-match --match 'v[0-9]*' 2> /dev/null | sed 's/^v//' || true)
fi
if [ -z "$release" ]; then
  release=$(sed -n 's/^__version__ *= *"\(.*\)"/\1/p' "$anchor/verifiers/__init__.py" 2> /dev/null | head -1 || true)
fi
if [ -z "$release" ]; then
  echo "cannot tell which release $anchor is; run with VF_API_VERSION=0.3.0 (say)" >&2
  exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$anchor/tests" "$work/tests"
cd "$work"
# The public-API files: parsers, rubrics, rubric groups, single/multi-turn, tool and stateful tool
# environments, environment groups, the environment, decorators, math rubric, gym environment,
# types, message and tool utils, trajectory processing (those the release has).
files=()
for f in test_parser test_xml_parser test_think_parser test_maybe_think_parser test_rubric \
  test_rubric_group test_singleturn_env test_multiturn_env test_decorator_ranks test_env_group \
  test_tool_env test_stateful_tool_env test_environment test_math_rubric test_gym_env \
  test_types test_message_utils test_tool_utils test_trajectory_processing; do
  [ -f "tests/$f.py" ] && files+=("tests/$f.py")
done
echo "classic release $release: ${#files[@]} test files"
status=0
VF_API_VERSION=$release "$python" -m pytest -q -p no:cacheprovider -o asyncio_mode=auto \
  -o asyncio_default_fixture_loop_scope=function -o addopts="" --junitxml="$work/report.xml" \
  "${files[@]}" "${@:2}" || status=$?
"$python" - "$work/report.xml" "$release" <<'EOF'
import sys
import xml.etree.ElementTree as ET

per_file: dict[str, list[int]] = {}
failures: list[str] = []
for case in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    parts = case.get("classname", "").split(".")
    name = parts[1] if len(parts) > 1 else parts[0] or "?"
    counts = per_file.setdefault(name, [0, 0])
    if case.find("failure") is not None or case.find("error") is not None:
        counts[1] += 1
        failures.append(f"{name}::{case.get('name')}")
    elif case.find("skipped") is None:
        counts[0] += 1
print(f"\n{'file':32} passed  failed   (release {sys.argv[2]})")
for name, (ok, bad) in sorted(per_file.items()):
    print(f"{name:32} {ok:6}  {bad:6}")
total_ok = sum(v[0] for v in per_file.values())
total = total_ok + sum(v[1] for v in per_file.values())
print(f"{'total':32} {total_ok:6}  {total - total_ok:6}   {100 * total_ok / max(total, 1):.1f}% pass")
for failure in failures:
    print("  failed:", failure)
EOF
exit $status
