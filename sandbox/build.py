"""Build kube-apiserver, kube-controller-manager, kube-scheduler and kubectl from the
``k8s.io/kubernetes`` Go module into a cache folder keyed by version; etcd, kwok and helm from
their own modules (``hack/etcd``, ``hack/kwok``, ``hack/helm``), and the descheduler
(``hack/descheduler``) when a bench first needs it. Built once; later calls find the binaries
and return at once.

The default version is the one pinned in ``hack/kube/go.mod`` (what CI and ``make test`` run).
Any other release is chosen with ``LOADSCHED_KUBE_VERSION`` (or ``--version``); its module lives
in ``hack/kube/versions/<version>/``, generated from that release's own go.mod the first time
(its staging modules pinned to the matching ``v0.X.Y``) and kept so later builds are the same.
``MATRIX_VERSIONS`` are the releases ``make matrix`` builds and tests."""

from __future__ import annotations

import argparse
import hashlib
import json
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
VERSIONS = MODULE / "versions"
COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
COLD_BUILD_ESTIMATE = "about 7 minutes on 2 cores, module download included"
VERSION_ENV = "LOADSCHED_KUBE_VERSION"
# The latest patch of each minor in upstream support, oldest first.
MATRIX_VERSIONS = ("v1.35.4", "v1.36.3", "v1.37.2")
_VERSION = re.compile(r"v1\.(\d+)\.(\d+)")


def kube_version() -> str:
    """The default release: the one ``hack/kube/go.mod`` pins."""
    match = re.search(r"^require k8s\.io/kubernetes (v\S+)$", (MODULE / "go.mod").read_text(), re.M)
    if match is None:
        raise RuntimeError(f"{MODULE / 'go.mod'}: no 'require k8s.io/kubernetes vX.Y.Z' line")
    return match.group(1)


def check_version(version: str, *, source: str = VERSION_ENV) -> str:
    """``version`` if it names a Kubernetes release (``v1.MINOR.PATCH``), else a clear error."""
    if _VERSION.fullmatch(version) is None:
        raise ValueError(f"{source}: {version!r} is not a Kubernetes release like v1.37.2")
    return version


def selected_version() -> str:
    """``LOADSCHED_KUBE_VERSION`` when set, else the default release."""
    chosen = os.environ.get(VERSION_ENV, "").strip()
    return check_version(chosen) if chosen else kube_version()


def module_dir(version: str) -> Path:
    """The Go module that builds ``version``."""
    return MODULE if version == kube_version() else VERSIONS / version


def cache_root() -> Path:
    base = os.environ.get("LOADSCHED_CACHE") or os.environ.get("XDG_CACHE_HOME")
    return Path(base) / "loadsched" if base else Path.home() / ".cache" / "loadsched"


def bin_dir(version: str | None = None) -> Path:
    return cache_root() / "kube" / (version or selected_version()) / "bin"


def release_of(binaries: Path) -> tuple[int, int]:
    """(minor, patch) of the release whose binaries are in ``binaries`` (``.../<version>/bin``)."""
    match = _VERSION.fullmatch(binaries.parent.name)
    if match is None:
        raise ValueError(f"{binaries}: not a folder of a Kubernetes release's binaries")
    return int(match.group(1)), int(match.group(2))


def apiserver_flags(binaries: Path) -> list[str]:
    """What kube-apiserver of the release in ``binaries`` needs beyond the sandbox's common
    flags: from v1.37 it refuses a loopback advertise address while it reconciles the
    ``kubernetes`` Service's endpoints (nothing in the sandbox routes to them)."""
    minor, _ = release_of(binaries)
    return ["--endpoint-reconciler-type", "none"] if minor >= 37 else []


