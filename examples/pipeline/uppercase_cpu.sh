#!/usr/bin/env bash
# The post-training pipeline on CPU, end to end, on the embedded SmolLM2-135M-Instruct:
#   best-of-n rollouts (vf-eval --split train) → a dataset (vf-data) → SFT (vf-sft)
#   → RL from the SFT checkpoint (vf-rl) → held-out eval after every stage, on the same rows.
#   bash examples/pipeline/uppercase_cpu.sh            # ~20 minutes on 2 cores
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -d .venv/bin ] && PATH="$PWD/.venv/bin:$PATH"  # scripts/setup.sh's environment, if there
out=${PIPELINE_DIR:-outputs/pipeline}
if [ -e "$out" ]; then
  echo "pipeline: $out exists; remove it or set PIPELINE_DIR" >&2
  exit 2
fi
mkdir -p "$out"
timings="$out/stages.tsv"
stage() {  # $1 = name, then the command; its wall time goes to stages.tsv
  local name=$1 start
  shift
  echo "== $name"
  start=$(date +%s)
  "$@"
  printf '%s\t%s\n' "$name" "$(($(date +%s) - start))" >> "$timings"
}
heldout() {  # $1 = model, $2 = label: 60 eval rows, 1 rollout each, same seed every time
  vf-eval uppercase -m "$1" -n 60 -r 1 -t 24 -T 0.7 --seed 0 --output-dir "$out/eval-$2" > /dev/null
}
stage "eval base" heldout SmolLM2-135M-Instruct base
stage "generate 300 x 8" vf-eval uppercase --split train -n 300 -r 8 -t 24 -T 0.7 --seed 1 \
  --output-dir "$out/generate" > /dev/null
stage "vf-data best-of-8" vf-data "$out"/generate/evals/*/* -o "$out/data" --best-of-n --min-reward 0.6
stage "vf-sft" vf-sft @ examples/sft/uppercase_cpu.toml --data.path "$out/data" \
  --output_dir "$out/sft" --eval.env_id null
stage "eval sft" heldout "$out/sft/weights" sft
stage "vf-rl 12 steps" vf-rl @ examples/rl/uppercase_cpu.toml --model "$out/sft/weights" \
  --steps 12 --checkpoint_every 0 --eval.every 0 --output_dir "$out/rl"
stage "eval sft+rl" heldout "$out/rl/weights" rl
python - "$out" <<'PY'
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
