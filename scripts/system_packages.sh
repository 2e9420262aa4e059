#!/usr/bin/env bash
# The optional system tools, installed one at a time where this is root with apt-get; without
# one, only what needs it is skipped (the tests say so). Never fails: a package that cannot be
# installed is a note on stderr. Called by scripts/setup.sh.
set -uo pipefail
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

