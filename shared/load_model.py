"""The load model: crane-scheduler's filter and score semantics, as pure functions.

- Filter: for each predicate in order, a missing or stale value is skipped (fail-open, crane's
  behaviour) or rejects the node (fail-closed); a limit of 0 is off; ``usage > limit`` (strict)
  rejects the node. DaemonSet pods are never filtered (the caller checks the pod).
- Score (0..100): ``S = Σ valid (1-u)·w·100``, ``W = Σ all w`` (invalid metrics keep their
  weight), ``s = int(S/W)``, ``final = clamp(s - int(hot·10), 0, 100)``. S and W are summed
  left to right in float64 as crane does (never ``sum()``: since Python 3.12 it compensates
  rounding and can differ from crane by one point). Where crane's float arithmetic leaves the
  finite range (a usage of ``+Inf`` or ``1e308``) crane's clamped result is 0, and so is ours.
- Freshness: a metric value is fresh iff ``now < ts + period + 5m``; the hot value for 5m. A
  timestamp more than :data:`MAX_CLOCK_SKEW` ahead of ``now`` is never fresh (``future``).
  Datetime arithmetic is done on differences, so no timestamp (year 1 or 9999) can overflow.

Time is always passed in (``now``); nothing here reads the clock.
"""

from __future__ import annotations

import math
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
MAX_CLOCK_SKEW = timedelta(minutes=1)
"""A timestamp up to this far ahead of ``now`` reads as current (the annotator's clock may run
a little ahead of the extender's); further ahead it is unknown (``future``), never fresh. A value
written in local time and read as UTC east of Greenwich lands hours ahead: that is a
``spec.timestampZone`` mismatch, not clock skew."""
_LONGEST_VALIDITY = timedelta(days=1)
"""A verdict is re-evaluated at least this often, so that a future timestamp or an absurdly long
sync period never needs a datetime beyond year 9999."""


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
    hot_limit: int = 0
    """Refuse a node whose fresh hot value is above this; 0 is off."""

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
            total_weight=ordered_sum(p.threshold for p in priorities),
            fail_closed=spec.stale_data == "failClosed",
            zone=policy.zone,
            keys=tuple(names),
            hot_limit=spec.hot_value_limit,
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
    """Metrics read as unknown, stale or future (for metrics and logs); the hot value key too
    when its value is unusable for another reason than being missing or stale."""
    valid_until: datetime | None
    """When a fresh value used here goes stale; ``None`` if time cannot change the verdict."""
    extender_score: int
    """``score`` on the extender protocol's 0..10 scale."""


def ordered_sum(values: Iterable[float]) -> float:
    """Left-to-right float64 addition, as crane's Go loop does (``sum()`` compensates)."""
    total = 0.0
    for value in values:
        total += value
    return total


def future_detail(timestamp: datetime, ahead: timedelta) -> str:
    """Why a timestamp ``ahead`` of now is not used, pointing at the likely cause."""
    minutes = int(ahead.total_seconds()) // 60
    return (
        f"timestamp {timestamp.strftime('%Y-%m-%dT%H:%M:%SZ')} read in {timestamp.tzinfo} is "
        f"{minutes // 60}h{minutes % 60:02d}m ahead of now: annotations written in local time? "
        "set spec.timestampZone"
    )


def fresh_value(
    reading: Reading, window: timedelta, now: datetime
) -> tuple[Sample | Unknown, datetime | None]:
    """The reading if it is a sample inside its freshness window, else why not; and when the
    passing of time changes that (``None``: never).

    Only differences of datetimes are taken (``now - timestamp``, never ``timestamp + window``):
    a timedelta spans any two datetimes, a datetime plus a timedelta may leave year 1..9999.
    """
    if isinstance(reading, Unknown):
        return reading, None
    age = now - reading.timestamp
    if -age > MAX_CLOCK_SKEW:
        ahead = -age
        return (
            Unknown("future", future_detail(reading.timestamp, ahead)),
            now + min(ahead - MAX_CLOCK_SKEW, _LONGEST_VALIDITY),
        )
    if age < window:
        return reading, now + min(window - age, _LONGEST_VALIDITY)
    return Unknown("stale", f"measured at {reading.timestamp.isoformat()}"), None


def node_score(weighted: float, total_weight: float, hot: float) -> int:
    """crane's ``clamp(int(S/W) - int(hot·10), 0, 100)``, finite for any input.

    Go converts a non-finite or out-of-range float to the minimum int64, which crane's clamp
    turns into 0; Python's ``int()`` would raise instead. A hot value of ``+Inf`` scores 0.
    """
    if not total_weight > 0:
        return 0
    mean = weighted / total_weight
    if not math.isfinite(mean):
        return 0
    base = int(min(max(mean, -1.0), MAX_NODE_SCORE + 1.0))
    penalty = int(min(hot * 10, MAX_NODE_SCORE + 1.0)) if hot > 0 else 0
    return min(max(base - penalty, 0), MAX_NODE_SCORE)


def overload_message(metric: str, value: float, node: str, limit: float) -> str:
    return f"Load[{metric}]={value:.5f} of node[{node}] is above {limit:g}"


def hot_message(hot: float, node: str, limit: int) -> str:
    return f"Hot value {hot:g} of node[{node}] is above hotValueLimit {limit}"


def unknown_message(metric: str, node: str, unknown: Unknown) -> str:
    detail = f" ({unknown.detail})" if unknown.detail else ""
    return f"Load[{metric}] of node[{node}] is {unknown.reason}{detail}; staleData is failClosed"


def evaluate(load: NodeLoad, rules: LoadRules, now: datetime) -> Verdict:
    """Filter and score one node at ``now``."""
    unknown: dict[str, UnknownReason] = {}
    expiries: list[datetime] = []

    def read(name: str, window: timedelta) -> Sample | Unknown:
        value, changes_at = fresh_value(load.readings.get(name, Unknown("missing")), window, now)
        if isinstance(value, Unknown):
            unknown[name] = value.reason
        if changes_at is not None:
            expiries.append(changes_at)
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
        # +Inf and huge values are above every limit; a limit of 0 is off
        if rule.threshold and value.value > rule.threshold:
            overload = overload_message(rule.name, value.value, load.node, rule.threshold)
            reason = (rule.name, "overloaded")
            break

    weighted = 0.0  # crane: score += (1 - u) * w * 100, in order (never sum())
    for rule in rules.priorities:
        value = read(rule.name, rule.window)
        if isinstance(value, Sample):
            weighted += (1.0 - value.value) * rule.threshold * MAX_NODE_SCORE
    hot_reading = load.readings.get(HOT_VALUE_KEY, Unknown("missing"))
    hot, changes_at = fresh_value(hot_reading, HOT_VALUE_ACTIVE_PERIOD, now)
    if changes_at is not None:
        expiries.append(changes_at)
    if isinstance(hot, Unknown) and hot.reason not in ("missing", "stale"):
        unknown[HOT_VALUE_KEY] = hot.reason  # no hot value, or an old one, is normal
    if overload is None and rules.hot_limit and isinstance(hot, Sample):
        if hot.value > rules.hot_limit:
            overload = hot_message(hot.value, load.node, rules.hot_limit)
            reason = (HOT_VALUE_KEY, "overloaded")
    score = node_score(weighted, rules.total_weight, hot.value if isinstance(hot, Sample) else 0.0)
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
