#!/usr/bin/env bash
# Publish every environment in environments/ to a local hub and attach an eval of the embedded
# model to each published version, then print a table (environment, examples, mean reward of the
# embedded model, seconds per rollout).
#
#   bash scripts/publish_library.sh                 # 4 examples x 1 rollout each
#   EXAMPLES=2 ENVS="wiki_research reverse_text" bash scripts/publish_library.sh
#
# What it does, all on loopback:
#   1. `prime hub serve` on a fresh data directory, a user `library` and its token (create-user);
#      PRIME_HUB_URL / PRIME_API_KEY carry them, so no prime config file is written.
#   2. `prime env push --path environments/<env>` for each environment (uv build, then upload).
#   3. One `vf-serve` of the embedded SmolLM2-135M-Instruct, shared by every eval (one model load).
#   4. A fresh virtualenv with this SDK only; `prime env install library/<name>@<version>` into it
#      (the hub's hash-pinned wheel), then `vf-eval library/<name>@<version>` there, so the run's
#      environment version and content hash are the published version's.
#   5. `prime eval push RUN` attaches the run to that version (the hub checks the hash).
# Seconds per rollout is the run's wall time divided by its rollouts (rollouts run concurrently, so
# it is throughput on this machine, model server included). Rows with errors say how many.
# Everything lives under WORK_DIR (default: a new temporary directory, kept for inspection when
# the script finishes, removed when it is stopped or fails).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)

PY=${PYTHON:-.venv/bin/python}
BIN=$(cd "$(dirname "$PY")" && pwd)
EXAMPLES=${EXAMPLES:-4}
ROLLOUTS=${ROLLOUTS:-1}
MADE_WORK=""
if [ -z "${WORK_DIR:-}" ]; then
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/publish-library.XXXXXX")
  MADE_WORK=$WORK
else
  WORK=$WORK_DIR
fi
TABLE_OUT=${TABLE_OUT:-$WORK/library_table.md}
ENVS=${ENVS:-$(cd environments && ls -d */ | tr -d / | tr '\n' ' ')}
export OMP_WAIT_POLICY=PASSIVE   # the model server and the evals share the cores
mkdir -p "$WORK/logs" "$WORK/outputs"
echo "publish_library: work dir $WORK"

