#!/usr/bin/env bash
# Train the embedded SmolLM2-135M-Instruct on reverse-text on CPU, and compare its reward on
# held-out examples before and after (the same examples, rollouts and seed both times).
#   bash examples/rl/train_reverse_text_cpu.sh [vf-rl overrides, e.g. --steps 16]
set -euo pipefail
cd "$(dirname "$0")/../.."
out=outputs/rl/reverse-text-smollm2
examples=${EVAL_EXAMPLES:-40}
evaluate() {  # $1 = model, $2 = output dir
  vf-eval reverse-text -m "$1" -n "$examples" -r 2 -t 48 -T 1.0 --seed 0 --output-dir "$2" >/dev/null
}
rm -rf "$out"
echo "held-out reward of the base model ($examples examples x 2 rollouts)..."
evaluate SmolLM2-135M-Instruct "$out/eval-before"
vf-rl @ examples/rl/reverse_text_cpu.toml "$@"
echo "held-out reward of the trained model..."
evaluate "$out/weights" "$out/eval-after"
python - "$out" <<'PY'
import json, sys
from pathlib import Path

def reward(directory: str) -> float:
    (metadata,) = Path(directory).rglob("metadata.json")
    return json.loads(metadata.read_text())["summary"]["avg_reward"]

out = sys.argv[1]
before, after = reward(f"{out}/eval-before"), reward(f"{out}/eval-after")
print(f"reverse-text held-out reward: before {before:.4f}, after {after:.4f} ({after - before:+.4f})")
PY
