#!/usr/bin/env bash
# Run upstream's own verifiers.v1 unit tests, unchanged, against this SDK.
#   bash scripts/v1_anchor_tests.sh PATH_TO_VERIFIERS_CHECKOUT [pytest args...]
# PATH is a checkout of PrimeIntellect-ai/verifiers at v0.3.0 (the frozen v1 target). Its
# tests/v1 (with their conftest and fixtures), configs/*.toml (which test_configs parses) and
# the color_codeword_v1 example taskset (put on PYTHONPATH, not installed) are copied to a
# temporary directory next to nothing of the checkout's package, so `import verifiers.v1` is
# this SDK. Tests marked e2e (a live model endpoint, PRIME_API_KEY) skip there as upstream's do;
# then test_e2e's rows that need no container or remote sandbox (the null and bash harnesses,
# the scripted user, Python and MCP toolsets, all in the subprocess runtime) run against a
# local endpoint instead (scripts/v1_e2e_endpoint.py: the scripted server, loaded with -p).
# A table of passed/failed/skipped per file is printed at the end.
set -euo pipefail
anchor=${1:?usage: scripts/v1_anchor_tests.sh PATH_TO_VERIFIERS_CHECKOUT [pytest args...]}
anchor=$(cd "$anchor" && pwd)
here=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$here/.venv/bin/python}
[ -x "$python" ] || python=python
[ -d "$anchor/tests/v1" ] || { echo "$anchor has no tests/v1 (check out v0.3.0)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/tests" "$work/configs" "$work/environments"
cp -r "$anchor/tests/v1" "$work/tests/v1"
cp "$anchor"/configs/*.toml "$work/configs/" 2> /dev/null || true
cp -r "$anchor/environments/color_codeword_v1" "$work/environments/" 2> /dev/null || true
cd "$work"
files=()
for f in test_taskset test_trace test_configs test_scoring test_graph test_legacy \
  test_color_codeword_tasks test_envs test_judges; do
  [ -f "tests/v1/$f.py" ] && files+=("tests/v1/$f.py")
done
echo "upstream v1 tests: ${#files[@]} files"
status=0
PYTHONPATH="$work/environments/color_codeword_v1:$work/tests/v1/fixtures${PYTHONPATH:+:$PYTHONPATH}" \
  "$python" -m pytest -q -n 0 -p no:cacheprovider -o addopts="" -o asyncio_mode=auto \
  -o asyncio_default_fixture_loop_scope=function -o "markers=e2e: needs a live model" \
  --continue-on-collection-errors \
  --junitxml="$work/report.xml" "${files[@]}" "${@:2}" || status=$?
# test ids: the null and bash harnesses in subprocess; the scripted user (test_user, and
# test_interaction: the caller as the user); Python tools colocated and the MCP-served
# image tool (test_tool, test_tool_state, test_tool_response_image); the user-sim env
e2e_rows="null-harness-in-subprocess or bash-harness-in-subprocess"
e2e_rows+=" or (test_user and harness-in-subprocess) or test_interaction"
e2e_rows+=" or harness-in-subprocess-with-tool-colocated or test_tool_response_image"
# the built-in user-sim env over echo-v1 (its _with_tools twin needs a model that relays a tool's
# stamp between the user and the assistant, which the scripted endpoint does not play)
e2e_rows+=" or (test_env_id_user_sim and not with_tools)"
# test_legacy (all e2e): a classic env through run_legacy_eval, its trace shaped as a v1 run's
e2e_rows+=" or test_v0_"
echo "upstream v1 e2e rows ($e2e_rows) against a local endpoint"
PYTHONPATH="$work/tests/v1/fixtures:$here/scripts${PYTHONPATH:+:$PYTHONPATH}" \
  "$python" -m pytest -q -n 0 -p no:cacheprovider -p v1_e2e_endpoint -o addopts="" \
  -o asyncio_mode=auto -o asyncio_default_fixture_loop_scope=function -W ignore::UserWarning \
  -W "ignore::pytest.PytestUnknownMarkWarning" -k "$e2e_rows" \
  --junitxml="$work/e2e.xml" tests/v1/test_e2e.py tests/v1/test_legacy.py "${@:2}" || status=$?
"$python" - "$work/report.xml" "${files[@]}" tests/v1/test_e2e.py <<'PY'
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

counts = {Path(f).stem: [0, 0, 0] for f in sys.argv[2:]}
failures: list[str] = []
cases = {(c.get("classname"), c.get("name")): c for c in ET.parse(sys.argv[1]).getroot().iter("testcase")}
e2e = Path(sys.argv[1]).with_name("e2e.xml")
if e2e.is_file():  # the e2e rows' run (its deselected tests are not cases): it replaces
    # the first run's skip of the same test (test_legacy runs in both)
    cases.update({(c.get("classname"), c.get("name")): c for c in ET.parse(e2e).getroot().iter("testcase")})
for case in cases.values():
    # a file that failed to import is one case named by its module path, with no class
    name = (case.get("classname") or case.get("name", "?")).split(".")[-1]
    row = counts.setdefault(name, [0, 0, 0])
    if case.find("failure") is not None or case.find("error") is not None:
        row[1] += 1
        failures.append(f"{name}::{case.get('name')}")
    elif case.find("skipped") is not None:
        row[2] += 1
    else:
        row[0] += 1
print(f"\n{'file':32} passed  failed  skipped   (verifiers.v1, upstream v0.3.0 tests)")
for name, (ok, bad, skip) in counts.items():
    print(f"{name:32} {ok:6}  {bad:6}  {skip:7}")
ok = sum(r[0] for r in counts.values())
bad = sum(r[1] for r in counts.values())
print(f"{'total':32} {ok:6}  {bad:6}  {sum(r[2] for r in counts.values()):7}")
for failure in failures:
    print("  failed:", failure)
PY
exit $status
