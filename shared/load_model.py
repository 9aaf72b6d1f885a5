"""The load model: crane-scheduler's filter and score semantics, as pure functions, with
loadsched's estimation, per-node limits and Trimaran's strategies beside them.

- Filter: for each predicate in order, a missing or stale value is skipped (fail-open, crane's
  behaviour) or rejects the node (fail-closed); a limit of 0 is off; ``usage > limit`` (strict)
  rejects the node. DaemonSet pods are never filtered (the caller checks the pod). A node's
  ``loadsched.io/predicate-limits`` annotation overrides the policy's limits for that node.
- Score (0..100): ``S = Σ valid (1-u)·w·100``, ``W = Σ all w`` (invalid metrics keep their
  weight), ``s = int(S/W)``, ``final = clamp(s - int(hot·10), 0, 100)``. S and W are summed
  left to right in float64 as crane does (never ``sum()``: since Python 3.12 it compensates
  rounding and can differ from crane by one point). Where crane's float arithmetic leaves the
  finite range (a usage of ``+Inf`` or ``1e308``) crane's clamped result is 0, and so is ours.
  With ``spec.scoring`` a Trimaran strategy (:mod:`shared.scoring`) gives ``s`` instead; it
  depends on the pod, so the verdict carries its inputs and :func:`pod_score` finishes it.
- Estimation (``spec.estimation``): ``u`` is the measured value plus the share of the node the
  sample misses of the pods bound to it (:mod:`shared.estimation`), in filter and score. The
  filter then counts the pod being placed too (as Koordinator's does): a passing node keeps,
  per resource, the room its tightest predicate leaves (:class:`Headroom`), and a pod whose
  estimate is more than that room is refused there (:func:`refusal_for`). The score leaves
  the pod out: it would add the same to every node of a size.
- Freshness: :mod:`shared.freshness`.

Time is always passed in (``now``); nothing here reads the clock.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Literal

from shared.annotations import Reading, Sample, Unknown, UnknownReason, decode
from shared.crane_policy import HOT_VALUE_ACTIVE_PERIOD, HotValuePolicy
from shared.estimation import Need, NodeSize, Placement, estimated_share
from shared.freshness import MAX_CLOCK_SKEW, fresh_value, future_detail
from shared.policy import HOT_VALUE_KEY, NODE_LIMITS_KEY
from shared.policy_fields import Resource
from shared.rules import LoadRules, MetricRule, decode_limits, ordered_sum
from shared.strategies import Packed, PodDemand, Risked, strategy_inputs

__all__ = [
    "MAX_CLOCK_SKEW",
    "LoadRules",
    "MetricRule",
    "Need",
    "PodDemand",
    "fresh_value",
    "future_detail",
    "ordered_sum",
]

MAX_NODE_SCORE = 100
MAX_EXTENDER_SCORE = 10


@dataclass(frozen=True, slots=True)
class NodeLoad:
    """The decoded annotations of one node, as the rules read them."""

    node: str
    readings: Mapping[str, Reading]
    """By annotation key, including the hot value key."""
    limits: Mapping[str, float] = field(default_factory=dict)
    """Predicate limits this node's annotation overrides."""
    limits_error: str | None = None
    """Why the node's limits annotation was ignored, when it was."""
    size: NodeSize = NodeSize()

    @classmethod
    def from_annotations(
        cls,
        node: str,
        annotations: Mapping[str, str] | None,
        rules: LoadRules,
        size: NodeSize | None = None,
    ) -> NodeLoad:
        source = annotations or {}
        limits, error = decode_limits(source.get(NODE_LIMITS_KEY), rules)
        return cls(
            node,
            {key: decode(source.get(key), rules.zone) for key in rules.keys},
            limits,
            error,
            size or NodeSize(),
        )


Role = Literal["predicate", "priority", "strategy"]


