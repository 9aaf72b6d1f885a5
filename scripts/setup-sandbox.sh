#!/usr/bin/env bash
# Everything the sandbox (end-to-end tests, demo, benchmarks) needs on a fresh Debian machine:
# etcd and Prometheus from Debian's packages, and the Kubernetes control plane built from its
# Go module into ~/.cache/loadsched (once). Safe to run again: it skips what is there.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v etcd >/dev/null || missing+=(etcd-server)
command -v prometheus >/dev/null || missing+=(prometheus)
# the dispatch poller's end-to-end test runs its own PostgreSQL server
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
# the status page's end-to-end test drives a headless browser
command -v chromium >/dev/null || missing+=(chromium)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing Debian packages: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # The packages' own services are not used: the sandbox starts its own processes.
fi
command -v go >/dev/null || { echo "Go is required to build the Kubernetes control plane (go not on PATH)" >&2; exit 1; }
"${PYTHON:-.venv/bin/python}" -m sandbox.build >/dev/null
