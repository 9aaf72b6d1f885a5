"""What moving pods did in a bench/quality.py run, from the life of every pod the bench saw:
evictions, the most of one workload, replacements back on the node their pod left, evictions
past a PodDisruptionBudget, workloads left with no pod bound, and how long replacements took
to be placed.

Each trace entry is a workload: a one-replica ReplicaSet, so an evicted pod is replaced. A pod
whose deletion began before the bench deleted its workload was evicted (by whatever evicts in
that strategy); its replacement is the next pod of the workload the bench saw.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

LOST_AFTER = 30.0
"""Seconds: an eviction closer than this to its workload's end or the run's is not judged lost
for want of a replacement (kube-scheduler's backoff alone may take that long)."""


@dataclass(frozen=True)
class PodLife:
    """One pod as the bench's watch saw it; seconds from the trace's start."""

    name: str
    workload: str
    seen_at: float
    node: str = ""
    """Where it was bound; empty if never."""
    bound_at: float | None = None
    gone_at: float | None = None
    """When its deletion began (deletion timestamp, or gone from the watch)."""


@dataclass(frozen=True)
class Budget:
    """A PodDisruptionBudget over a group of workloads: ``maxUnavailable`` as a fraction of
    the group's workloads alive at the time, rounded up (as the disruption controller does)."""

    max_unavailable: float

    def allowed(self, alive: int) -> int:
        return math.ceil(self.max_unavailable * alive)


@dataclass
class Moves:
    evictions: int = 0
    most_of_one: int = 0
    """The most evictions of one workload's pods."""
    evicted_twice: int = 0
    """Workloads whose pods were evicted more than once."""
    back_on_source: int = 0
    """Replacements bound to the node the evicted pod was on."""
    over_budget: int = 0
    """Evictions that left their group with more workloads disrupted (evicted, replacement not
    yet ready) than its budget allows."""
    lost: int = 0
    """Evictions whose replacement was never bound while the workload lived (of those at
    least :data:`LOST_AFTER` before the workload or the run ended)."""
    replacement_latencies: list[float] = field(default_factory=list)
    """Eviction → replacement bound, seconds."""


@dataclass(frozen=True)
class Workloads:
    """What the bench knows of the workloads beside the pods' lives."""

    ended: Mapping[str, float]
    """When the bench deleted each workload (not there: alive at the end)."""
    created: Mapping[str, float]
    """When each workload was created."""
    startup: Mapping[str, float]
    """Seconds from binding until a workload's pod is ready."""
    groups: Mapping[str, str]
    """Each workload's group (a burst, or the steady stream)."""
    budgets: Mapping[str, Budget]
    """Per group that has one."""
    end: float
    """When the run ended."""


def moves(lives: Sequence[PodLife], known: Workloads) -> Moves:
    """The figures of :class:`Moves` for one run."""
    out = Moves()
    by_workload: dict[str, list[PodLife]] = {}
    for life in sorted(lives, key=lambda life: life.seen_at):
        by_workload.setdefault(life.workload, []).append(life)
    disrupted: dict[str, list[tuple[float, float]]] = {}
    """Per group: (evicted at, ready again at) of each eviction."""
    evicted_at: list[tuple[float, str]] = []
    for workload, pods in by_workload.items():
        ended = known.ended.get(workload, math.inf)
        count = 0
        for number, pod in enumerate(pods):
            if pod.gone_at is None or pod.gone_at >= ended:
                continue
            count += 1
            evicted_at.append((pod.gone_at, workload))
            after = pods[number + 1] if number + 1 < len(pods) else None
            ready = math.inf
            if after is not None and after.bound_at is not None and after.bound_at < ended:
                out.replacement_latencies.append(after.bound_at - pod.gone_at)
                out.back_on_source += after.node == pod.node
                ready = after.bound_at + known.startup.get(workload, 0.0)
            elif min(ended, known.end) - pod.gone_at >= LOST_AFTER:
                out.lost += 1
            group = known.groups.get(workload, "")
            disrupted.setdefault(group, []).append((pod.gone_at, min(ready, ended)))
        out.evictions += count
        out.most_of_one = max(out.most_of_one, count)
        out.evicted_twice += count > 1
    for at, workload in sorted(evicted_at):
        group = known.groups.get(workload, "")
        budget = known.budgets.get(group)
        if budget is None:
            continue
        now = sum(1 for start, until in disrupted[group] if start <= at < until)
        alive = sum(
            1
            for w, g in known.groups.items()
            if g == group and known.created.get(w, math.inf) <= at < known.ended.get(w, math.inf)
        )
        out.over_budget += now > budget.allowed(alive)
    return out
