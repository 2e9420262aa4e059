#!/usr/bin/env bash
# The post-training pipeline on CPU, end to end, on the embedded SmolLM2-135M-Instruct:
#   best-of-n rollouts (vf-eval --split train) → a dataset (vf-data) → SFT (vf-sft)
#   → RL from the SFT checkpoint (vf-rl) → held-out eval after every stage, on the same rows.
#   bash examples/pipeline/uppercase_cpu.sh            # ~20 minutes on 2 cores
#   PIPELINE_SCALE=0.2 bash examples/pipeline/uppercase_cpu.sh   # a fifth of the work (~5 min)
# Run it again after an interruption and it goes on: finished stages (listed in stages.tsv)
# are skipped and the interrupted one resumes where it stopped (vf-eval --resume, vf-sft and
# vf-rl --resume); only vf-data, which takes seconds, is redone. Everything goes under
# PIPELINE_DIR (default outputs/pipeline/scale-SCALE, git-ignored: each scale its own); nothing
# else in the checkout is written.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -d .venv/bin ] && PATH="$PWD/.venv/bin:$PATH"  # scripts/setup.sh's environment, if there
scale=${PIPELINE_SCALE:-1}
out=${PIPELINE_DIR:-outputs/pipeline/scale-$scale}
if [ -f "$out/scale" ] && [ "$(cat "$out/scale")" != "$scale" ]; then
  echo "pipeline: $out holds a run at PIPELINE_SCALE=$(cat "$out/scale"), not $scale; use another PIPELINE_DIR" >&2
  exit 2
fi
scaled() { python3 -c "import sys; print(max(int(sys.argv[2]), round(int(sys.argv[1]) * float(sys.argv[3]))))" "$1" "$2" "$scale"; }
n_generate=$(scaled 300 8)
n_heldout=$(scaled 60 8)
rl_steps=$(scaled 12 2)
mkdir -p "$out"
echo "$scale" > "$out/scale"
timings="$out/stages.tsv"
touch "$timings"
stage() {  # $1 = name, $2 = its output dir, then the command; done stages are skipped
  local name=$1 start  # $2 names what the stage writes (its command gets it too)
  shift 2
  if cut -f1 "$timings" | grep -qxF "$name"; then
    echo "== $name: done already (in $timings)"
    return
  fi
  echo "== $name"
  start=$(date +%s)
  "$@"
  printf '%s\t%s\n' "$name" "$(($(date +%s) - start))" >> "$timings"
}
evaluate() {  # $1 = output dir, then vf-eval's arguments: an interrupted run is resumed
  local dir=$1 run
  shift
  run=$(ls -d "$dir"/evals/*/* 2> /dev/null | head -n 1 || true)
  if [ -n "$run" ] && [ -f "$run/metadata.json" ]; then
    vf-eval uppercase --resume "$run" > /dev/null  # the run's own settings, restored
  else
    rm -rf "$dir"
    vf-eval uppercase "$@" --output-dir "$dir" > /dev/null
  fi
}
train() {  # $1 = output dir, then the command: a run that began is resumed
  local dir=$1
  shift
  if [ -f "$dir/config.json" ]; then "$@" --resume; else rm -rf "$dir" && "$@"; fi
}
heldout() {  # $1 = model, $2 = label: the same eval rows, 1 rollout each, same seed every time
  evaluate "$out/eval-$2" -m "$1" -n "$n_heldout" -r 1 -t 24 -T 0.7 --seed 0
}
stage "eval base" "$out/eval-base" heldout SmolLM2-135M-Instruct base
stage "generate $n_generate x 8" "$out/generate" evaluate "$out/generate" --split train \
  -n "$n_generate" -r 8 -t 24 -T 0.7 --seed 1
fresh() { rm -rf "$1" && shift && "$@"; }  # seconds of work: redone whole
stage "vf-data best-of-8" "$out/data" fresh "$out/data" vf-data "$out"/generate/evals/*/* \
  -o "$out/data" --best-of-n --min-reward 0.6
stage "vf-sft" "$out/sft" train "$out/sft" vf-sft @ examples/sft/uppercase_cpu.toml \
  --data.path "$out/data" --output_dir "$out/sft" --eval.env_id null
stage "eval sft" "$out/eval-sft" heldout "$out/sft/weights" sft
stage "vf-rl $rl_steps steps" "$out/rl" train "$out/rl" vf-rl @ examples/rl/uppercase_cpu.toml \
  --model "$out/sft/weights" --steps "$rl_steps" --checkpoint_every 4 --eval.every 0 \
  --output_dir "$out/rl"
stage "eval sft+rl" "$out/eval-rl" heldout "$out/rl/weights" rl
python3 - "$out" <<'PY'
import json, sys
from pathlib import Path

out = Path(sys.argv[1])
times = dict(line.split("\t") for line in (out / "stages.tsv").read_text().splitlines())
print(f"\n{'stage':<12} {'held-out reward':>16} {'exact':>7}")
for label in ("base", "sft", "rl"):
    (meta,) = (out / f"eval-{label}").rglob("metadata.json")
    summary = json.loads(meta.read_text())["summary"]
    name = {"base": "base", "sft": "SFT", "rl": "SFT+RL"}[label]
    print(f"{name:<12} {summary['avg_reward']:>16.3f} {summary['avg_metrics'].get('exact', 0):>7.3f}")
print("\nwall time per stage (s):")
for name, seconds in times.items():
    print(f"  {name:<20} {seconds:>6}")
PY
