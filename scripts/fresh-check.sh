#!/usr/bin/env bash
# Proves that the README's commands work on a fresh Debian machine, not only on this one (which
# has everything installed already, so a missing install step would go unnoticed here).
#
#   scripts/fresh-check.sh        (make fresh-check; as root: podman runs rootful here)
#
# In a container of the project's Debian base (scripts/build-image.sh --base-only: bookworm
# minbase with python3), on the host's network, with a fresh clone of the committed HEAD mounted
# at /src, it installs the README's prerequisites (make, with apt-get; Go is this machine's,
# mounted read-only) and runs `make unit`, then `make e2e` on one small test
# (LOADSCHED_FRESH_SMOKE, default tests/e2e/test_version_smoke.py), which sets up the sandbox
# first: its Debian packages and the Kubernetes and helm builds. Nothing else comes from this
# machine but its pip settings and CA bundle (scripts/pip_settings.py, as for the image build)
# and, to save the download, its Go module cache, read-only, as the first of the container's
# module proxies. Each stage's duration is printed at the end; the container and the clone are
# removed however it ends. Exits non-zero when a stage fails.
set -euo pipefail
cd "$(dirname "$0")/.."

SMOKE="${LOADSCHED_FRESH_SMOKE:-tests/e2e/test_version_smoke.py}"
fail() { echo "fresh-check: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "run as root (podman runs rootful here): sudo $0"
command -v go >/dev/null || fail "Go is a prerequisite (the container uses this machine's): go not on PATH"

work="$(mktemp -d "${TMPDIR:-/tmp}/loadsched-fresh.XXXXXX")"
container="loadsched-fresh-$$"
durations=()
finish() {
  local rc=$?
  if command -v podman >/dev/null; then
    podman rm --force --time 0 "$container" >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
  if [ ${#durations[@]} -gt 0 ]; then
    echo "fresh-check: stage durations"
    printf '  %s\n' "${durations[@]}"
  fi
  if [ $rc -eq 0 ]; then echo "fresh-check: passed"; else echo "fresh-check: FAILED (exit $rc)" >&2; fi
}
trap finish EXIT
trap 'exit 130' INT TERM

# stage NAME COMMAND...: run COMMAND and record how long it took; when its output shows a pytest
# session, the time until the session started (installs, builds) and the session's own.
stage() {
  local name="$1" started=$SECONDS rc=0 tests=""
  shift
  echo "== fresh-check: $name"
  rm -f "$work/session"
  # in the background, so that a signal is handled at once (removing the container ends it)
  (
    "$@" 2>&1 | while IFS= read -r line; do
      [[ "$line" != *"test session starts"* || -e "$work/session" ]] || echo "$SECONDS" >"$work/session"
      printf '%s\n' "$line"
    done
  ) &
  wait $! || rc=$?
  local took=$((SECONDS - started))
  if [ -e "$work/session" ]; then
    local session
    session="$(cat "$work/session")"
    tests=" (set-up $((session - started))s, tests $((SECONDS - session))s)"
  fi
  durations+=("$(printf '%-24s %5ds%s' "$name" "$took" "$tests")$([ $rc -eq 0 ] || echo "  FAILED (exit $rc)")")
  return $rc
}
in_container() { podman exec "$container" "$@"; }

# -- the base, a clone, the container -------------------------------------------------------------
base_image() { scripts/build-image.sh --base-only >"$work/base"; }
stage "base image" base_image
base="$(cat "$work/base")"
# build-image.sh wrote podman's configuration for this project (runc, no default ulimits)
export CONTAINERS_CONF="${CONTAINERS_CONF:-${LOADSCHED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}}/loadsched/podman/containers.conf}"

# what earlier runs, killed before they could clean up, left behind
while read -r name left; do
  kill -0 "${name##*-}" 2>/dev/null && continue
  podman rm --force --time 0 "$name" >/dev/null 2>&1 || true
  [[ "$left" != "${TMPDIR:-/tmp}"/loadsched-fresh.* ]] || rm -rf "$left"
done < <(podman ps --all --filter label=loadsched.fresh-check \
  --format '{{.Names}} {{index .Labels "loadsched.fresh-check"}}')

git clone --quiet --no-hardlinks . "$work/src"
git -C "$work/src" checkout --quiet --detach "$(git rev-parse HEAD)"
echo "fresh-check: a clone of $(git rev-parse --short HEAD) in $base"

run=(--detach --name "$container" --label "loadsched.fresh-check=$work" --network host
  --volume "$work/src:/src" --workdir /src
  --volume "$(go env GOROOT):/usr/local/go:ro"
  --env PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  --env DEBIAN_FRONTEND=noninteractive)
modules="$(go env GOMODCACHE)/cache/download"
if [ -d "$modules" ]; then
  run+=(--volume "$modules:/run/host-go-modules:ro"
    --env "GOPROXY=file:///run/host-go-modules,$(go env GOPROXY)")
fi
pip_cert=""
python=""
for candidate in .venv/bin/python python3; do
  if "$candidate" -m pip --version >/dev/null 2>&1; then python="$candidate"; break; fi
done
if [ -n "$python" ]; then
  while IFS= read -r -d '' setting; do
    case "$setting" in
      cert=*) pip_cert="${setting#cert=}" ;;
      *) run+=(--env "$setting") ;;
    esac
  done < <("$python" scripts/pip_settings.py)
fi
# The CA bundle pip trusts here (its `cert`, else the system's), beside the container's own
# (which apt's triggers may rewrite): pip and Go read it through these variables.
ca="${pip_cert:-/etc/ssl/certs/ca-certificates.crt}"
if [ -f "$ca" ]; then
  run+=(--volume "$ca:/run/host-ca-certificates.crt:ro"
    --env PIP_CERT=/run/host-ca-certificates.crt --env SSL_CERT_FILE=/run/host-ca-certificates.crt)
fi
podman run "${run[@]}" "$base" sleep infinity >/dev/null

# -- the README's commands ------------------------------------------------------------------------
stage "prerequisites (make)" in_container bash -c \
  'apt-get update -qq && apt-get install -y -qq --no-install-recommends make >/dev/null'
stage "make unit" in_container make unit
stage "make e2e (smoke)" in_container make e2e "E2E=$SMOKE"
