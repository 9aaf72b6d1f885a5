"""Build kube-apiserver, kube-controller-manager, kube-scheduler and kubectl from the
``k8s.io/kubernetes`` Go module pinned in ``hack/kube/go.mod``, into a cache folder keyed by
version. Built once; later calls find the binaries and return at once."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODULE = ROOT / "hack" / "kube"
COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
COLD_BUILD_ESTIMATE = "about 7 minutes on 2 cores, module download included"


def kube_version() -> str:
    match = re.search(r"^require k8s\.io/kubernetes (v\S+)$", (MODULE / "go.mod").read_text(), re.M)
    if match is None:
        raise RuntimeError(f"{MODULE / 'go.mod'}: no 'require k8s.io/kubernetes vX.Y.Z' line")
    return match.group(1)


def cache_root() -> Path:
    base = os.environ.get("LOADSCHED_CACHE") or os.environ.get("XDG_CACHE_HOME")
    return Path(base) / "loadsched" if base else Path.home() / ".cache" / "loadsched"


def bin_dir(version: str | None = None) -> Path:
    return cache_root() / "kube" / (version or kube_version()) / "bin"


def _ldflags(version: str) -> str:
    major, minor = version.lstrip("v").split(".")[:2]
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    pairs = {
        "gitVersion": version,
        "gitMajor": major,
        "gitMinor": minor,
        "gitTreeState": "clean",
        "buildDate": stamp,
    }
    flags = []
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [f"-X {package}.{key}={value}" for key, value in pairs.items()]
    return "-s -w " + " ".join(flags)


def _go_build(module: Path, packages: list[str], *, output: Path, ldflags: str) -> None:
    """``go build`` of ``packages`` in ``module`` (static, module downloads allowed)."""
    result = subprocess.run(
        ["go", "build", "-trimpath", "-ldflags", ldflags, "-o", str(output), *packages],
        cwd=module,
        env={**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod"},
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(
            f"go build of {' '.join(packages)} failed ({result.returncode}):\n"
            f"{result.stderr[-4000:]}"
        )


def _build_binary(module: Path, packages: list[str], target: Path, *, ldflags: str) -> None:
    """One binary into ``target``, which appears only once complete."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_suffix(".building")
    try:
        _go_build(module, packages, output=staging, ldflags=ldflags)
    except RuntimeError:
        staging.unlink(missing_ok=True)
        raise
    staging.rename(target)


def _heartbeat(stop: threading.Event, started: float, say: Callable[[str], None]) -> None:
    while not stop.wait(20):
        say(
            f"  ... still building ({time.monotonic() - started:.0f}s elapsed; {COLD_BUILD_ESTIMATE})"
        )


def ensure_kube_binaries(say: Callable[[str], None] | None = None) -> Path:
    """The folder holding the four binaries; builds them first if any is missing."""
    say = say or (lambda line: print(line, file=sys.stderr, flush=True))
    version = kube_version()
    target = bin_dir(version)
    if all((target / name).is_file() for name in COMMANDS):
        return target
    if shutil.which("go") is None:
        raise RuntimeError(
            "Go is needed to build the Kubernetes control plane: 'go' is not on PATH"
        )
    say(
        f"building Kubernetes {version} control plane from the Go module (first time only; {COLD_BUILD_ESTIMATE})"
    )
    started = time.monotonic()
    stop = threading.Event()
    beat = threading.Thread(target=_heartbeat, args=(stop, started, say), daemon=True)
    beat.start()
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=".build-"))
    staging.chmod(0o755)
    try:
        _go_build(
            MODULE,
            [f"k8s.io/kubernetes/cmd/{name}" for name in COMMANDS],
            output=staging,
            ldflags=_ldflags(version),
        )
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    finally:
        stop.set()
        shutil.rmtree(staging, ignore_errors=True)
    say(f"built {', '.join(COMMANDS)} in {time.monotonic() - started:.0f}s into {target}")
    return target


HELM_MODULE = ROOT / "hack" / "helm"


def helm_version() -> str:
    match = re.search(
        r"^require helm\.sh/helm/v3 (v\S+)$", (HELM_MODULE / "go.mod").read_text(), re.M
    )
    if match is None:
        raise RuntimeError(f"{HELM_MODULE / 'go.mod'}: no 'require helm.sh/helm/v3 vX.Y.Z' line")
    return match.group(1)


def ensure_helm(say: Callable[[str], None] | None = None) -> Path:
    """The helm binary (for linting, rendering and validating charts/loadsched), built from
    the module pinned in ``hack/helm/go.mod`` into the cache the first time (about 2 minutes)."""
    say = say or (lambda line: print(line, file=sys.stderr, flush=True))
    version = helm_version()
    target = cache_root() / "helm" / version / "helm"
    if target.is_file():
        return target
    if shutil.which("go") is None:
        raise RuntimeError("Go is needed to build helm: 'go' is not on PATH")
    say(f"building helm {version} from its Go module (first time only; about 2 minutes)")
    started = time.monotonic()
    _build_binary(
        HELM_MODULE,
        ["helm.sh/helm/v3/cmd/helm"],
        target,
        ldflags=f"-s -w -X helm.sh/helm/v3/internal/version.version={version}",
    )
    say(f"built helm {version} in {time.monotonic() - started:.0f}s into {target}")
    return target


MINIMAL_EXTENDER_MODULE = ROOT / "hack" / "minimal-extender"


def ensure_minimal_extender(say: Callable[[str], None] | None = None) -> Path:
    """The yardstick extender of ``bench/scheduling.py`` (``hack/minimal-extender``), built
    into the cache under a hash of its source the first time (standard library only: seconds)."""
    say = say or (lambda line: print(line, file=sys.stderr, flush=True))
    digest = hashlib.sha256()
    for name in ("go.mod", "main.go"):
        digest.update((MINIMAL_EXTENDER_MODULE / name).read_bytes())
    target = cache_root() / "minimal-extender" / digest.hexdigest()[:16] / "minimal-extender"
    if target.is_file():
        return target
    if shutil.which("go") is None:
        raise RuntimeError("Go is needed to build the minimal extender: 'go' is not on PATH")
    say("building hack/minimal-extender")
    _build_binary(MINIMAL_EXTENDER_MODULE, ["."], target, ldflags="-s -w")
    return target


def main() -> int:
    print(ensure_kube_binaries())
    print(ensure_helm())
    return 0


if __name__ == "__main__":
    sys.exit(main())