@dataclass(frozen=True, slots=True)
class MetricTerm:
    """How one metric counted in a verdict (what explain shows)."""

    metric: str
    role: Role
    state: UnknownReason | Literal["fresh"]
    measured: float | None
    """The annotation's value, when fresh."""
    sampled_at: datetime | None
    estimated: float
    """Added for pods the sample does not show yet, net of what it still holds of pods gone
    (negative when those weigh more)."""
    threshold: float
    """The limit (predicate, ``limit_from`` says whose) or the weight (priority)."""
    limit_from: Literal["policy", "node"] = "policy"
    decided: bool = False
    """This predicate rejected the node."""
    points: float = 0.0
    """A priority's share of the 0..100 score: ``(1-u)·w·100 / W``."""

    @property
    def value(self) -> float | None:
        return None if self.measured is None else self.measured + self.estimated


@dataclass(frozen=True, slots=True)
class Headroom:
    """What a passing node takes of one resource before its tightest predicate on that
    resource would reject it (estimation): the pod being placed must fit in it."""

    resource: Resource
    left: float
    """Cores or bytes: ``(limit - measured - estimated) × size``."""
    metric: str
    measured: float
    estimated: float
    limit: float
    size: float
    """The node's capacity of the resource, which the metric is a fraction of."""


WITH_POD = "overloaded-with-pod"
"""The reason of a refusal that only the pod being placed causes."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the extender answers for one node, and until when the answer holds."""

    overload: str | None
    """The rejection message, or ``None`` when the node passes the filter."""
    overload_metric: str | None
    overload_reason: tuple[str, str] | None
    """(metric, why): ``overloaded``, or why the value was unknown when failClosed."""
    score: int
    """0..100, crane's scale (crane's least-loaded score, whatever the strategy)."""
    unknown: tuple[tuple[str, UnknownReason], ...]
    """Metrics read as unknown, stale or future (for metrics and logs); the hot value key too
    when its value is unusable for another reason than being missing or stale."""
    valid_until: datetime | None
    """When a fresh value used here goes stale; ``None`` if time cannot change the verdict."""
    extender_score: int
    """``score`` on the extender protocol's 0..10 scale."""
    terms: tuple[MetricTerm, ...] = ()
    hot: float = 0.0
    """The fresh hot value (0 when none)."""
    strategy: Packed | Risked | None = None
    """A strategy's inputs: the score then depends on the pod (:func:`pod_score`)."""
    limits_error: str | None = None
    placed: int = 0
    """Pods bound to the node that estimation counted."""
    headrooms: tuple[Headroom, ...] = ()
    """With estimation, for a passing node: the room left per resource (at most one each)."""


def short_headroom(verdict: Verdict, need: Need) -> Headroom | None:
    """The first room of a node that passes on its own that a pod estimated at ``need`` does
    not fit in; ``None`` when it fits in every one."""
    return next(
        (headroom for headroom in verdict.headrooms if need.of(headroom.resource) > headroom.left),
        None,
    )


def refusal_for(verdict: Verdict, need: Need, node: str) -> tuple[str, tuple[str, str]] | None:
    """Why a node that passes on its own refuses a pod estimated at ``need``: its message and
    (metric, :data:`WITH_POD`); ``None`` when the pod fits in every headroom."""
    headroom = short_headroom(verdict, need)
    if headroom is None:
        return None
    share = need.of(headroom.resource) / headroom.size
    total = headroom.measured + headroom.estimated + share
    return (
        f"Load[{headroom.metric}]={total:.5f} of node[{node}] with this pod is above "
        f"{headroom.limit:g} ({headroom.measured:.5f} measured {_estimated(headroom.estimated)}"
        f" + {share:.5f} this pod)",
        (headroom.metric, WITH_POD),
    )


MessageStyle = Literal["per-node", "per-reason"]
"""How a refusal is worded in the filter answer: ``per-node``, crane's message with the node
and its value (``Load[cpu_usage_avg_5m]=0.81200 of node[n3] is above 0.65``); ``per-reason``,
the same words for every node refused for the same reason (``node(s) with
Load[cpu_usage_avg_5m] above 0.65``), which kube-scheduler counts as one reason in the pod's
``FailedScheduling`` event and ``PodScheduled`` condition (``0/5000 nodes are available: 3201
node(s) with ...``) instead of listing every node."""


