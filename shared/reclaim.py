"""Which pods to remove so that a pod fits: victim selection for elastic quotas. Pure; no I/O.

Both the extender's ``preempt`` and the annotator's reclaim controller use it:

- :func:`deficit` is what a node lacks for a pod (allocatable minus what its pods request);
- :func:`select_victims` walks candidates in preference order, takes each one that is legal
  to take, stops as soon as the deficit is covered, then gives back (reprieves) every victim
  that turned out not to be needed, most valuable first: a minimal set.
- :func:`keeps_min` is the legality rule of reclaim: no namespace is pushed below its ``min``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from shared.quantity import ResourceList, add, parse_resources
from shared.quota import ElasticQuota
from shared.quota_ledger import PodUsage

ZERO = Fraction(0)
POD_SLOT = {"pods": Fraction(1)}


def free_on_node(allocatable: Mapping[str, str], pods: Iterable[PodUsage]) -> ResourceList:
    """Allocatable minus every counted pod's request (and one ``pods`` slot each)."""
    free = parse_resources(allocatable, where="status.allocatable")
    for usage in pods:
        for name, value in add(usage.request, POD_SLOT).items():
            if name in free:
                free[name] -= value
    return free


def deficit(request: Mapping[str, Fraction], free: Mapping[str, Fraction]) -> ResourceList:
    """What must be freed for ``request`` to fit; resources the node does not list are not
    checked (kube-scheduler rejects those before asking the extender)."""
    need = add(request, POD_SLOT)
    return {
        name: value - free[name]
        for name, value in need.items()
        if value > 0 and name in free and value > free[name]
    }


def covers(victims: Sequence[PodUsage], need: Mapping[str, Fraction]) -> bool:
    freed = add(*(add(v.request, POD_SLOT) for v in victims))
    return all(freed.get(name, ZERO) >= value for name, value in need.items())


def select_victims(
    need: Mapping[str, Fraction],
    candidates: Sequence[PodUsage],
    *,
    legal: Callable[[Sequence[PodUsage]], bool],
    enough: Callable[[Sequence[PodUsage]], bool] | None = None,
) -> list[PodUsage] | None:
    """A minimal legal set from ``candidates`` (most preferred victim first) that covers
    ``need`` and satisfies ``enough``; ``[]`` if nothing must go, ``None`` if impossible."""

    def done(victims: Sequence[PodUsage]) -> bool:
        return covers(victims, need) and (enough is None or enough(victims))

    victims: list[PodUsage] = []
    if done(victims):
        return victims
    for candidate in candidates:
        trial = [*victims, candidate]
        if not legal(trial):
            continue
        victims = trial
        if done(victims):
            break
    else:
        return None
    for victim in reversed(list(victims)):
        trial = [v for v in victims if v is not victim]
        if done(trial):
            victims = trial
    return victims


def keeps_min(
    quotas: Mapping[str, ElasticQuota], used: Mapping[str, Mapping[str, Fraction]]
) -> Callable[[Sequence[PodUsage]], bool]:
    """Legal when every victim's namespace has a quota and stays at or above its ``min`` in
    each resource the victims free."""

    def legal(victims: Sequence[PodUsage]) -> bool:
        freed: dict[str, ResourceList] = {}
        for victim in victims:
            if victim.namespace not in quotas:
                return False
            freed[victim.namespace] = add(freed.get(victim.namespace, {}), victim.request)
        for namespace, amounts in freed.items():
            quota, have = quotas[namespace], used.get(namespace, {})
            for name, value in amounts.items():
                if have.get(name, ZERO) - value < quota.guaranteed(name):
                    return False
        return True

    return legal


def newest_first_by_priority(pods: Iterable[PodUsage]) -> list[PodUsage]:
    """Lowest priority first, then newest first."""
    by_age = sorted(pods, key=lambda u: u.created, reverse=True)
    return sorted(by_age, key=lambda u: u.priority)


def reclaim_order(
    pods: Iterable[PodUsage],
    quotas: Mapping[str, ElasticQuota],
    used: Mapping[str, Mapping[str, Fraction]],
    request: Mapping[str, Fraction],
) -> list[PodUsage]:
    """The reclaim controller's preference: pods that never preempt (online services) last;
    before them, namespaces furthest over ``min`` first (measured in units of the waiting
    pod's request), then lowest priority, then newest."""

    def overage(namespace: str) -> Fraction:
        quota, have = quotas.get(namespace), used.get(namespace, {})
        if quota is None:
            return ZERO
        return sum(
            (
                (have.get(name, ZERO) - quota.guaranteed(name)) / amount
                for name, amount in request.items()
                if amount > 0 and quota.governs(name)
            ),
            ZERO,
        )

    ranked = newest_first_by_priority(pods)
    over = {ns: overage(ns) for ns in {u.namespace for u in ranked}}
    return sorted(ranked, key=lambda u: (u.never_preempts, -over[u.namespace]))


@dataclass(frozen=True)
class ReclaimPlan:
    node: str
    victims: list[PodUsage]
    """Empty: the pod fits on ``node`` already (nothing to evict)."""


def plan_reclaim(
    namespace: str,
    request: Mapping[str, Fraction],
    *,
    nodes: Mapping[str, Mapping[str, str]],
    pods_by_node: Mapping[str, Mapping[str, PodUsage]],
    quotas: Mapping[str, ElasticQuota],
    used: Mapping[str, Mapping[str, Fraction]],
    exclude: str = "",
) -> ReclaimPlan | None:
    """The cheapest node to make room on for a pod of ``namespace`` that is within its
    ``min``: victims from other namespaces over their ``min`` only (:func:`keeps_min`), in
    :func:`reclaim_order`. Among nodes, the fewest online-service victims win, then the fewest
    victims, then the lowest highest priority among them. ``None`` if no node can be freed.
    ``exclude`` is the waiting pod's UID: once nominated to a node it is counted there too."""
    legal = keeps_min(quotas, used)
    best: tuple[tuple[int, int, int, str], ReclaimPlan] | None = None
    for node, allocatable in nodes.items():
        on_node = [u for u in pods_by_node.get(node, {}).values() if u.uid != exclude]
        try:
            need = deficit(request, free_on_node(allocatable, on_node))
        except ValueError:
            continue
        candidates = reclaim_order(
            (
                u
                for u in on_node
                if u.namespace != namespace and u.namespace in quotas and not u.terminating
            ),
            quotas,
            used,
            request,
        )
        victims = select_victims(need, candidates, legal=legal)
        if victims is None:
            continue
        cost = (
            sum(v.never_preempts for v in victims),
            len(victims),
            max((v.priority for v in victims), default=-(2**31)),
            node,
        )
        if best is None or cost < best[0]:
            best = (cost, ReclaimPlan(node, victims))
    return best[1] if best else None
