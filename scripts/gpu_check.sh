#!/usr/bin/env bash
# GPU checks, for a machine with CUDA (under 10 minutes on one GPU):
#   1. the CUDA tests (trainer step on GPU == CPU, engine on GPU) and, with vLLM installed, vLLM
#      serving the trainer's weights after a filesystem and a gloo update;
#   2. a short vf-rl run on one GPU: trainer + vf-serve, weights over gloo;
#   3. with vLLM installed: the same run with vLLM as the inference server;
#   4. with two or more GPUs: vLLM on its own GPU with NCCL weight updates, and FSDP2 under
#      torchrun (NCCL) over all GPUs with a sharded checkpoint and --resume.
# The toy policy has 512 positions: vLLM refuses a longer max_model_len (vf-rl says so first).
# Install vLLM with its pinned extra (pip install -e ".[vllm]"): its torch is the trainer's.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pytest -q -rs tests/rl/test_rl_trainer.py tests/rl/test_rl_loop.py tests/serve/test_serve.py tests/weights/test_vllm_glue.py \
  -k "gpu or cuda or engine or fsdp or vllm"
work=$(mktemp -d)
PYTHONPATH="tests${PYTHONPATH:+:$PYTHONPATH}" python -c "from pathlib import Path; from support.toy import make_tiny_policy; make_tiny_policy(Path('$work/policy'), hidden=256, layers=4)"
config() {  # $1 = output dir, then extra [inference] lines
  local out=$1; shift
  printf 'model = "%s"\nenv_id = "reverse-text"\noutput_dir = "%s"\nsteps = 4\ncheckpoint_every = 2\n' "$work/policy" "$out"
  printf '[orchestrator]\nexamples_per_step = 8\nrollouts_per_example = 4\nmax_tokens = 32\n'
  printf '[inference]\n'
  printf '%s\n' "$@"
}
check_run() {  # every step trained and was served
  python - "$1" <<'PY'
import json, sys
steps = [json.loads(line) for line in open(f"{sys.argv[1]}/metrics.jsonl")]
assert [s["served_version"] for s in steps] == list(range(1, len(steps) + 1)), steps
print(f"{sys.argv[1]}: {len(steps)} steps, rewards {[round(s['reward'], 3) for s in steps]}")
PY
}
config "$work/out-gloo" 'device = "cuda"' 'dtype = "bfloat16"' 'weight_transport = "gloo"' > "$work/gloo.toml"
vf-rl @ "$work/gloo.toml" && check_run "$work/out-gloo"
has_vllm=$(python -c "import importlib.util; print(int(importlib.util.find_spec('vllm') is not None))")
gpus=$(python -c "import torch; print(torch.cuda.device_count())")
if [ "$has_vllm" = 1 ]; then
  config "$work/out-vllm" 'backend = "vllm"' 'device = "cuda"' 'dtype = "bfloat16"' \
    'gpu_memory_utilization = 0.3' 'max_model_len = 512' 'extra_args = ["--enforce-eager"]' > "$work/vllm.toml"
  vf-rl @ "$work/vllm.toml" && check_run "$work/out-vllm"
  if [ "$gpus" -gt 1 ]; then
    config "$work/out-nccl" 'backend = "vllm"' 'device = "cuda:1"' 'dtype = "bfloat16"' \
      'weight_transport = "nccl"' 'max_model_len = 512' 'extra_args = ["--enforce-eager"]' > "$work/nccl.toml"
    vf-rl @ "$work/nccl.toml" && check_run "$work/out-nccl"
  fi
fi
if [ "$gpus" -gt 1 ]; then
  config "$work/out-fsdp" 'device = "cuda"' 'dtype = "bfloat16"' > "$work/fsdp.toml"
  torchrun --standalone --nproc_per_node "$gpus" -m verifiers.cli.rl @ "$work/fsdp.toml" --steps 2
  torchrun --standalone --nproc_per_node "$gpus" -m verifiers.cli.rl @ "$work/fsdp.toml" --resume
  check_run "$work/out-fsdp"
fi
echo "GPU checks passed"
