"""What a bench measured, kept as a machine-readable result: ``out/results/<bench>.json``, one
file per bench, the latest run's. ``scripts/results_page.py`` turns them into the docs'
results page (date, commit, machine, each figure with its target and verdict).

    record("quota", [measured(ADMITTED_P99, p99)], quick=quick)
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from bench.targets import Target
from sandbox.build import VERSION_ENV, kube_version, selected_version

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "out" / "results"


@dataclass(frozen=True)
class Figure:
    name: str
    """What was measured, as the bench prints it."""
    value: float
    unit: str
    target: str | None = None
    """The target's key in bench/targets.yaml (``bench.name``), if the figure is judged."""
    bound: str | None = None
    """The target as written: ``≤ 5 ms``."""
    verdict: str | None = None
    """``met``, ``MISSED`` or ``retired``."""
    interval: tuple[float, float] | None = None
    """Where the median lies, with the bench's confidence, when it gives one."""


def measured(
    target: Target, value: float, *, interval: tuple[float, float] | None = None, name: str = ""
) -> Figure:
    """``value`` judged against ``target``."""
    return Figure(
        name=name or target.what,
        value=value,
        unit=target.unit,
        target=target.key,
        bound=f"{target.sign} {bound_text(target.bound)} {target.unit}",
        verdict=target.judge(value),
        interval=interval,
    )


def bound_text(value: float) -> str:
    """A target's bound as written: whole above a million (bytes), else as short as exact."""
    return f"{value:,.0f}" if abs(value) >= 1e6 else f"{value:g}"


def _git(*args: str) -> str:
    try:
        done = subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=False, timeout=10
        )
    except OSError:
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def _revision() -> str:
    """The checked-out commit, ``+changes`` if tracked files differ from it."""
    commit = _git("rev-parse", "--short=12", "HEAD")
    if commit and _git("status", "--porcelain", "--untracked-files=no"):
        commit += "+changes"
    return commit


STARTED_ON = _revision()
"""The commit of the code this process loaded, read when it started: a commit made while a
long bench runs is not what it ran."""


def machine() -> dict[str, object]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu": model,
        "kernel": platform.release(),
        "python": platform.python_version(),
    }


def record(bench: str, figures: list[Figure], *, quick: bool = False, cluster: bool = True) -> Path:
    """Write ``out/results/<bench>.json`` for this run (replacing the last one's), with the
    commit the process started on (:data:`STARTED_ON`). A run on a
    Kubernetes release other than the default (``LOADSCHED_KUBE_VERSION``) is kept apart, as
    ``<bench>@<release>.json``, and says so in its command; ``cluster=False`` for a bench that
    starts none."""
    commit = STARTED_ON
    release, default = (selected_version(), kube_version()) if cluster else (None, None)
    command = ["python -m bench." + Path(sys.argv[0]).stem, *sys.argv[1:]]
    if release != default:
        bench = f"{bench}@{release}"
        command.insert(0, f"{VERSION_ENV}={release}")
    result = {
        "bench": bench,
        "command": " ".join(command),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": commit or "unknown",
        "machine": machine(),
        "kubernetes": release,
        "quick": quick,
        "figures": [asdict(figure) for figure in figures],
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{bench}.json"
    path.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    return path
