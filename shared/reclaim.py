"""Which pods to remove so that a pod can run: victim selection under elastic quotas. Pure.

The extender's ``preempt`` (victims on the one node kube-scheduler proposes) and the
annotator's reclaim controller (a node for the waiting pod, victims anywhere) both use it.

What must be freed, a :data:`Need` keyed by (part, resource):

- ``node``: what the node lacks for the pod (:mod:`shared.node_fit` has the arithmetic, and
  says which nodes the pod may go to at all). Room is taken by bound pods, by pods nominated
  there at the preemptor's priority or above (kube-scheduler keeps room for them), and by
  room already *promised*: pods admitted at filter whose binding the watch has not shown
  (:func:`node_need`);
- ``pool``: what the pod would put the sum of use over the sum of ``min`` (any quota's pod
  frees it);
- ``own``: what it would put its own namespace over its ``max`` (only its own pods free it).

Who may be taken (:class:`Rules`): for a lender's pod (its namespace stays within its ``min``),
pods of borrowers — other namespaces over their ``min`` in any resource — whatever their
priority, as long as no namespace is pushed below its ``min`` in a resource the preemptor
needs; for any other pod, lower-priority pods of its own namespace. Only bound pods that are
not terminating. Preference (:func:`preference_order`): pods that never preempt (online
services) last; before them lowest priority first, then newest.

The search (:func:`select_victims`) takes candidates in preference order, each that helps and
is legal, and backtracks (bounded) when that greedy pass ends short; then it gives back every
victim not needed, most valuable first: a minimal set.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from itertools import islice

from shared.node_fit import (
    POD_SLOT,
    FitNode,
    PodNeeds,
    Toleration,
    deficit,
    free_on_node,
    placement_reason,
)
from shared.quantity import ResourceList, add
from shared.quota import QuotaState
from shared.quota_ledger import ASSUMED, PodUsage

ZERO = Fraction(0)
SEARCH_STEPS = 4096
"""At most this many steps of the search per node; the greedy pass alone takes one per
candidate."""
POOL_REACH = 256
"""The controller considers this many pods on other nodes (the most preferred ones) for
what the sum of ``min`` needs back."""

Key = tuple[str, str]
Need = dict[Key, Fraction]


def node_need(
    request: Mapping[str, Fraction],
    allocatable: Mapping[str, str],
    on_node: Iterable[PodUsage],
    *,
    priority: int,
    promised: Sequence[PodUsage] = (),
    freed_by_scheduler: Mapping[str, Fraction] | None = None,
) -> ResourceList:
    """What the node lacks for a pod of ``priority``. ``promised``: pods admitted but not yet
    seen bound, whose node is unknown; each may be on this node. Counting them all
    overshoots when they went elsewhere, so the answer is capped by what kube-scheduler's
    own victims free (``freed_by_scheduler``): its view holds every pod it has placed, and
    its victims suffice there. Never less than what the known pods alone leave short."""
    counted = [u for u in on_node if u.bound or u.priority >= priority]
    known = deficit(request, free_on_node(allocatable, counted))
    if not promised:
        return known
    worst = deficit(request, free_on_node(allocatable, [*counted, *promised]))
    if freed_by_scheduler is None:
        return worst
    need = {
        name: max(known.get(name, ZERO), min(value, freed_by_scheduler.get(name, ZERO)))
        for name, value in worst.items()
    }
    return {name: value for name, value in need.items() if value > 0}


def preference_order(pods: Iterable[PodUsage]) -> list[PodUsage]:
    """Victims first: online services (``preemptionPolicy: Never``) last; before them lowest
    priority first, then newest first."""
    by_age = sorted(pods, key=lambda u: u.created, reverse=True)
    return sorted(by_age, key=lambda u: (u.never_preempts, u.priority))


@dataclass(frozen=True)
class Preemptor:
    uid: str
    namespace: str
    priority: int
    request: ResourceList
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()

    @property
    def needs(self) -> PodNeeds:
        """What node fit reads of the pod (:mod:`shared.node_fit`)."""
        return PodNeeds(self.request, self.node_selector, self.tolerations)


@dataclass(frozen=True)
class Rules:
    """Who may be taken for ``preemptor`` and what each victim gives back, given ``state``
    (quota use without the preemptor itself)."""

    preemptor: Preemptor
    state: QuotaState
    reclaiming: bool

    @classmethod
    def of(cls, preemptor: Preemptor, state: QuotaState) -> Rules:
        return cls(preemptor, state, state.reclaiming(preemptor.namespace, preemptor.request))

    def eligible(self, u: PodUsage) -> bool:
        if not u.bound or u.terminating or u.uid == self.preemptor.uid:
            return False
        if self.reclaiming:
            return u.namespace != self.preemptor.namespace and self.state.is_borrower(u.namespace)
        return u.namespace == self.preemptor.namespace and u.priority < self.preemptor.priority

    def quota_need(self) -> Need:
        namespace, request = self.preemptor.namespace, self.preemptor.request
        need = {("pool", r): v for r, v in self.state.pool_excess(namespace, request).items()}
        need.update({("own", r): v for r, v in self.state.max_excess(namespace, request).items()})
        return need

    def gain(self, u: PodUsage, node: str) -> dict[Key, Fraction]:
        """What taking ``u`` frees toward each part of a need for a pod going to ``node``."""
        gain: dict[Key, Fraction] = {}
        if u.node == node:
            gain.update({("node", r): v for r, v in add(u.request, POD_SLOT).items()})
        quota = self.state.quotas.get(u.namespace)
        if quota is not None:
            gain.update({("pool", r): v for r, v in quota.governed(u.request).items()})
        if u.namespace == self.preemptor.namespace:
            gain.update({("own", r): v for r, v in u.request.items()})
        return gain

    def legal(self, needed: set[str]) -> Callable[[Sequence[PodUsage], PodUsage], bool]:
        """May ``candidate`` join ``chosen``? For a lender: not if that pushes its namespace
        below its ``min`` in a resource in ``needed``."""

        def admits(chosen: Sequence[PodUsage], candidate: PodUsage) -> bool:
            if not self.reclaiming:
                return True
            namespace = candidate.namespace
            quota, have = self.state.quotas[namespace], self.state.use_of(namespace)
            freed = add(*(v.request for v in chosen if v.namespace == namespace))
            freed = add(freed, candidate.request)
            return all(
                have.get(r, ZERO) - freed[r] >= quota.guaranteed(r)
                for r in needed
                if freed.get(r, ZERO) > 0
            )

        return admits


def needed_resources(need: Mapping[Key, Fraction]) -> set[str]:
    return {r for (_, r), v in need.items() if v > 0 and r != "pods"}


def select_victims(
    need: Mapping[Key, Fraction],
    candidates: Sequence[PodUsage],
    gains: Sequence[Mapping[Key, Fraction]],
    legal: Callable[[Sequence[PodUsage], PodUsage], bool],
    *,
    steps: int = SEARCH_STEPS,
) -> list[PodUsage] | None:
    """A minimal legal set from ``candidates`` (in preference order, ``gains`` alongside)
    that covers ``need``; ``[]`` if nothing must go, ``None`` if none was found."""
    keys = [k for k, v in need.items() if v > 0]
    if not keys:
        return []
    # what all candidates from index i on could still free: a branch that cannot cover stops
    reach = [dict.fromkeys(keys, ZERO) for _ in range(len(candidates) + 1)]
    for i in range(len(candidates) - 1, -1, -1):
        reach[i] = {k: reach[i + 1][k] + gains[i].get(k, ZERO) for k in keys}
    stack: list[tuple[int, tuple[int, ...], dict[Key, Fraction]]] = [(0, (), dict(need))]
    found: tuple[int, ...] | None = None
    while stack and steps > 0:
        steps -= 1
        i, chosen, left = stack.pop()
        if all(left[k] <= 0 for k in keys):
            found = chosen
            break
        if i == len(candidates) or any(left[k] > reach[i][k] for k in keys):
            continue
        stack.append((i + 1, chosen, left))
        gain = gains[i]
        helps = any(left[k] > 0 and gain.get(k, ZERO) > 0 for k in keys)
        if helps and legal([candidates[j] for j in chosen], candidates[i]):
            stack.append((i + 1, (*chosen, i), {k: left[k] - gain.get(k, ZERO) for k in keys}))
    if found is None:
        return None
    kept = list(found)
    for i in reversed(found):  # most valuable first
        trial = [j for j in kept if j != i]
        if all(sum((gains[j].get(k, ZERO) for j in trial), ZERO) >= need[k] for k in keys):
            kept = trial
    return [candidates[j] for j in kept]


def victims_on_node(
    rules: Rules,
    node: str,
    allocatable: Mapping[str, str],
    on_node: Iterable[PodUsage],
    *,
    promised: Sequence[PodUsage] = (),
    proposed: Sequence[PodUsage] | None = None,
    spared: Collection[str] = (),
    again: bool = False,
) -> list[PodUsage] | None:
    """The extender's answer for one node kube-scheduler proposes: legal victims there, or
    ``None`` (drop the node). ``proposed``: kube-scheduler's own victims, when all are known;
    a promised pod among them is on this node. ``spared``: UIDs never chosen (pods that may
    be gone already); they still take room. ``again``: the pod preempted a moment ago, so
    kube-scheduler's view may still hold the victims it deleted then: where the pod fits by
    this count, its victims do not stand (``[]``: nothing is needed here). ``ValueError``
    for a malformed allocatable.
    Only room is checked here: kube-scheduler proposes only nodes that pass its filters not
    about resources (``nodeSelector``, taints, cordon: unresolvable by preemption)."""
    preemptor = rules.preemptor
    located = [replace(u, node=node, bound=True) for u in proposed or () if u.node == ASSUMED]
    moved = {u.uid for u in located}
    pods = [*(u for u in on_node if u.uid != preemptor.uid), *located]
    elsewhere = [u for u in promised if u.uid not in moved and u.uid != preemptor.uid]
    # a victim already going for another pod is in kube-scheduler's proposal only because
    # its view is behind: what it frees is that pod's, not room promised pods take here
    theirs = [u for u in proposed or () if u.uid not in spared]
    freed = None if proposed is None else add(*(add(u.request, POD_SLOT) for u in theirs))
    short = node_need(
        preemptor.request,
        allocatable,
        pods,
        priority=preemptor.priority,
        promised=elsewhere,
        freed_by_scheduler=freed,
    )
    need = rules.quota_need() | {("node", r): v for r, v in short.items()}
    if not need:
        # By its own count the pod fits, yet kube-scheduler found it does not (a constraint
        # not about resources, or a pod not seen yet): its victims stand if they are legal,
        # unless kube-scheduler may just not have seen the last victims of this pod go.
        if again:
            return []
        return _if_legal(rules, [replace(u, node=node, bound=True) for u in theirs])
    candidates = preference_order(u for u in pods if u.uid not in spared and rules.eligible(u))
    return _select(rules, need, candidates, node) or None


def _if_legal(rules: Rules, victims: Sequence[PodUsage]) -> list[PodUsage] | None:
    if not victims or not all(rules.eligible(v) for v in victims):
        return None
    legal = rules.legal({r for r, v in rules.preemptor.request.items() if v > 0})
    if all(legal(victims[:i], v) for i, v in enumerate(victims)):
        return list(victims)
    return None


@dataclass(frozen=True)
class ReclaimPlan:
    node: str
    """Where the waiting pod goes (it is nominated there)."""
    victims: list[PodUsage]
    """On that node or, for what the sum of ``min`` needs back, on any other. Empty: the
    pod fits already (nothing to evict)."""


def plan_reclaim(
    rules: Rules,
    *,
    nodes: Mapping[str, FitNode],
    pods_by_node: Mapping[str, Mapping[str, PodUsage]],
) -> ReclaimPlan | None:
    """The reclaim controller's plan for a waiting lender's pod: the node to make room on,
    among those of ``nodes`` it may run on (schedulable, its ``nodeSelector`` matched, every
    NoSchedule/NoExecute taint tolerated: :func:`shared.node_fit.placement_reason`), with the
    cheapest legal victims: the fewest online services, then the lowest highest priority,
    then the fewest pods. ``None`` if no node can be freed."""
    preemptor = rules.preemptor
    everyone = preference_order(
        u for pods in pods_by_node.values() for u in pods.values() if rules.eligible(u)
    )
    rank = {u.uid: i for i, u in enumerate(everyone)}
    quota_need = rules.quota_need()
    helpers = [u for u in everyone if any(rules.gain(u, "").get(k) for k in quota_need)]
    # where the pod fits, only the sum of min needs victims: the same set for every such node
    quota_only = _select(rules, quota_need, helpers[:POOL_REACH], "") if quota_need else None
    best: tuple[tuple[int, int, int, str], ReclaimPlan] | None = None
    needs = preemptor.needs
    for node in sorted(nodes):
        if placement_reason(needs, nodes[node]) is not None:
            continue
        pods = pods_by_node.get(node, {}).values()
        try:
            short = node_need(
                preemptor.request,
                nodes[node].allocatable,
                (u for u in pods if u.uid != preemptor.uid),
                priority=preemptor.priority,
            )
        except ValueError:
            continue
        if not short and not quota_need:
            return ReclaimPlan(node, [])  # it fits here already
        if short:
            need = quota_need | {("node", r): v for r, v in short.items()}
            mine = sorted((u for u in pods if u.uid in rank), key=lambda u: rank[u.uid])
            others = islice((u for u in helpers if u.node != node), POOL_REACH)
            candidates = list(heapq.merge(mine, others, key=lambda u: rank[u.uid]))
            victims = _select(rules, need, candidates, node)
        else:
            victims = quota_only
        if not victims:
            continue
        cost = (
            sum(v.never_preempts for v in victims),
            max(v.priority for v in victims),
            len(victims),
            node,
        )
        if best is None or cost < best[0]:
            best = (cost, ReclaimPlan(node, victims))
    return best[1] if best else None


def _select(
    rules: Rules, need: Need, candidates: Sequence[PodUsage], node: str
) -> list[PodUsage] | None:
    gains = [rules.gain(u, node) for u in candidates]
    return select_victims(need, candidates, gains, rules.legal(needed_resources(need)))
