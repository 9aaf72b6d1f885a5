"""When the rebalancer acts on a node: its thresholds compiled from the policy, and the
streaks of rounds of fresh data each node's metrics have stayed above ``high``
(:class:`OverloadTracker`), and the order the nodes are acted on in
(:func:`furthest_over_first`). Pure: time is passed in."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo
from typing import Literal

from shared.annotations import Reading, Sample, Unknown, decode
from shared.crane_policy import EXTRA_ACTIVE_PERIOD
from shared.freshness import fresh_value
from shared.policy import DynamicSchedulerPolicy
from shared.policy_fields import Resource


@dataclass(frozen=True, slots=True)
class Threshold:
    """One ``spec.rebalance`` threshold, compiled."""

    metric: str
    resource: Resource
    high: float
    low: float
    window: timedelta
    """How long a value stays fresh (its sync period + 5m)."""
    settle: timedelta
    """How long after a pod left the value can still hold it: its window and delay (for a
    maximum, the freshness window: it holds a pod longer than it takes to show it)."""


def thresholds_of(policy: DynamicSchedulerPolicy) -> tuple[Threshold, ...]:
    syncs = {s.name: s for s in policy.spec.sync_policy}
    compiled = []
    for threshold in policy.spec.rebalance_thresholds():
        sync = syncs[threshold.metric]
        resource = sync.measures
        if resource is None:  # the policy refuses it; here for the type checker
            continue
        window = sync.period + EXTRA_ACTIVE_PERIOD
        coverage = sync.coverage
        settle = coverage + sync.lag if coverage is not None and sync.releases else window
        compiled.append(
            Threshold(
                threshold.metric, resource, threshold.high, threshold.low_or_default, window, settle
            )
        )
    return tuple(compiled)


NodeState = Literal["over", "under", "stale", "held", "waiting"]


@dataclass(frozen=True, slots=True)
class MetricState:
    metric: str
    value: float | None
    """The fresh value (a fraction), else ``None``."""
    sampled_at: datetime | None
    high: float
    low: float
    streak: int
    reason: str = "fresh"
    """``fresh``, or why the value is unknown (missing, stale, future, malformed...)."""


@dataclass(frozen=True, slots=True)
class Observation:
    """A node after a round."""

    node: str
    state: NodeState
    """``over``: acted on this round; ``waiting``: above ``high`` for fewer rounds than
    needed; ``held``: pods were moved off it lately; ``stale``: a value is unknown."""
    metrics: tuple[MetricState, ...]
    acting: MetricState | None = None
    """The metric acted on: of those whose streak is complete, the furthest above ``high``."""

    @property
    def under_low(self) -> bool:
        """Every value fresh and under its ``low``."""
        return all(m.value is not None and m.value < m.low for m in self.metrics)


@dataclass
class _Streak:
    count: int = 0
    sampled_at: datetime | None = None


class OverloadTracker:
    """Streaks of fresh rounds above ``high``, per node and metric."""

    def __init__(self, thresholds: Sequence[Threshold], rounds: int) -> None:
        self.thresholds = tuple(thresholds)
        self.rounds = rounds
        self._streaks: dict[tuple[str, str], _Streak] = {}
        self._held: dict[str, datetime] = {}

    def forget(self, keep: Iterable[str]) -> None:
        """Drop nodes not in ``keep`` (deleted)."""
        kept = set(keep)
        self._streaks = {k: v for k, v in self._streaks.items() if k[0] in kept}
        self._held = {k: v for k, v in self._held.items() if k in kept}

    def hold(self, node: str, now: datetime) -> None:
        """Pods were moved off ``node``: no streak counts until its metrics can show it."""
        settle = max((t.settle for t in self.thresholds), default=timedelta(0))
        until = now + settle
        self._held[node] = until
        for threshold in self.thresholds:
            # a sample taken before the hold ends still shows the pods moved: it never counts
            self._streaks[(node, threshold.metric)] = _Streak(0, until)

    def observe(
        self, node: str, annotations: Mapping[str, str] | None, zone: tzinfo, now: datetime
    ) -> Observation:
        source = annotations or {}
        held = self._held.get(node)
        if held is not None and now >= held:
            del self._held[node]
            held = None
        states: list[MetricState] = []
        stale = False
        for threshold in self.thresholds:
            key = (node, threshold.metric)
            reading: Reading = decode(source.get(threshold.metric), zone)
            value, _ = fresh_value(reading, threshold.window, now)
            if isinstance(value, Sample) and not math.isfinite(value.value):
                value = Unknown("not-finite")  # +Inf would make every pod the overshoot
            streak = self._streaks.setdefault(key, _Streak())
            if isinstance(value, Unknown):
                stale = True
                streak.count = 0  # the last sample counted stays: only a later one counts
                states.append(
                    MetricState(
                        threshold.metric,
                        None,
                        None,
                        threshold.high,
                        threshold.low,
                        0,
                        value.reason,
                    )
                )
                continue
            sample: Sample = value
            if held is None and (streak.sampled_at is None or sample.timestamp > streak.sampled_at):
                streak.sampled_at = sample.timestamp
                streak.count = streak.count + 1 if sample.value > threshold.high else 0
            states.append(
                MetricState(
                    threshold.metric,
                    sample.value,
                    sample.timestamp,
                    threshold.high,
                    threshold.low,
                    streak.count,
                )
            )
        metrics = tuple(states)
        if stale:
            return Observation(node, "stale", metrics)
        if held is not None:
            return Observation(node, "held", metrics)
        complete = [
            m
            for m in metrics
            if m.streak >= self.rounds and m.value is not None and m.value > m.high
        ]
        if complete:
            acting = max(complete, key=lambda m: ((m.value or 0.0) - m.high) / m.high)
            return Observation(node, "over", metrics, acting)
        if any(m.value is not None and m.value > m.high for m in metrics):
            return Observation(node, "waiting", metrics)
        return Observation(node, "under", metrics)


def furthest_over_first(observations: Iterable[Observation]) -> list[Observation]:
    """The nodes acted on this round (``over``), furthest above ``high`` first."""
    return sorted((o for o in observations if o.state == "over"), key=lambda o: -_excess(o))


def _excess(observation: Observation) -> float:
    acting = observation.acting
    if acting is None or acting.value is None:
        return 0.0
    return (acting.value - acting.high) / acting.high
