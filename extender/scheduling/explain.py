"""Why a pod would go where: for every node, the answer filter and prioritize would give a pod
now, with what each metric contributed, and the elastic-quota admission of its namespace.

Nothing here decides anything: the verdicts are the node view's (:meth:`LoadAwareExtender.view`,
the one names-only filter and prioritize read), a node's rejection is
:func:`extender.scheduling.tally.refusal`, its 0..10 is
:func:`extender.scheduling.answers.scaled` over the nodes explained (as prioritize's is over the
nodes asked about), and the quota's decision is the gate's
side-effect-free :meth:`QuotaGate.check`. The models below are the JSON of ``/v1/explain``
(:mod:`extender.scheduling.explain_routes`) and are documented in the OpenAPI schema.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from fractions import Fraction
from typing import Literal

from pydantic import BaseModel, Field

from extender.scheduling.answers import node_score, scaled
from extender.scheduling.quota_gate import QuotaGate
from extender.scheduling.tally import refusal
from extender.scheduling.verbs import LoadAwareExtender
from shared.annotation_keys import REBALANCED_FROM_ANNOTATION
from shared.load_model import WITH_POD, MetricTerm, Verdict
from shared.pods import Pod
from shared.quantity import ResourceList, format_quantity
from shared.quota import ZERO, QuotaRule, QuotaState
from shared.rules import LoadRules
from shared.strategies import PodDemand, demand_of, pod_score

QUOTA_REFUSED = "elasticquota"
"""``rejected_by`` of a node refused because the pod's namespace is over its quota."""
REBALANCED_FROM = REBALANCED_FROM_ANNOTATION
"""``rejected_by`` of a node the rebalancer moved a pod of this pod's workload off lately."""


class MetricExplanation(BaseModel):
    metric: str
    role: Literal["predicate", "priority", "strategy"] = Field(
        description="predicate: may reject the node; priority: weighs in the score; "
        "strategy: read by the configured scoring strategy"
    )
    state: str = Field(description="fresh, missing, stale, future, invalid, ...")
    value: float | None = Field(description="measured + estimated: what was compared and scored")
    measured: float | None = Field(description="the annotation's value, when fresh")
    estimated: float = Field(
        description="added for pods the sample does not show yet, net of what it still holds "
        "of pods gone (estimation; negative when the pods gone weigh more)"
    )
    sampled_at: datetime | None
    age_seconds: float | None = Field(description="how old the sample is now")
    limit: float | None = Field(description="a predicate's limit (0: off)")
    limit_from: Literal["policy", "node"] | None = Field(
        description="node: the node's loadsched.io/predicate-limits annotation"
    )
    weight: float | None = Field(description="a priority's weight")
    decided: bool = Field(description="this metric rejected the node")
    points: float = Field(description="a priority's share of the 0..100 score")


class ScoreExplanation(BaseModel):
    final: int = Field(description="0..10, what prioritize answers (0 for a node not cached)")
    score: int = Field(description="0..100 before the protocol's 0..10 (strategy's if any)")
    least_loaded: int = Field(description="crane's 0..100 least-loaded score, hot value included")
    weighted: float = Field(description="Σ of the priorities' points, before the hot value")
    hot_value: float = Field(description="the fresh hot value (0 when none)")
    hot_penalty: int = Field(description="int(hot value × 10), taken off the score")
    strategy: str | None = Field(description="the pod-dependent strategy that scores, if any")


class NodeExplanation(BaseModel):
    node: str
    passed: bool = Field(description="filter keeps the node for this pod")
    rejected_by: str | None = Field(
        description="the metric that decided, hot value key, * (not cached), elasticquota, or "
        "loadsched.io/rebalanced-from (the rebalancer moved a pod of this workload off it)"
    )
    reason: str | None = Field(
        description="filter's message for the node (kube-scheduler receives it in an answer "
        "that passes no node; --filter-rejections)"
    )
    cached: bool = Field(description="the node is in the extender's node cache")
    placed: int = Field(description="pods bound to the node that estimation counted")
    limits_error: str | None = Field(
        description="why the node's predicate-limits annotation was ignored"
    )
    score: ScoreExplanation
    metrics: list[MetricExplanation]