def reason_message(verdict: Verdict, hot_limit: int) -> str:
    """The ``per-reason`` wording of the refusal of ``verdict`` (one that rejects its node):
    the metric and the limit, never the node nor its value."""
    metric, why = verdict.overload_reason or ("*", "overloaded")
    if why != "overloaded":
        return f"node(s) with Load[{metric}] {why} (staleData is failClosed)"
    if metric == HOT_VALUE_KEY:
        return f"node(s) with a hot value above hotValueLimit {hot_limit}"
    term = next((t for t in verdict.terms if t.decided), None)
    if term is None:
        return f"node(s) with Load[{metric}] above its limit"
    placed = " with the pods the sample does not show yet" if term.estimated > 0 else ""
    return f"node(s) with Load[{term.metric}] above {term.threshold:g}{placed}"


def reason_refusal_for(verdict: Verdict, need: Need) -> tuple[str, tuple[str, str]] | None:
    """:func:`refusal_for` in the ``per-reason`` wording."""
    headroom = short_headroom(verdict, need)
    if headroom is None:
        return None
    return (
        f"node(s) with Load[{headroom.metric}] above {headroom.limit:g} with this pod",
        (headroom.metric, WITH_POD),
    )


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


def overload_message(
    metric: str, value: float, node: str, limit: float, estimated: float = 0.0
) -> str:
    """crane's message; with an estimate, the total and what it is made of."""
    if estimated:
        return (
            f"Load[{metric}]={value + estimated:.5f} of node[{node}] is above {limit:g} "
            f"({value:.5f} measured {_estimated(estimated)})"
        )
    return f"Load[{metric}]={value:.5f} of node[{node}] is above {limit:g}"


def _estimated(estimated: float) -> str:
    """What estimation adds (pods the sample does not show yet) or, net, takes off (pods gone
    that it still shows)."""
    if estimated >= 0:
        return f"+ {estimated:.5f} estimated for pods the sample does not show yet"
    return f"- {-estimated:.5f} estimated for pods gone that the sample still shows"


def hot_message(hot: float, node: str, limit: int) -> str:
    return f"Hot value {hot:g} of node[{node}] is above hotValueLimit {limit}"


def unknown_message(metric: str, node: str, unknown: Unknown) -> str:
    detail = f" ({unknown.detail})" if unknown.detail else ""
    return f"Load[{metric}] of node[{node}] is {unknown.reason}{detail}; staleData is failClosed"


def evaluate(
    load: NodeLoad, rules: LoadRules, now: datetime, placements: Sequence[Placement] = ()
) -> Verdict:
    """Filter and score one node at ``now``, with the pods recently bound to it."""
    unknown: dict[str, UnknownReason] = {}
    expiries: list[datetime] = []
    terms: list[MetricTerm] = []
    estimation = rules.estimation
    placed = placements if estimation is not None else ()

    def read(rule: MetricRule) -> tuple[Sample | Unknown, float]:
        """The fresh sample (or why not) and what estimation adds to it."""
        value, changes_at = fresh_value(
            load.readings.get(rule.name, Unknown("missing")), rule.window, now
        )
        if isinstance(value, Unknown):
            unknown[rule.name] = value.reason
        if changes_at is not None:
            expiries.append(changes_at)
        added = 0.0
        if placed and isinstance(value, Sample) and rule.resource and rule.coverage:
            size = load.size.capacity(rule.resource)
            if size and estimation is not None:
                added = estimated_share(
                    placed,
                    resource=rule.resource,
                    sample_at=value.timestamp - rule.delay,
                    window=rule.coverage,
                    size=size,
                    policy=estimation,
                    releases=rule.releases,
                )
                # pods gone take off at most what the sample holds
                added = max(added, -value.value)
        return value, added

    overload: str | None = None
    reason: tuple[str, str] | None = None
    headrooms: dict[Resource, Headroom] = {}
    for rule in rules.predicates:
        value, added = read(rule)
        limit = load.limits.get(rule.name, rule.threshold)
        if estimation is not None and rule.resource and limit and isinstance(value, Sample):
            headroom = _headroom(rule.name, rule.resource, value.value, added, limit, load.size)
            kept = headrooms.get(rule.resource)
            if headroom is not None and (kept is None or headroom.left < kept.left):
                headrooms[rule.resource] = headroom
        term = _term(rule, "predicate", value, added, limit)
        if rule.name in load.limits:
            term = _with(term, limit_from="node")
        if overload is None:
            if isinstance(value, Unknown):
                if rules.fail_closed:
                    overload = unknown_message(rule.name, load.node, value)
                    reason = (rule.name, value.reason)
                    term = _with(term, decided=True)
            # +Inf and huge values are above every limit; a limit of 0 is off
            elif limit and value.value + added > limit:
                overload = overload_message(rule.name, value.value, load.node, limit, added)
                reason = (rule.name, "overloaded")
                term = _with(term, decided=True)
        terms.append(term)

    weighted = 0.0  # crane: score += (1 - u) * w * 100, in order (never sum())
    total = rules.total_weight
    for rule in rules.priorities:
        value, added = read(rule)
        points = 0.0
        if isinstance(value, Sample):
            share = (1.0 - (value.value + added)) * rule.threshold * MAX_NODE_SCORE
            weighted += share
            points = share / total if total > 0 else 0.0
        terms.append(_with(_term(rule, "priority", value, added, rule.threshold), points=points))
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
    hot_now = hot.value if isinstance(hot, Sample) else 0.0
    score = node_score(weighted, total, hot_now)
    readings = {}
    for rule in rules.strategy_metrics:
        value, added = read(rule)
        readings[rule.name] = (value, added)
        terms.append(_term(rule, "strategy", value, added, 0.0))
    strategy = strategy_inputs(load.size, rules, placements, readings)
    return Verdict(
        overload=overload,
        overload_metric=reason[0] if reason else None,
        overload_reason=reason,
        score=score,
        extender_score=to_extender_score(score),
        unknown=tuple(unknown.items()),
        valid_until=min(expiries) if expiries else None,
        terms=tuple(terms),
        hot=hot_now,
        strategy=strategy,
        limits_error=load.limits_error,
        placed=sum(1 for p in placed if p.gone_at is None),
        headrooms=tuple(headrooms.values()) if overload is None else (),
    )


