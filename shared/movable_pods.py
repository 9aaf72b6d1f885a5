"""Which pods on an overloaded node the rebalancer may move (:func:`skip_reason`), pure: pods a
controller recreates, running, not too important, selected by the policy, not opted out, free
of what a move would lose or what the target check cannot judge, and out of their workload's
cooldown. :mod:`shared.rebalance` chooses among them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from shared.annotation_keys import EVICT_ANNOTATION
from shared.rebalance_marks import workload_key
from shared.rebalance_policy import RebalancePolicy

SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
"""``system-cluster-critical`` and above: never moved, whatever ``maxPriority`` says."""
OPT_OUT_ANNOTATION = EVICT_ANNOTATION
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
"""On a static pod's mirror: the kubelet owns it, eviction cannot move it."""

SkipReason = Literal[
    "no-controller",
    "daemonset",
    "mirror",
    "terminating",
    "not-running",
    "priority",
    "namespace",
    "selector",
    "opted-out",
    "cooldown",
    "in-flight",
    "unreadable",
    "quota",
    "local-storage",
    "unjudged-constraint",
]
"""Why a pod on an overloaded node is not a candidate (a metric label)."""


@dataclass(frozen=True, slots=True)
class PodFacts:
    """What eligibility reads of a pod on an overloaded node."""

    namespace: str
    name: str
    uid: str
    owners: tuple[tuple[str, str], ...]
    """(kind, name) of each owner reference."""
    annotations: Mapping[str, str]
    labels: Mapping[str, str]
    priority: int
    phase: str | None
    terminating: bool
    local_storage: bool = False
    """An ``emptyDir`` or ``hostPath`` volume."""
    unjudged: str | None = None
    """What it asks of a node that the target check does not judge (required pod affinity or
    anti-affinity, a ``DoNotSchedule`` topology spread, host ports, claimed volumes), or
    ``None``."""

    @property
    def workload(self) -> str | None:
        return workload_key(self.namespace, self.owners)


def skip_reason(
    pod: PodFacts,
    policy: RebalancePolicy,
    moved: Mapping[str, datetime],
    now: datetime,
) -> SkipReason | None:
    """Why ``pod`` may not be moved, or ``None``; ``moved`` is workload → until when its pods
    are not moved again (``cooldown`` after the last)."""
    kinds = {kind for kind, _ in pod.owners}
    if MIRROR_ANNOTATION in pod.annotations or "Node" in kinds:
        return "mirror"
    if "DaemonSet" in kinds:
        return "daemonset"
    workload = pod.workload
    if workload is None:
        return "no-controller"
    if pod.terminating:
        return "terminating"
    if pod.phase != "Running":
        return "not-running"
    if pod.priority >= SYSTEM_CRITICAL_PRIORITY or pod.priority > policy.max_priority:
        return "priority"
    namespaces = policy.namespaces
    if pod.namespace in namespaces.exclude or (
        namespaces.include and pod.namespace not in namespaces.include
    ):
        return "namespace"
    if any(pod.labels.get(k) != v for k, v in policy.pod_selector.items()):
        return "selector"
    opt = pod.annotations.get(OPT_OUT_ANNOTATION, "").strip().lower()
    if opt == "false":
        return "opted-out"
    if pod.local_storage and opt != "true":
        return "local-storage"
    if pod.unjudged and opt != "true":
        return "unjudged-constraint"
    until = moved.get(workload)
    if until is not None and now < until:
        return "cooldown"
    return None
