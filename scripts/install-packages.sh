#!/usr/bin/env bash
# The Debian packages a tier of the tests runs, installed with apt-get when missing (as root, or
# with sudo). Their own services are not used: the tests start their own processes.
#
#   scripts/install-packages.sh unit      prometheus (promtool: tests/test_dashboard.py)
#   scripts/install-packages.sh sandbox   prometheus, postgresql, chromium: the end-to-end
#                                         tests, the demo and the benchmarks (etcd, kwok and
#                                         Kubernetes are built from their Go modules instead)
#   scripts/install-packages.sh docs      npm: the docs site's offline search script
#                                         (scripts/docs-offline.sh)
#
# Safe to run again: it installs only what is missing, and says nothing then.
set -euo pipefail

missing=()
want() {  # want PACKAGE CHECK...: PACKAGE unless the command CHECK... succeeds
  local package="$1"
  shift
  "$@" >/dev/null 2>&1 || missing+=("$package")
}

case "${1:-}" in
  unit)
    want prometheus command -v promtool
    ;;
  sandbox)
    want prometheus command -v prometheus
    # the dispatch poller's end-to-end test runs its own PostgreSQL server
    want postgresql compgen -G "/usr/lib/postgresql/*/bin/initdb"
    # the status page's end-to-end test drives a headless browser
    want chromium command -v chromium
    ;;
  docs)
    want npm command -v npm
    ;;
  *)
    echo "usage: $0 unit|sandbox|docs" >&2
    exit 2
    ;;
esac

[ ${#missing[@]} -gt 0 ] || exit 0
command -v apt-get >/dev/null || { echo "$0: missing ${missing[*]}, and no apt-get to install them with" >&2; exit 1; }
echo "installing Debian packages: ${missing[*]}"
SUDO=()
[ "$(id -u)" -eq 0 ] || SUDO=(sudo)
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