def _headroom(
    metric: str, resource: Resource, measured: float, added: float, limit: float, size: NodeSize
) -> Headroom | None:
    capacity = size.capacity(resource)
    if not capacity or not math.isfinite(measured):
        return None
    left = (limit - measured - added) * capacity
    return Headroom(resource, left, metric, measured, added, limit, capacity)


def _term(
    rule: MetricRule, role: Role, value: Sample | Unknown, added: float, threshold: float
) -> MetricTerm:
    if isinstance(value, Sample):
        return MetricTerm(rule.name, role, "fresh", value.value, value.timestamp, added, threshold)
    return MetricTerm(rule.name, role, value.reason, None, None, 0.0, threshold)


def _with(term: MetricTerm, **changes: object) -> MetricTerm:
    return replace(term, **changes)  # type: ignore[arg-type]


def to_extender_score(score: int) -> int:
    """crane's 0..100 score on the extender protocol's 0..10, rounded half up."""
    return min(max((score + 5) // 10, 0), MAX_EXTENDER_SCORE)


def normalized_table(scores: Sequence[int | None]) -> list[int]:
    """``spec.scoring.normalize: minMax``: the 0..10 answered for each 0..100 score (index),
    given the scores of the nodes asked about (``None`` for a node with none): the lowest known
    score 0, the highest 10, linear between, rounded half up. When every known score is the
    same there is nothing to spread, and crane's :func:`to_extender_score` applies.

    The protocol carries only 0..10, so crane's mapping ties nodes up to ten points apart (a
    20-point CPU difference when memory weighs the same) and kube-scheduler's request-based
    scores then decide; spread over the nodes asked about, any difference in load counts."""
    known: Sequence[int] = (
        [s for s in scores if s is not None] if None in scores else scores  # type: ignore[assignment]
    )
    return spread_table(min(known), max(known)) if known else spread_table(0, 0)


def spread_table(low: int, high: int) -> list[int]:
    """:func:`normalized_table` for known scores from ``low`` to ``high``."""
    if high <= low:
        return [to_extender_score(s) for s in range(MAX_NODE_SCORE + 1)]
    span = high - low
    return [
        min(max((20 * (s - low) + span) // (2 * span), 0), MAX_EXTENDER_SCORE)
        for s in range(MAX_NODE_SCORE + 1)
    ]


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
