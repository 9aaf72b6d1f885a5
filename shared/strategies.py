"""The configured strategy's inputs per node, and a node's score for a pod (Trimaran's
strategies depend on the pod; crane's least-loaded score does not). Pure."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from shared.annotations import Sample, Unknown, parse_timestamp
from shared.estimation import Need, NodeSize, Placement, need_of, predicted_cpu
from shared.pods import Pod
from shared.rules import LoadRules, MetricRule
from shared.scoring import REPORTING_INTERVAL, ResourceUse, risk_balancing, target_load_packing

MAX_NODE_SCORE = 100

Read = Mapping[str, tuple[Sample | Unknown, float]]
"""Each strategy metric's fresh sample (or why not) and what estimation adds to it."""


@dataclass(frozen=True, slots=True)
class Packed:
    """TargetLoadPacking's inputs for one node: CPU in use (cores, placed pods included)."""

    used: float | None
    capacity: float | None


@dataclass(frozen=True, slots=True)
class Risked:
    """LoadVariationRiskBalancing's inputs for one node."""

    cpu: ResourceUse | None
    memory: ResourceUse | None


@dataclass(frozen=True, slots=True)
class PodDemand:
    """What a pod brings, as the strategies read it."""

    predicted_cpu: float = 0.0
    """Cores, as TargetLoadPacking predicts them."""
    cpu: float = 0.0
    """Cores requested."""
    memory: float = 0.0
    """Bytes requested."""


NO_DEMAND = PodDemand()


def strategy_inputs(
    size: NodeSize, rules: LoadRules, placements: Sequence[Placement], read: Read
) -> Packed | Risked | None:
    """The pod-independent part of the configured strategy's score for one node."""
    if rules.packing is not None:
        value, added = read[rules.packing.metric.name]
        capacity = size.capacity("cpu")
        if not isinstance(value, Sample) or capacity is None:
            return Packed(None, capacity)
        if rules.estimation is not None:
            return Packed((value.value + added) * capacity, capacity)
        # Trimaran's own rule: pods bound since, or within its reporting interval before, the
        # sample are predicted, compared in whole seconds as Trimaran compares them
        missing = sum(
            p.predicted_cpu
            for p in placements
            if p.gone_at is None and in_reporting_window(p.bound_at, value.timestamp)
        )
        return Packed(value.value * capacity + missing, capacity)
    if rules.risk is not None:
        return Risked(
            _risk_use(rules.risk.cpu, size.allocatable("cpu"), read),
            _risk_use(rules.risk.memory, size.allocatable("memory"), read),
        )
    return None


def _risk_use(
    pair: tuple[MetricRule, MetricRule] | None, size: float | None, read: Read
) -> ResourceUse | None:
    if pair is None or size is None:
        return None
    (average, added), (stddev, _) = read[pair[0].name], read[pair[1].name]
    if not isinstance(average, Sample):
        return None
    spread = stddev.value if isinstance(stddev, Sample) else 0.0
    return ResourceUse((average.value + added) * size, spread * size, size)


def pod_score(
    strategy: Packed | Risked | None,
    crane_score: int,
    hot: float,
    rules: LoadRules,
    demand: PodDemand,
) -> int:
    """A node's 0..100 score for a pod: the strategy's less the hot-value penalty (as for
    crane's score); with no strategy, crane's score, which does not depend on the pod."""
    if isinstance(strategy, Packed) and rules.packing is not None:
        if strategy.used is None or not strategy.capacity:
            base = 0
        else:
            percent = 100 * (strategy.used + demand.predicted_cpu) / strategy.capacity
            base = target_load_packing(percent, rules.packing.settings.target_utilization)
    elif isinstance(strategy, Risked) and rules.risk is not None:
        base = risk_balancing(
            strategy.cpu, strategy.memory, demand.cpu, demand.memory, rules.risk.settings
        )
    else:
        return crane_score
    return penalised(base, hot)


def penalised(score: int, hot: float) -> int:
    """``clamp(score - int(hot·10), 0, 100)``."""
    penalty = int(min(hot * 10, MAX_NODE_SCORE + 1.0)) if hot > 0 else 0
    return min(max(score - penalty, 0), MAX_NODE_SCORE)


def demand_of(pod: Pod, rules: LoadRules) -> PodDemand:
    """What ``pod`` brings to a node, as the configured strategy reads it; a pod whose resources
    are malformed brings nothing (kube-scheduler refuses such a pod before asking)."""
    if rules.packing is None and rules.risk is None:
        return NO_DEMAND
    try:
        request = pod.request()
        predicted = (
            predicted_cpu(pod.container_resources(), pod.overhead(), rules.packing.settings)
            if rules.packing is not None
            else 0.0
        )
    except ValueError:
        return NO_DEMAND
    return PodDemand(
        predicted_cpu=predicted,
        cpu=float(request.get("cpu", 0)),
        memory=float(request.get("memory", 0)),
    )


def placement_of(pod: Pod, bound_at: datetime, rules: LoadRules) -> Placement:
    """``pod``, bound at ``bound_at``, as estimation and TargetLoadPacking read it."""
    demand = demand_of(pod, rules) if rules.packing is not None else NO_DEMAND
    try:
        request = pod.request()
    except ValueError:
        request = {}
    try:
        limit = pod.limit()
    except ValueError:
        limit = {}
    return Placement(
        uid=pod.metadata.uid,
        bound_at=bound_at,
        cpu=float(request.get("cpu", 0)),
        memory=float(request.get("memory", 0)),
        cpu_limit=float(limit.get("cpu", 0)),
        memory_limit=float(limit.get("memory", 0)),
        predicted_cpu=demand.predicted_cpu,
        ready_at=ready_time(pod),
    )


def pod_need(pod: Pod, rules: LoadRules) -> Need | None:
    """What estimation takes ``pod`` to use once placed; ``None`` when estimation is off."""
    if rules.estimation is None:
        return None
    return need_of(placement_of(pod, _EPOCH, rules), rules.estimation)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def ready_time(pod: Pod) -> datetime | None:
    """When ``pod`` became Ready; ``None`` when it is not, or the time is malformed."""
    stamp = pod.ready_at()
    return parse_timestamp(stamp) if stamp else None


def in_reporting_window(bound_at: datetime, sample_at: datetime) -> bool:
    """Whether a pod bound at ``bound_at`` may be missing from a sample taken at ``sample_at``,
    as Trimaran decides it (``targetloadpacking.go``): in whole Unix seconds, bound after the
    sample, or less than :data:`REPORTING_INTERVAL` before it. For a sample at 1000 s, a pod
    bound at 940.4 s is out (1000 - 940 = 60), though it was bound only 59.6 s before; one
    bound at 941.5 s is in."""
    bound, end = math.floor(bound_at.timestamp()), math.floor(sample_at.timestamp())
    return bound > end or end - bound < REPORTING_INTERVAL.total_seconds()
