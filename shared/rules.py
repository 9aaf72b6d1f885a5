"""A policy compiled for fast evaluation: each metric's windows resolved, the strategy's metrics
and settings, and a node's own predicate limits (its ``loadsched.io/predicate-limits``
annotation) checked against them. Pure."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta, tzinfo

from shared.crane_policy import EXTRA_ACTIVE_PERIOD
from shared.placement_policy import EstimationPolicy, LoadVariationRiskBalancing, TargetLoadPacking
from shared.policy import HOT_VALUE_KEY, NODE_LIMITS_KEY, DynamicSchedulerPolicy
from shared.policy_fields import Resource
from shared.scoring import REPORTING_INTERVAL


@dataclass(frozen=True, slots=True)
class MetricRule:
    """One predicate, priority or strategy metric with its windows resolved."""

    name: str
    threshold: float
    """The limit for a predicate, the weight for a priority (0 for a strategy's metric)."""
    window: timedelta
    """How long a value stays fresh."""
    resource: Resource | None = None
    coverage: timedelta | None = None
    """How long after a pod starts the value fully shows it; ``None``: never estimated."""
    releases: bool = False
    """The value lets go of a pod ``coverage`` after it left (an average, not a maximum):
    estimation may subtract pods gone (``subtractDeparted``)."""
    delay: timedelta = timedelta(0)
    """How long before its timestamp the value's window ends (``syncPolicy[].delay``)."""


@dataclass(frozen=True, slots=True)
class Packing:
    """TargetLoadPacking compiled: its settings and CPU metric."""

    settings: TargetLoadPacking
    metric: MetricRule


@dataclass(frozen=True, slots=True)
class RiskBalancing:
    """LoadVariationRiskBalancing compiled: its settings and (average, stddev) per resource."""

    settings: LoadVariationRiskBalancing
    cpu: tuple[MetricRule, MetricRule] | None
    memory: tuple[MetricRule, MetricRule] | None


@dataclass(frozen=True, slots=True)
class LoadRules:
    """A policy compiled for fast evaluation."""

    predicates: tuple[MetricRule, ...]
    priorities: tuple[MetricRule, ...]
    total_weight: float
    fail_closed: bool
    zone: tzinfo
    keys: tuple[str, ...]
    """Every annotation key the rules read (metric names and the hot value key)."""
    hot_limit: int = 0
    """Refuse a node whose fresh hot value is above this; 0 is off."""
    estimation: EstimationPolicy | None = None
    """Set when estimation is enabled."""
    packing: Packing | None = None
    risk: RiskBalancing | None = None
    retention: timedelta = timedelta(0)
    """How long after binding a pod can still change a verdict (0: pods are not read)."""
    normalize: bool = False
    """``spec.scoring.normalize: minMax``: prioritize spreads the nodes asked about over
    0..10 (:func:`shared.load_model.normalized_scores`)."""

    @property
    def places_without_headroom(self) -> bool:
        """Estimation's ``whenNoNodeHasRoom: place``: when no node asked about has room for a
        pod, the nodes under their limits on their own pass it."""
        return self.estimation is not None and self.estimation.when_no_node_has_room == "place"

    @property
    def reads_pods(self) -> bool:
        """Whether verdicts depend on the pods bound to the node."""
        return self.retention > timedelta(0)

    @property
    def reads_size(self) -> bool:
        """Whether verdicts depend on the node's capacity and allocatable."""
        return self.estimation is not None or self.packing is not None or self.risk is not None

    @property
    def strategy(self) -> str:
        if self.packing is not None:
            return "targetLoadPacking"
        if self.risk is not None:
            return "loadVariationRiskBalancing"
        return "leastLoaded"

    @classmethod
    def from_policy(cls, policy: DynamicSchedulerPolicy) -> LoadRules:
        spec = policy.spec
        syncs = {s.name: s for s in spec.sync_policy}

        def rule(name: str, threshold: float = 0.0) -> MetricRule:
            sync = syncs[name]
            return MetricRule(
                name,
                threshold,
                sync.period + EXTRA_ACTIVE_PERIOD,
                sync.measures,
                sync.coverage,
                releases=sync.coverage is not None and sync.releases,
                delay=sync.lag,
            )

        predicates = tuple(rule(p.name, p.max_limit_percent) for p in spec.predicate)
        priorities = tuple(rule(p.name, p.weight) for p in spec.priority)
        packing = risk = None
        tlp = spec.scoring.target_load_packing
        if tlp is not None:
            packing = Packing(tlp, rule(tlp.metric))
        lvrb = spec.scoring.load_variation_risk_balancing
        if lvrb is not None:
            risk = RiskBalancing(
                lvrb,
                (rule(lvrb.cpu.average), rule(lvrb.cpu.stddev)) if lvrb.cpu else None,
                (rule(lvrb.memory.average), rule(lvrb.memory.stddev)) if lvrb.memory else None,
            )
        estimation = spec.estimation if spec.estimation.enabled else None
        names = [r.name for r in predicates + priorities]
        names += [name for _, name in spec.scoring.metrics()]
        read = [syncs[name] for name in dict.fromkeys(names)]
        retention = timedelta(0)
        if estimation is not None:
            retention = max(
                (
                    estimation.startup + s.lag + s.coverage + s.period + EXTRA_ACTIVE_PERIOD
                    for s in read
                    if s.coverage
                ),
                default=timedelta(0),
            )
        if packing is not None:
            retention = max(retention, packing.metric.window + REPORTING_INTERVAL)
        return cls(
            predicates=predicates,
            priorities=priorities,
            total_weight=ordered_sum(p.threshold for p in priorities),
            fail_closed=spec.stale_data == "failClosed",
            zone=policy.zone,
            keys=(*dict.fromkeys(names), HOT_VALUE_KEY),
            hot_limit=spec.hot_value_limit,
            estimation=estimation,
            packing=packing,
            risk=risk,
            retention=retention,
            normalize=spec.scoring.normalize == "minMax",
        )

    @property
    def strategy_metrics(self) -> tuple[MetricRule, ...]:
        """The metrics the strategy reads, each once."""
        if self.packing is not None:
            return (self.packing.metric,)
        if self.risk is not None:
            pairs = (self.risk.cpu or ()) + (self.risk.memory or ())
            return tuple({r.name: r for r in pairs}.values())
        return ()


def ordered_sum(values: Iterable[float]) -> float:
    """Left-to-right float64 addition, as crane's Go loop does (``sum()`` compensates)."""
    total = 0.0
    for value in values:
        total += value
    return total


def decode_limits(raw: str | None, rules: LoadRules) -> tuple[dict[str, float], str | None]:
    """A node's predicate limits annotation: a JSON object of predicate metric to a fraction in
    [0, 1]. Anything else is ignored as a whole, with why."""
    if raw is None:
        return {}, None
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return {}, f"{NODE_LIMITS_KEY}: not JSON: {raw[:64]!r}"
    if not isinstance(data, dict):
        return {}, f"{NODE_LIMITS_KEY}: must be a JSON object of metric to fraction"
    known = {r.name for r in rules.predicates}
    limits: dict[str, float] = {}
    for metric, value in data.items():
        if metric not in known:
            return {}, f"{NODE_LIMITS_KEY}: {str(metric)[:64]!r} is not a predicate metric"
        valid = isinstance(value, int | float) and not isinstance(value, bool)
        if not valid or not (math.isfinite(value) and 0 <= value <= 1):
            return {}, f"{NODE_LIMITS_KEY}: {metric}: must be a fraction between 0 and 1"
        limits[metric] = float(value)
    return limits, None