class QuotaResource(BaseModel):
    resource: str
    request: str
    used: str = Field(description="the namespace's use, other replicas' admissions included")
    min: str
    max: str | None = Field(description="None: no ceiling")
    after: str = Field(description="used + request")
    borrowed: str = Field(description="how much of after is over min (lent by others)")
    pool_used: str = Field(description="use of every namespace with a quota, + request")
    pool_min: str = Field(description="Σ min over every namespace with a quota")


class QuotaExplanation(BaseModel):
    namespace: str
    enforced: bool = Field(description="the extender enforces elastic quotas (--elastic-quota)")
    governed: bool = Field(description="the namespace has an ElasticQuota")
    admitted: bool
    rule: QuotaRule = Field(
        description="within-min / borrowing: admitted; max: over its max; pool: would borrow "
        "more than others leave; reclaiming: within its min, the rest lent out (preemption)"
    )
    message: str
    preemption_may_help: bool
    resources: list[QuotaResource]


class PodEstimate(BaseModel):
    cpu: float = Field(description="cores")
    memory: float = Field(description="bytes")


class Explanation(BaseModel):
    pod: str = Field(description="namespace/name")
    estimate: PodEstimate | None = Field(
        default=None,
        description="what estimation takes the pod to use once placed: a node without that "
        "much room below a predicate's limit refuses it (absent when estimation is off)",
    )
    placed_without_room: bool = Field(
        default=False,
        description="no node has room for the pod's estimate, so the nodes under their limits "
        "on their own pass it (estimation whenNoNodeHasRoom: place)",
    )
    at: datetime = Field(description="the moment the verdicts are for")
    daemonset: bool = Field(description="a DaemonSet pod: load never keeps it off a node")
    fail_closed: bool = Field(description="staleData failClosed: unknown values reject")
    quota: QuotaExplanation
    nodes: list[NodeExplanation] = Field(description="best first: passing, then by score")


class Explainer:
    """Explanations from the extender's own decisions (its node view, rules and quota gate)."""

    def __init__(self, extender: LoadAwareExtender, *, clock: Callable[[], datetime]) -> None:
        self._extender = extender
        self._clock = clock

    def explain(self, pod: Pod, nodes: Iterable[str] | None = None) -> Explanation:
        """Every cached node (or ``nodes``, cached or not) for ``pod``, best first."""
        extender, now = self._extender, self._clock()
        rules = extender.rules
        view = extender.view(now)
        demand = demand_of(pod, rules) if rules.strategy_metrics else None
        quota = explain_quota(extender.quota, pod)
        check = not pod.is_daemonset_pod
        need, departed = extender.placing(pod, now) if check else (None, {})
        names = sorted(view.verdicts) if nodes is None else list(dict.fromkeys(nodes))
        finals = scaled(
            [node_score(view.verdicts.get(n), demand, rules) for n in names],
            normalize=rules.normalize,
        )
        refusals = [
            refusal(
                name, view.verdicts.get(name), fail_closed=rules.fail_closed, check=check, need=need
            )
            for name in names
        ]
        without_room = _placed_without_room(refusals, rules)
        rows = []
        for name, final, refused in zip(names, finals, refusals, strict=True):
            verdict = view.verdicts.get(name)
            rejected_by, reason = (refused[1][0], refused[0]) if refused else (None, None)
            if without_room and refused and refused[1][1] == WITH_POD:
                rejected_by, reason = None, f"{NO_ROOM_ANYWHERE}: {refused[0]}"
            if rejected_by is None and name in departed:
                rejected_by, reason = REBALANCED_FROM, departed[name]
            if not quota.admitted:
                rejected_by, reason = QUOTA_REFUSED, quota.message
            rows.append(
                NodeExplanation(
                    node=name,
                    passed=rejected_by is None,
                    rejected_by=rejected_by,
                    reason=reason,
                    cached=verdict is not None,
                    placed=verdict.placed if verdict else 0,
                    limits_error=verdict.limits_error if verdict else None,
                    score=_score(verdict, demand, rules, final),
                    metrics=[_metric(t, now) for t in verdict.terms] if verdict else [],
                )
            )
        rows.sort(key=lambda r: (not r.passed, -r.score.final, -r.score.score, r.node))
        return Explanation(
            pod=pod.key,
            estimate=PodEstimate(cpu=need.cpu, memory=need.memory) if need else None,
            placed_without_room=without_room and quota.admitted,
            at=now,
            daemonset=not check,
            fail_closed=rules.fail_closed,
            quota=quota,
            nodes=rows,
        )