def _go(args: list[str], cwd: Path) -> str:
    result = subprocess.run(
        ["go", *args],
        cwd=cwd,
        env={**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod"},
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(
            f"go {' '.join(args)} failed ({result.returncode}):\n{result.stderr[-4000:]}"
        )
    return result.stdout


def module_text(version: str, upstream_go_mod: str) -> str:
    """The go.mod that builds ``version``: its go directive, and each module that
    ``k8s.io/kubernetes`` replaces with a staging folder pinned to the published ``v0.X.Y``."""
    match = _VERSION.fullmatch(version)
    if match is None:
        raise ValueError(f"{version!r} is not a Kubernetes release like v1.37.2")
    staging = f"v0.{match.group(1)}.{match.group(2)}"
    go = re.search(r"^go (\S+)$", upstream_go_mod, re.M)
    if go is None:
        raise RuntimeError(f"k8s.io/kubernetes {version}: its go.mod has no go directive")
    replaced = sorted(
        set(re.findall(r"^\s*(k8s\.io/[\w.-]+) => \./staging/", upstream_go_mod, re.M))
    )
    if not replaced:
        raise RuntimeError(f"k8s.io/kubernetes {version}: its go.mod replaces no staging module")
    lines = [
        "// Generated by sandbox/build.py: builds the Kubernetes control-plane binaries of",
        f"// {version} for the version matrix (make matrix). See hack/kube/go.mod.",
        "module loadsched.local/kube",
        "",
        f"go {go.group(1)}",
        "",
        f"require k8s.io/kubernetes {version}",
        "",
        "replace (",
        *(f"\t{name} => {name} {staging}" for name in replaced),
        ")",
        "",
    ]
    return "\n".join(lines)


def ensure_module(version: str, say: Callable[[str], None]) -> Path:
    """The module folder for ``version``, generated (go.mod, tools.go, tidied go.sum) if absent."""
    folder = module_dir(version)
    if (folder / "go.sum").is_file():
        return folder
    say(f"generating {folder.relative_to(ROOT)} from k8s.io/kubernetes {version}'s go.mod")
    info = json.loads(_go(["mod", "download", "-json", f"k8s.io/kubernetes@{version}"], MODULE))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "go.mod").write_text(module_text(version, Path(info["GoMod"]).read_text()))
    shutil.copyfile(MODULE / "tools.go", folder / "tools.go")
    _go(["mod", "tidy"], folder)
    return folder


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


def ensure_kube_binaries(
    say: Callable[[str], None] | None = None, *, version: str | None = None
) -> Path:
    """The folder holding the four binaries of ``version`` (default: ``selected_version()``);
    builds them first if any is missing."""
    say = _say(say)
    version = check_version(version, source="version") if version else selected_version()
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
            ensure_module(version, say),
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
KWOK_MODULE = ROOT / "hack" / "kwok"
ETCD_MODULE = ROOT / "hack" / "etcd"
DESCHEDULER_MODULE = ROOT / "hack" / "descheduler"
TRIMARAN_MODULE = ROOT / "hack" / "trimaran"


def pinned_version(module: Path, path: str) -> str:
    """The version of ``path`` that ``module``'s go.mod requires."""
    go_mod = module / "go.mod"
    match = re.search(rf"^require {re.escape(path)} (v\S+)$", go_mod.read_text(), re.M)
    if match is None:
        raise RuntimeError(f"{go_mod}: no 'require {path} vX.Y.Z' line")
    return match.group(1)


def helm_version() -> str:
    return pinned_version(HELM_MODULE, "helm.sh/helm/v3")


def kwok_version() -> str:
    return pinned_version(KWOK_MODULE, "sigs.k8s.io/kwok")


def etcd_version() -> str:
    return pinned_version(ETCD_MODULE, "go.etcd.io/etcd/server/v3")


def descheduler_version() -> str:
    return pinned_version(DESCHEDULER_MODULE, "sigs.k8s.io/descheduler")


def trimaran_version() -> str:
    return pinned_version(TRIMARAN_MODULE, "sigs.k8s.io/scheduler-plugins")


def tool_path(name: str, version: str) -> Path:
    """Where the cache keeps ``name`` at ``version``."""
    return cache_root() / name / version / name


def _ensure_tool(
    name: str,
    version: str,
    module: Path,
    package: str,
    say: Callable[[str], None],
    ldflags: str = "-s -w",
    estimate: str = "1 to 2 minutes",
) -> Path:
    """``name`` built from ``package`` in ``module`` into the cache the first time."""
    target = tool_path(name, version)
    if target.is_file():
        return target
    if shutil.which("go") is None:
        raise RuntimeError(f"Go is needed to build {name}: 'go' is not on PATH")
    say(f"building {name} {version} from its Go module (first time only; {estimate})")
    started = time.monotonic()
    _build_binary(module, [package], target, ldflags=ldflags)
    say(f"built {name} {version} in {time.monotonic() - started:.0f}s into {target}")
    return target


def _say(say: Callable[[str], None] | None) -> Callable[[str], None]:
    return say or (lambda line: print(line, file=sys.stderr, flush=True))


def ensure_helm(say: Callable[[str], None] | None = None) -> Path:
    """The helm binary (for linting, rendering and validating charts/loadsched), built from
    the module pinned in ``hack/helm/go.mod`` into the cache the first time."""
    version = helm_version()
    ldflags = f"-s -w -X helm.sh/helm/v3/internal/version.version={version}"
    return _ensure_tool(
        "helm", version, HELM_MODULE, "helm.sh/helm/v3/cmd/helm", _say(say), ldflags
    )


def ensure_kwok(say: Callable[[str], None] | None = None) -> Path:
    """The kwok binary (the kubelet of the sandbox's nodes: sandbox/kwok.py), built from the
    module pinned in ``hack/kwok/go.mod`` into the cache the first time."""
    version = kwok_version()
    ldflags = f"-s -w -X sigs.k8s.io/kwok/pkg/consts.Version={version.lstrip('v')}"
    return _ensure_tool(
        "kwok", version, KWOK_MODULE, "sigs.k8s.io/kwok/cmd/kwok", _say(say), ldflags
    )


def ensure_etcd(say: Callable[[str], None] | None = None) -> Path:
    """The etcd binary (the sandbox's store), built from the server module pinned in
    ``hack/etcd/go.mod`` into the cache the first time (about 30 seconds)."""
    return _ensure_tool("etcd", etcd_version(), ETCD_MODULE, ".", _say(say))


def ensure_descheduler(say: Callable[[str], None] | None = None) -> Path:
    """The descheduler binary (kubernetes-sigs' LowNodeUtilization and the other evicting
    plugins), built from the module pinned in ``hack/descheduler/go.mod`` into the cache the
    first time (about 2 minutes)."""
    version = descheduler_version()
    # as its Makefile stamps a release (v<build date>-<tag>): the form its version check on
    # the API server's minor reads (any other leaves major and minor empty, and it warns)
    now = datetime.now(UTC)
    package = "sigs.k8s.io/descheduler/pkg/version"
    ldflags = (
        f"-s -w -X {package}.version=v{now:%Y%m%d}-{version}"
        f" -X {package}.buildDate={now:%Y-%m-%dT%H:%M:%SZ}"
    )
    return _ensure_tool(
        "descheduler",
        version,
        DESCHEDULER_MODULE,
        "sigs.k8s.io/descheduler/cmd/descheduler",
        _say(say),
        ldflags,
    )


def trimaran_kube_version() -> str:
    """The Kubernetes release ``hack/trimaran`` builds the plugins on (its replace)."""
    go_mod = TRIMARAN_MODULE / "go.mod"
    match = re.search(
        r"^\s*k8s\.io/kubernetes => k8s\.io/kubernetes (v\S+)$", go_mod.read_text(), re.M
    )
    if match is None:
        raise RuntimeError(f"{go_mod}: no 'k8s.io/kubernetes => k8s.io/kubernetes vX.Y.Z' line")
    return match.group(1)


def trimaran_build() -> str:
    """What the cache keys the build by: the plugins' release and the Kubernetes release
    it is built on."""
    return f"{trimaran_version()}-on-{trimaran_kube_version()}"


def trimaran_binary() -> Path:
    """Where :func:`ensure_trimaran` builds scheduler-plugins' kube-scheduler."""
    return tool_path("trimaran", trimaran_build())


def ensure_trimaran(say: Callable[[str], None] | None = None) -> Path:
    """scheduler-plugins' kube-scheduler (Trimaran's TargetLoadPacking and
    LoadVariationRiskBalancing, load-watcher in the process), built from the module pinned in
    ``hack/trimaran/go.mod`` into the cache the first time (minutes: a kube-scheduler).

    It runs on the sandbox's own Kubernetes release (``hack/trimaran/go.mod`` says why), and
    is stamped with it, as the sandbox's kube-scheduler is: the plugins' own tag
    (``v0.34.7``) read as a Kubernetes version would set the scheduler's emulated version to
    0.34 and turn its feature gates off."""
    return _ensure_tool(
        "trimaran",
        trimaran_build(),
        TRIMARAN_MODULE,
        "sigs.k8s.io/scheduler-plugins/cmd/scheduler",
        _say(say),
        _ldflags(trimaran_kube_version()),
        "about 5 minutes on 2 cores",
    )


MINIMAL_EXTENDER_MODULE = ROOT / "hack" / "minimal-extender"


def minimal_extender_binary() -> Path:
    """Where :func:`ensure_minimal_extender` keeps its build: under a hash of its source."""
    digest = hashlib.sha256()
    for name in ("go.mod", "main.go"):
        digest.update((MINIMAL_EXTENDER_MODULE / name).read_bytes())
    return cache_root() / "minimal-extender" / digest.hexdigest()[:16] / "minimal-extender"


def ensure_minimal_extender(say: Callable[[str], None] | None = None) -> Path:
    """The yardstick extender of ``bench/scheduling.py`` (``hack/minimal-extender``), built
    into the cache under a hash of its source the first time (standard library only: seconds)."""
    say = _say(say)
    target = minimal_extender_binary()
    if target.is_file():
        return target
    if shutil.which("go") is None:
        raise RuntimeError("Go is needed to build the minimal extender: 'go' is not on PATH")
    say("building hack/minimal-extender")
    _build_binary(MINIMAL_EXTENDER_MODULE, ["."], target, ldflags="-s -w")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sandbox.build", description="Build the sandbox's Go tools into the cache."
    )
    parser.add_argument(
        "--version",
        help=f"Kubernetes release to build (default: ${VERSION_ENV}, else hack/kube/go.mod's)",
    )
    parser.add_argument("--kube-only", action="store_true", help="skip etcd, kwok and helm")
    args = parser.parse_args(argv)
    try:
        version = check_version(args.version, source="--version") if args.version else None
        print(ensure_kube_binaries(version=version))
        if not args.kube_only:
            print(ensure_etcd())
            print(ensure_kwok())
            print(ensure_helm())
    except (ValueError, RuntimeError) as error:
        print(f"sandbox.build: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