free_port() { "$PY" -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"; }
wait_for() {  # URL, what, log
  for _ in $(seq 1 240); do
    if curl -sf -o /dev/null "$1"; then return 0; fi
    sleep 1
  done
  echo "publish_library: $2 did not come up at $1; its log: $3" >&2
  tail -20 "$3" >&2
  exit 1
}
PIDS=()
# On any exit (SIGTERM and Ctrl-C included): stop the servers it started and whatever step was
# running in the foreground (a push, an install, an eval), so nothing outlives the script.
# The temporary work dir it made is removed too, unless the script finished.
cleanup() {
  local status=$?
  for pid in "${PIDS[@]}"; do kill "$pid" 2> /dev/null || true; done
  pkill -TERM -P $$ 2> /dev/null || true
  wait 2> /dev/null || true
  if [ -n "$MADE_WORK" ] && [ "$status" != 0 ]; then rm -rf "$MADE_WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# 1. the hub, a user and its token
HUB_PORT=$(free_port)
export PRIME_HUB_URL="http://127.0.0.1:$HUB_PORT"
"$BIN/prime" hub serve --data-dir "$WORK/hub" --port "$HUB_PORT" --no-sdk > "$WORK/logs/hub.log" 2>&1 &
PIDS+=($!)
wait_for "$PRIME_HUB_URL/health" "the hub" "$WORK/logs/hub.log"
PRIME_API_KEY=$("$BIN/prime" hub create-user library --data-dir "$WORK/hub" | tail -1)
export PRIME_API_KEY
export PRIME_CONFIG_DIR="$WORK/prime-config"
echo "publish_library: hub at $PRIME_HUB_URL, user $("$BIN/prime" whoami | tail -1)"

# 2. publish
declare -A SPEC
for env in $ENVS; do
  read -r name version < <("$PY" -c "
import sys, tomllib
p = tomllib.load(open('environments/$env/pyproject.toml', 'rb'))['project']
print(p['name'], p['version'])")
  "$BIN/prime" env push --path "environments/$env" > "$WORK/logs/push-$env.log" 2>&1 \
    || { echo "publish_library: push of $env failed:" >&2; tail -20 "$WORK/logs/push-$env.log" >&2; exit 1; }
  SPEC[$env]="library/$name@$version"
  echo "publish_library: pushed ${SPEC[$env]}"
done

# 3. the embedded model, served once
MODEL_PORT=$(free_port)
"$BIN/vf-serve" --port "$MODEL_PORT" > "$WORK/logs/vf-serve.log" 2>&1 &
PIDS+=($!)
wait_for "http://127.0.0.1:$MODEL_PORT/health" "vf-serve" "$WORK/logs/vf-serve.log"
MODEL=$(curl -sf "http://127.0.0.1:$MODEL_PORT/v1/models" | "$PY" -c "import json, sys; print(json.load(sys.stdin)['data'][0]['id'])")
echo "publish_library: serving $MODEL on port $MODEL_PORT"

# 4. a fresh virtualenv with this SDK; each published version installed from the hub and evaluated
UV=$("$PY" -c "from uv import find_uv_bin; print(find_uv_bin())")
VENV="$WORK/venv"
"$UV" venv -q --python "$PY" "$VENV"
# with the integrations' extras: reasoning-gym needs cellpylib, which PyPI has as an sdist only, and
# `prime env install` builds nothing (dependencies from wheels only), so trusted builds happen here
"$UV" pip install -q --python "$VENV/bin/python" -e "$REPO[reasoning-gym,textarena]" > "$WORK/logs/venv.log" 2>&1 \
  || { echo "publish_library: installing the SDK into $VENV failed:" >&2; tail -20 "$WORK/logs/venv.log" >&2; exit 1; }
RUNS=()
FAILED=()
for env in $ENVS; do
  spec=${SPEC[$env]}
  (cd "$WORK" && "$BIN/prime" env install "$spec" --python "$VENV/bin/python") > "$WORK/logs/install-$env.log" 2>&1 \
    || { echo "publish_library: install of $spec failed (skipped):" >&2; tail -5 "$WORK/logs/install-$env.log" >&2; FAILED+=("$spec (install)"); continue; }
  before=$(ls -d "$WORK"/outputs/evals/*/*/ 2> /dev/null | sort || true)
  (cd "$WORK" && "$VENV/bin/vf-eval" "$spec" -b "http://127.0.0.1:$MODEL_PORT/v1" -m "$MODEL" \
    -n "$EXAMPLES" -r "$ROLLOUTS" --output-dir "$WORK/outputs") > "$WORK/logs/eval-$env.log" 2>&1 \
    || echo "publish_library: vf-eval of $spec exited $? (see $WORK/logs/eval-$env.log)" >&2
  run=$(comm -13 <(echo "$before") <(ls -d "$WORK"/outputs/evals/*/*/ | sort) | tail -1)
  if [ -z "$run" ] || [ ! -f "$run/metadata.json" ]; then
    echo "publish_library: no run of $spec was saved" >&2
    FAILED+=("$spec (vf-eval)")
    continue
  fi
  # 5. attach the run to the version it ran
  "$BIN/prime" eval push "$run" >> "$WORK/logs/eval-$env.log" 2>&1 \
    || { echo "publish_library: attaching $run failed:" >&2; tail -5 "$WORK/logs/eval-$env.log" >&2; exit 1; }
  echo "publish_library: attached run $(basename "$run") to $spec"
  RUNS+=("$run")
done

# the table, from the runs' metadata (what was attached)
"$PY" - "$MODEL" "$TABLE_OUT" "${RUNS[@]}" << 'EOF'
import json, sys
from pathlib import Path

model, out, runs = sys.argv[1], Path(sys.argv[2]), sys.argv[3:]
lines = [
    f"Embedded model: {model} (vf-serve, CPU); each run attached to its hub version.",
    "",
    "| environment | version | examples | rollouts | mean reward | s / rollout | errors |",
    "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
]
for run in runs:
    meta = json.loads((Path(run) / "metadata.json").read_text())
    s = meta["summary"]
    reward = "n/a" if s.get("avg_reward") is None else f"{s['avg_reward']:.3f}"
    per = meta["duration_s"] / max(s["num_rollouts"], 1)
    lines.append(
        f"| {meta['env_id']} | {meta['env_version']} | {s['num_examples']} | {s['num_rollouts']} "
        f"| {reward} | {per:.1f} | {s['num_errors']} |"
    )
text = "\n".join(lines) + "\n"
out.write_text(text)
print(text, end="")
EOF
echo "publish_library: table written to $TABLE_OUT"
if [ ${#FAILED[@]} -gt 0 ]; then
  echo "publish_library: not evaluated: ${FAILED[*]}" >&2
  exit 1
fi