NO_ROOM_ANYWHERE = (
    "passes: no node has room for this pod, and this one is under its limits on its own"
)


def _placed_without_room(
    refusals: list[tuple[str, tuple[str, str]] | None], rules: LoadRules
) -> bool:
    """As filter decides with ``whenNoNodeHasRoom: place``: no node passes, and some refuse
    only for want of room for the pod."""
    if not rules.places_without_headroom or None in refusals:
        return False
    return any(r[1][1] == WITH_POD for r in refusals if r is not None)


def _score(
    verdict: Verdict | None, demand: PodDemand | None, rules: LoadRules, final: int
) -> ScoreExplanation:
    if verdict is None:
        return ScoreExplanation(
            final=final,
            score=0,
            least_loaded=0,
            weighted=0.0,
            hot_value=0.0,
            hot_penalty=0,
            strategy=None,
        )
    strategy = None
    score = verdict.score
    if demand is not None and (rules.packing is not None or rules.risk is not None):
        strategy = (
            "targetLoadPacking" if rules.packing is not None else "loadVariationRiskBalancing"
        )
        score = pod_score(verdict.strategy, verdict.score, verdict.hot, rules, demand)
    hot = verdict.hot
    return ScoreExplanation(
        final=final,
        score=score,
        least_loaded=verdict.score,
        weighted=sum(t.points for t in verdict.terms if t.role == "priority"),
        hot_value=hot,
        hot_penalty=int(min(hot * 10, 101.0)) if hot > 0 else 0,
        strategy=strategy,
    )


def _metric(term: MetricTerm, now: datetime) -> MetricExplanation:
    sampled = term.sampled_at
    predicate = term.role == "predicate"
    return MetricExplanation(
        metric=term.metric,
        role=term.role,
        state=term.state,
        value=term.value,
        measured=term.measured,
        estimated=term.estimated,
        sampled_at=sampled,
        age_seconds=(now - sampled).total_seconds() if sampled is not None else None,
        limit=term.threshold if predicate else None,
        limit_from=term.limit_from if predicate else None,
        weight=term.threshold if term.role == "priority" else None,
        decided=term.decided,
        points=term.points,
    )


def explain_quota(gate: QuotaGate | None, pod: Pod) -> QuotaExplanation:
    """The admission filter would give ``pod`` now (:meth:`QuotaGate.check`, no side effect),
    with the numbers behind it."""
    namespace = pod.metadata.namespace
    if gate is None or not gate.governs(pod):
        return QuotaExplanation(
            namespace=namespace,
            enforced=gate is not None,
            governed=False,
            admitted=True,
            rule="no-quota",
            message="no elastic quota applies" if gate else "elastic quotas are not enforced",
            preemption_may_help=False,
            resources=[],
        )
    request = gate.request_of(pod)
    decision = gate.check(pod, request)
    state = gate.ledger.state(without=pod.metadata.uid)
    return QuotaExplanation(
        namespace=namespace,
        enforced=True,
        governed=True,
        admitted=decision.admitted,
        rule=decision.rule or "no-quota",  # the ledger names the rule of all it decides
        message=decision.message or "admitted",
        preemption_may_help=decision.preemption_may_help,
        resources=_resources(state, namespace, request),
    )


def _resources(state: QuotaState, namespace: str, request: ResourceList) -> list[QuotaResource]:
    quota = state.quotas[namespace]
    used: Mapping[str, Fraction] = state.use_of(namespace)
    names = sorted(set(quota.min) | set(quota.max or {}) | set(quota.governed(request)))
    rows = []
    for name in names:
        asked = request.get(name, ZERO)
        after = used.get(name, ZERO) + asked
        ceiling = quota.ceiling(name)
        rows.append(
            QuotaResource(
                resource=name,
                request=format_quantity(name, asked),
                used=format_quantity(name, used.get(name, ZERO)),
                min=format_quantity(name, quota.guaranteed(name)),
                max=None if ceiling is None else format_quantity(name, ceiling),
                after=format_quantity(name, after),
                borrowed=format_quantity(name, max(after - quota.guaranteed(name), ZERO)),
                pool_used=format_quantity(name, state.totals.used.get(name, ZERO) + asked),
                pool_min=format_quantity(name, state.totals.min.get(name, ZERO)),
            )
        )
    return rows
