"""The load model: crane-scheduler's filter and score semantics, as pure functions.

- Filter: for each predicate in order, a missing or stale value is skipped (fail-open, crane's
  behaviour) or rejects the node (fail-closed); a limit of 0 is off; ``usage > limit`` (strict)
  rejects the node. DaemonSet pods are never filtered (the caller checks the pod).
- Score (0..100): ``S = Σ valid (1-u)·w·100``, ``W = Σ all w`` (invalid metrics keep their
  weight), ``s = int(S/W)``, ``final = clamp(s - int(hot·10), 0, 100)``.
- Freshness: a metric value is fresh iff ``now < ts + period + 5m``; the hot value for 5m.

Time is always passed in (``now``); nothing here reads the clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo

from shared.annotations import Reading, Sample, Unknown, UnknownReason, decode
from shared.policy import (
    EXTRA_ACTIVE_PERIOD,
    HOT_VALUE_ACTIVE_PERIOD,
    HOT_VALUE_KEY,
    DynamicSchedulerPolicy,
    HotValuePolicy,
)

MAX_NODE_SCORE = 100
MAX_EXTENDER_SCORE = 10


@dataclass(frozen=True, slots=True)
class MetricRule:
    """One predicate or priority entry with its freshness window resolved."""

    name: str
    threshold: float
    """The limit for a predicate, the weight for a priority."""
    window: timedelta


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

    @classmethod
    def from_policy(cls, policy: DynamicSchedulerPolicy) -> LoadRules:
        spec = policy.spec

        def window(name: str) -> timedelta:
            return policy.period_of(name) + EXTRA_ACTIVE_PERIOD

        predicates = tuple(
            MetricRule(p.name, p.max_limit_percent, window(p.name)) for p in spec.predicate
        )
        priorities = tuple(MetricRule(p.name, p.weight, window(p.name)) for p in spec.priority)
        names = dict.fromkeys([r.name for r in predicates + priorities] + [HOT_VALUE_KEY])
        return cls(
            predicates=predicates,
            priorities=priorities,
            total_weight=sum(p.threshold for p in priorities),
            fail_closed=spec.stale_data == "failClosed",
            zone=policy.zone,
            keys=tuple(names),
        )


@dataclass(frozen=True, slots=True)
class NodeLoad:
    """The decoded annotations of one node, as the rules read them."""

    node: str
    readings: Mapping[str, Reading]
    """By annotation key, including the hot value key."""

    @classmethod
    def from_annotations(
        cls, node: str, annotations: Mapping[str, str] | None, rules: LoadRules
    ) -> NodeLoad:
        source = annotations or {}
        return cls(node, {key: decode(source.get(key), rules.zone) for key in rules.keys})


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the extender answers for one node, and until when the answer holds."""

    overload: str | None
    """The rejection message, or ``None`` when the node passes the filter."""
    overload_metric: str | None
    overload_reason: tuple[str, str] | None
    """(metric, why): ``overloaded``, or why the value was unknown when failClosed."""
    score: int
    """0..100, crane's scale."""
    unknown: tuple[tuple[str, UnknownReason], ...]
    """Metrics read as unknown or stale (for metrics and logs)."""
    valid_until: datetime | None
    """When a fresh value used here goes stale; ``None`` if time cannot change the verdict."""
    extender_score: int
    """``score`` on the extender protocol's 0..10 scale."""


def fresh_value(reading: Reading, window: timedelta, now: datetime) -> Sample | Unknown:
    """The reading if it is a sample still inside its freshness window, else why not."""
    if isinstance(reading, Unknown):
        return reading
    if now < reading.timestamp + window:
        return reading
    return Unknown("stale", f"measured at {reading.timestamp.isoformat()}")


def overload_message(metric: str, value: float, node: str, limit: float) -> str:
    return f"Load[{metric}]={value:.5f} of node[{node}] is above {limit:g}"


def unknown_message(metric: str, node: str, unknown: Unknown) -> str:
    detail = f" ({unknown.detail})" if unknown.detail else ""
    return f"Load[{metric}] of node[{node}] is {unknown.reason}{detail}; staleData is failClosed"


def evaluate(load: NodeLoad, rules: LoadRules, now: datetime) -> Verdict:
    """Filter and score one node at ``now``."""
    unknown: dict[str, UnknownReason] = {}
    expiries: list[datetime] = []

    def read(name: str, window: timedelta) -> Sample | Unknown:
        value = fresh_value(load.readings.get(name, Unknown("missing")), window, now)
        if isinstance(value, Unknown):
            unknown[name] = value.reason
        else:
            expiries.append(value.timestamp + window)
        return value

    overload: str | None = None
    reason: tuple[str, str] | None = None
    for rule in rules.predicates:
        value = read(rule.name, rule.window)
        if isinstance(value, Unknown):
            if rules.fail_closed:
                overload = unknown_message(rule.name, load.node, value)
                reason = (rule.name, value.reason)
                break
            continue
        if rule.threshold and value.value > rule.threshold:
            overload = overload_message(rule.name, value.value, load.node, rule.threshold)
            reason = (rule.name, "overloaded")
            break

    weighted = 0.0
    for rule in rules.priorities:
        value = read(rule.name, rule.window)
        if isinstance(value, Sample):
            weighted += (1.0 - value.value) * rule.threshold * MAX_NODE_SCORE
    base = int(weighted / rules.total_weight) if rules.total_weight > 0 else 0
    hot_reading = load.readings.get(HOT_VALUE_KEY, Unknown("missing"))
    hot = fresh_value(hot_reading, HOT_VALUE_ACTIVE_PERIOD, now)
    hot_penalty = 0
    if isinstance(hot, Sample):
        hot_penalty = int(hot.value * 10)
        expiries.append(hot.timestamp + HOT_VALUE_ACTIVE_PERIOD)
    score = min(max(base - hot_penalty, 0), MAX_NODE_SCORE)
    return Verdict(
        overload=overload,
        overload_metric=reason[0] if reason else None,
        overload_reason=reason,
        score=score,
        extender_score=to_extender_score(score),
        unknown=tuple(unknown.items()),
        valid_until=min(expiries) if expiries else None,
    )


def to_extender_score(score: int) -> int:
    """crane's 0..100 score on the extender protocol's 0..10, rounded half up."""
    return min(max((score + 5) // 10, 0), MAX_EXTENDER_SCORE)


def hot_value(
    binding_times: Iterable[datetime], entries: Sequence[HotValuePolicy], now: datetime
) -> int:
    """``Σ_entries floor(bindings within entry.timeRange / entry.count)``.

    A binding at ``t`` is within ``timeRange`` iff ``now - timeRange < t <= now``.
    """
    times = list(binding_times)
    total = 0
    for entry in entries:
        since = now - entry.time_range
        recent = sum(1 for t in times if since < t <= now)
        total += recent // entry.count
    return total
