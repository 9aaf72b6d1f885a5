#!/usr/bin/env bash
# Everything the sandbox (end-to-end tests, demo, benchmarks) needs on a fresh Debian machine:
# its Debian packages (scripts/install-packages.sh sandbox), and the Kubernetes control plane,
# etcd, kwok and helm built from their Go modules into ~/.cache/loadsched (once). Safe to run again: it
# skips what is there.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-packages.sh sandbox
command -v go >/dev/null || { echo "Go is required to build the Kubernetes control plane (go not on PATH)" >&2; exit 1; }
"${PYTHON:-.venv/bin/python}" -m sandbox.build >/dev/null
