"""Which pods on an overloaded node may move (:func:`judge`): a pod read from the API server,
judged by :func:`shared.movable_pods.skip_reason` and, with elastic quotas, by whether its
quota admits its replacement; and what a pod that may move takes off its node: its measured
usage, else what the extender's filter estimates for its replacement. Pure: the pods, their
usage and the time are passed in."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

from annotator.rebalance.full_pod import FullPod
from shared.estimation import Need, need_of
from shared.kube.meta import PodMeta
from shared.movable_pods import PodFacts, SkipReason, skip_reason
from shared.node_fit import PodNeeds, required_affinity, tolerations_of
from shared.overload_streaks import Threshold
from shared.placement_policy import EstimationPolicy
from shared.pods import Pod, pod_request
from shared.quantity import ResourceList
from shared.quota import Admission
from shared.rebalance import Candidate
from shared.rebalance_policy import RebalancePolicy
from shared.rules import LoadRules
from shared.strategies import placement_of

PodUsage = Mapping[str, Mapping[tuple[str, str], float]]
"""Per resource (``cpu``, ``memory``), (namespace, pod) → measured usage."""


@dataclass(frozen=True)
class CandidateRules:
    """What a pod on an overloaded node is judged by."""

    settings: RebalancePolicy
    rules: LoadRules
    estimation: EstimationPolicy
    quota_admits: Callable[[Pod, ResourceList], Admission] | None = None
    """With elastic quotas: whether a pod's quota admits it, itself not counted (its
    replacement asks the same, in place of it)."""


def pod_facts(pod: FullPod) -> PodFacts:
    """What eligibility reads of ``pod``."""
    meta = pod.metadata
    return PodFacts(
        namespace=meta.namespace,
        name=meta.name,
        uid=meta.uid,
        owners=tuple((o.kind, o.name) for o in meta.ownerReferences or ()),
        annotations=meta.annotations or {},
        labels=meta.labels or {},
        priority=pod.spec.priority or 0,
        phase=pod.status.phase,
        terminating=bool(meta.deletionTimestamp),
        local_storage=pod.spec.local_storage,
        unjudged=pod.spec.unjudged,
    )


def judge(
    pod: FullPod,
    threshold: Threshold,
    usage: PodUsage,
    moved: Mapping[str, datetime],
    now: datetime,
    rules: CandidateRules,
) -> Candidate | SkipReason:
    """``pod`` as a candidate to move off its node for ``threshold``, or why it may not move;
    ``moved`` is workload → until when its pods are not moved again."""
    facts = pod_facts(pod)
    reason = skip_reason(facts, rules.settings, moved, now)
    if reason is not None:
        return reason
    try:
        request = pod_request(pod.spec)
    except ValueError:
        return "unreadable"
    as_pod = _as_pod(pod)
    if rules.quota_admits is not None and not rules.quota_admits(as_pod, request).admitted:
        return "quota"
    return _candidate(pod, as_pod, facts, request, threshold, usage, now, rules)


def _as_pod(pod: FullPod) -> Pod:
    meta = pod.metadata
    return Pod(
        metadata=PodMeta(name=meta.name, namespace=meta.namespace, uid=meta.uid),
        spec=pod.spec,
        status=pod.status,
    )


def _candidate(
    pod: FullPod,
    as_pod: Pod,
    facts: PodFacts,
    request: ResourceList,
    threshold: Threshold,
    usage: PodUsage,
    now: datetime,
    rules: CandidateRules,
) -> Candidate:
    """``pod`` with its usage: measured where known, else what the extender's filter takes
    its replacement to use (the estimation policy's basis, factors and defaults)."""
    estimated = need_of(placement_of(as_pod, now, rules.rules), rules.estimation)
    key = (facts.namespace, facts.name)
    cpu = usage["cpu"].get(key)
    memory = usage["memory"].get(key)
    need = Need(
        cpu if cpu is not None else estimated.cpu,
        memory if memory is not None else estimated.memory,
    )
    return Candidate(
        facts=facts,
        usage=need.of(threshold.resource),
        measured=(cpu if threshold.resource == "cpu" else memory) is not None,
        online=pod.spec.preemptionPolicy == "Never",
        created=pod.metadata.creationTimestamp or "",
        needs=_needs(pod, request),
        need=need,
        estimate=estimated if rules.rules.estimation is not None else None,
    )


def _needs(pod: FullPod, request: ResourceList) -> PodNeeds:
    """What node fit reads of ``pod`` on a target."""
    return PodNeeds(
        requests=request,
        node_selector=pod.spec.nodeSelector or {},
        tolerations=tolerations_of(pod.spec.tolerations),
        required=required_affinity(pod.spec.affinity),
    )
