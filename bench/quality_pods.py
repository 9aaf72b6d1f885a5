"""The pods of one round of bench/quality.py: the bench's own pod watch (:class:`Lives`, when
each pod was seen, bound and deleted), and the objects a trace entry is played as (a
one-replica ReplicaSet per entry, a PodDisruptionBudget per burst).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from bench.pod_watch import watch_pods
from bench.quality_moves import PodLife
from sandbox import kwok
from sandbox.cluster import Sandbox
from sandbox.specs import pod_body
from sandbox.workload import Arrival, Placed, pod_usage
from shared.pods import Pod

SCHEDULER_NAME = "quality"
"""The ``schedulerName`` of the trace's pods: each strategy's kube-scheduler answers to it."""
LABEL = "app=quality"
"""Every object the bench makes carries it."""


class Lives:
    """A watch store: when the watch first saw each pod, bound, and its deletion begun
    (seconds on the monotonic clock), with its workload (the ``workload`` label)."""

    def __init__(self) -> None:
        self.pods: dict[str, PodLife] = {}
        self.lock = threading.Lock()

    def replace(self, items: Sequence[Pod]) -> None:
        for pod in items:
            self._see(pod, gone=False)

    def apply(self, event: str, item: Pod) -> None:
        self._see(item, gone=event == "DELETED")

    def _see(self, pod: Pod, *, gone: bool) -> None:
        now = time.monotonic()
        name = pod.metadata.name
        with self.lock:
            life = self.pods.get(name) or PodLife(
                name, (pod.metadata.labels or {}).get("workload", name), now
            )
            if pod.spec.nodeName and life.bound_at is None:
                life = replace(life, node=pod.spec.nodeName, bound_at=now)
            if (gone or pod.metadata.deletionTimestamp) and life.gone_at is None:
                life = replace(life, gone_at=now)
            self.pods[name] = life

    def snapshot(self) -> list[PodLife]:
        with self.lock:
            return list(self.pods.values())


def watch(box: Sandbox, selector: str, store: Lives) -> Callable[[], None]:
    """Watch pods matching ``selector`` in a thread; returns a function that stops it."""
    stop = threading.Event()
    listed, thread = watch_pods(box, selector, store, name=f"quality {selector}", until=stop)
    if not listed.wait(60):
        raise SystemExit(f"the bench's pod watch ({selector}) did not list")

    def close() -> None:
        stop.set()
        thread.join(10)

    return close


BURST_MAX_UNAVAILABLE = 0.1
"""Each burst's PodDisruptionBudget: ``maxUnavailable`` 10 % of its pods."""


def first_bound(lives: Sequence[PodLife]) -> dict[str, tuple[str, float]]:
    """Per workload: the node and time its first pod was bound."""
    out: dict[str, tuple[str, float]] = {}
    for life in sorted(
        (life for life in lives if life.bound_at is not None), key=lambda life: life.bound_at or 0
    ):
        out.setdefault(life.workload, (life.node, life.bound_at or 0.0))
    return out


def relative(life: PodLife, start: float) -> PodLife:
    """``life`` with its times from ``start``."""
    return replace(
        life,
        seen_at=life.seen_at - start,
        bound_at=None if life.bound_at is None else life.bound_at - start,
        gone_at=None if life.gone_at is None else life.gone_at - start,
    )


def pod_loads(running: Sequence[tuple[str, Placed]], now: float) -> dict[str, dict[str, float]]:
    """Each running pod's usage, as the exporter serves it (cAdvisor's series)."""
    out = {}
    for name, pod in running:
        cores, memory = pod_usage(pod.profile, bound_at=pod.bound_at, now=now)
        out[f"default/{name}"] = {"cpu": cores, "mem": memory}
    return out


def replica_set(arrival: Arrival, labels: dict[str, str]) -> Any:
    """One replica of the arrival's pod; kwok starts it (Running, Ready) the profile's startup
    after binding."""
    profile = arrival.profile
    pod = pod_body(
        arrival.name,
        scheduler_name=SCHEDULER_NAME,
        cpu=f"{round(profile.cpu_request * 1000)}m",
        memory=str(int(profile.memory_request)),
        labels={**labels, "workload": arrival.name},
    )
    pod["metadata"]["annotations"] = kwok.lifecycle(starts_after=f"{profile.startup:.3f}s")
    for key in ("apiVersion", "kind"):
        pod.pop(key)
    for key in ("name", "namespace"):
        pod["metadata"].pop(key)
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": arrival.name, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {**labels, "workload": arrival.name}},
            "template": pod,
        },
    }


def disruption_budget(name: str, selector: dict[str, str]) -> Any:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "labels": {"app": "quality"}},
        "spec": {
            "maxUnavailable": f"{round(100 * BURST_MAX_UNAVAILABLE)}%",
            "selector": {"matchLabels": selector},
        },
    }
