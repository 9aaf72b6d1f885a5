#!/usr/bin/env bash
# Build loadsched's image from the Dockerfile with podman, on a Debian machine that reaches
# package registries but no image registry (as root: podman runs rootful here).
#
#   scripts/build-image.sh [--tag REF] [--iidfile FILE] [--rebuild-base] [--base-only]
#
# --base-only builds (or finds) the base alone and prints its tag on stdout, the only line there
# (scripts/fresh-check.sh runs the tests in a container of it).
#
# The Dockerfile's base (ARG PYTHON) is then a local image of Debian bookworm with its python3,
# built once per machine from Debian's packages (mmdebstrap) and kept as
# localhost/loadsched-base:<hash of its recipe>. LOADSCHED_BASE=<image> builds on that image
# instead (python:3.11-slim-bookworm where a registry is reachable, or an internal base), and
# LOADSCHED_DEBIAN_MIRROR=<URI or sources file> takes the local base's packages from a mirror.
#
# Installs podman, runc and mmdebstrap (Debian packages) when missing. podman runs with this
# project's configuration, <cache>/podman/containers.conf (runc; no default ulimits), unless
# CONTAINERS_CONF is set; the machine's own configuration is not touched. The build reaches the
# package index with this machine's pip settings (index, extra index, trusted hosts, timeout)
# and CA bundle (mounted read-only, for the build only). Safe to run again: it reuses the base
# and podman's layer cache. Prints one line on success; the failing step's log otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

TAG=localhost/loadsched:dev
IIDFILE=""
REBUILD_BASE=0
BASE_ONLY=0
while [ $# -gt 0 ]; do
  case "$1" in
    --tag) TAG="$2"; shift 2 ;;
    --iidfile) IIDFILE="$2"; shift 2 ;;
    --rebuild-base) REBUILD_BASE=1; shift ;;
    --base-only) BASE_ONLY=1; shift ;;
    *) echo "usage: $0 [--tag REF] [--iidfile FILE] [--rebuild-base] [--base-only]" >&2; exit 2 ;;
  esac
done
# with --base-only, stdout carries the base's tag alone: everything else goes to stderr
[ "$BASE_ONLY" -eq 0 ] || exec 3>&1 1>&2

