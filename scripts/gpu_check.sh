#!/usr/bin/env bash
# GPU checks, for a machine with CUDA (under 10 minutes on one GPU): the CUDA tests, then a short
# vf-rl run with the trainer and vf-serve on the GPU, then FSDP2 under torchrun (NCCL) on all GPUs.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pytest -q tests/test_rl.py tests/test_serve.py -k "gpu or cuda or engine or fsdp"
work=$(mktemp -d)
python -c "from pathlib import Path; from verifiers.rl.toy import make_tiny_policy; make_tiny_policy(Path('$work/policy'), hidden=256, layers=4)"
cat > "$work/rl.toml" <<TOML
model = "$work/policy"
env_id = "reverse-text"
output_dir = "$work/out"
steps = 4
[orchestrator]
examples_per_step = 8
rollouts_per_example = 4
max_tokens = 32
[inference]
device = "cuda"
dtype = "bfloat16"
TOML
vf-rl @ "$work/rl.toml"
gpus=$(python -c "import torch; print(torch.cuda.device_count())")
if [ "$gpus" -gt 1 ]; then
  sed -i "s|$work/out|$work/out-fsdp|" "$work/rl.toml"
  torchrun --standalone --nproc_per_node "$gpus" -m verifiers.rl.cli @ "$work/rl.toml"
fi
echo "GPU checks passed"