fail() { echo "build-image: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "run as root (podman builds rootful here): sudo $0"

# -- tools ------------------------------------------------------------------------------------
missing=()
command -v podman >/dev/null || missing+=(podman)
command -v runc >/dev/null || missing+=(runc)
[ -n "${LOADSCHED_BASE:-}" ] || command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
if [ ${#missing[@]} -gt 0 ]; then
  command -v apt-get >/dev/null || fail "missing ${missing[*]}, and no apt-get to install them with"
  echo "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || fail "apt-get update failed"
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || fail "apt-get install ${missing[*]} failed"
fi

CACHE="${LOADSCHED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}}/loadsched/podman"
mkdir -p "$CACHE"
if [ -z "${CONTAINERS_CONF:-}" ]; then
  # sandbox/image.py runs the tests' containers with the same file
  cat >"$CACHE/containers.conf.new" <<'EOF'
# loadsched's podman configuration (written by scripts/build-image.sh).
[containers]
# No limits raised beyond the caller's own: some sandboxes refuse a higher RLIMIT_NOFILE
# ("setrlimit RLIMIT_NOFILE: Operation not permitted").
default_ulimits = []

[engine]
# crun refuses hosts with hybrid cgroups ("cgroups in hybrid mode not supported").
runtime = "runc"
EOF
  mv "$CACHE/containers.conf.new" "$CACHE/containers.conf"
  export CONTAINERS_CONF="$CACHE/containers.conf"
fi

# One build at a time on this machine (they share the base and podman's storage).
exec 9>"$CACHE/build.lock"
flock 9

# -- the base -----------------------------------------------------------------------------------
# Debian bookworm's minimal system, its python3 (3.11) with venv, CA certificates and `python`;
# no documentation. The tag is a hash of this function's text: edit it and a new base is built.
base_rootfs() {
  mmdebstrap --quiet --variant=minbase --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --include=ca-certificates,python3,python3-venv,python-is-python3 \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    bookworm "$1" ${LOADSCHED_DEBIAN_MIRROR:+"$LOADSCHED_DEBIAN_MIRROR"}
}

if [ -n "${LOADSCHED_BASE:-}" ]; then
  BASE="$LOADSCHED_BASE"
else
  BASE="localhost/loadsched-base:$(declare -f base_rootfs | sha256sum | cut -c1-12)"
  if [ "$REBUILD_BASE" -eq 1 ] || ! podman image exists "$BASE"; then
    echo "building the base image $BASE from Debian's packages (about a minute, once per machine)"
    work="$(mktemp -d "$CACHE/base.XXXXXX")"
    trap 'rm -rf "$work"' EXIT
    started=$SECONDS
    if ! base_rootfs "$work/rootfs.tar" >"$CACHE/base.log" 2>&1; then
      tail -n 30 "$CACHE/base.log" >&2
      fail "mmdebstrap failed (log: $CACHE/base.log)"
    fi
    if ! podman import --quiet \
        --change 'ENV LANG=C.UTF-8' --change 'CMD ["python3"]' \
        --change 'LABEL org.opencontainers.image.title=loadsched-base' \
        --change 'LABEL org.opencontainers.image.description="Debian bookworm, python3, CA certificates (scripts/build-image.sh)"' \
        "$work/rootfs.tar" "$BASE" >>"$CACHE/base.log" 2>&1; then
      tail -n 30 "$CACHE/base.log" >&2
      fail "podman import failed (log: $CACHE/base.log)"
    fi
    rm -rf "$work"
    echo "built $BASE in $((SECONDS - started))s"
  fi
fi
if [ "$BASE_ONLY" -eq 1 ]; then
  echo "$BASE" >&3
  exit 0
fi

# -- the image ----------------------------------------------------------------------------------
build_args=(--build-arg "PYTHON=$BASE")
# pip's settings on this machine (configuration files and PIP_* variables alike)
python=""
for candidate in "${PYTHON:-}" .venv/bin/python python3; do
  if [ -n "$candidate" ] && "$candidate" -m pip --version >/dev/null 2>&1; then
    python="$candidate"
    break
  fi
done
pip_cert=""
if [ -n "$python" ]; then
  while IFS= read -r -d '' setting; do
    case "$setting" in
      cert=*) pip_cert="${setting#cert=}" ;;
      *) build_args+=(--build-arg "$setting") ;;
    esac
  done < <("$python" scripts/pip_settings.py)
fi
# The CA bundle pip trusts here (its `cert`, else the system's) becomes the build's system bundle.
volumes=()
ca="${pip_cert:-/etc/ssl/certs/ca-certificates.crt}"
if [ -f "$ca" ]; then
  volumes+=(--volume "$ca:/etc/ssl/certs/ca-certificates.crt:ro")
  build_args+=(--build-arg PIP_CERT=/etc/ssl/certs/ca-certificates.crt)
fi

started=$SECONDS
# docker format: OCI images cannot carry the HEALTHCHECK
if ! podman build --format docker --network host --layers "${build_args[@]}" "${volumes[@]}" \
    --tag "$TAG" ${IIDFILE:+--iidfile "$IIDFILE"} . >"$CACHE/image.log" 2>&1; then
  tail -n 40 "$CACHE/image.log" >&2
  fail "podman build failed (log: $CACHE/image.log)"
fi
# Superseded builds of this image, left untagged over an hour ago, go.
podman image prune --force --filter label=org.opencontainers.image.title=loadsched \
  --filter until=1h >/dev/null 2>&1 || true
size=$(podman image inspect --format '{{.Size}}' "$TAG")
echo "built $TAG ($(( (size + 500000) / 1000000 )) MB) in $((SECONDS - started))s"
