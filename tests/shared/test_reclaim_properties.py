"""Properties of victim selection on small random clusters, against a brute-force oracle
written independently of :mod:`shared.reclaim`:

- a plan is valid: after its victims go, the waiting pod's quota admits it and it fits on the
  plan's node; every victim is a borrower's pod; no namespace is pushed below its min in a
  resource the pod needs; no victim could be spared;
- no lender is left waiting while a legal victim set exists (on any node for the controller,
  on the proposed node for the extender's preempt);
- after reclaim settles (lenders' pods arrive, borrowers' evicted pods come back and are
  admitted again only if their quota allows): no namespace is over its max, the sum of use is
  within the sum of min, and every lender still waiting has no legal victim set.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import combinations

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from shared.node_fit import FitNode
from shared.quota import ElasticQuota, QuotaState
from shared.quota_ledger import PodUsage
from shared.reclaim import Preemptor, Rules, plan_reclaim, victims_on_node

RESOURCES = ("cpu", "memory")
NAMESPACES = ("p", "q", "r")
ZERO = Fraction(0)
Res = dict[str, Fraction]


@dataclass
class Cluster:
    nodes: dict[str, Res]
    quotas: dict[str, ElasticQuota]
    pods: list[PodUsage] = field(default_factory=list)
    serial: int = 0

    # -- an oracle, independent of the code under test ----------------------------------------

    def used(self, namespace: str, without: Iterable[PodUsage] = ()) -> Res:
        gone = {v.uid for v in without}
        out = dict.fromkeys(RESOURCES, ZERO)
        for p in self.pods:
            if p.namespace == namespace and p.uid not in gone:
                for r in RESOURCES:
                    out[r] += p.request.get(r, ZERO)
        return out

    def admits(self, namespace: str, request: Res, without: Iterable[PodUsage] = ()) -> bool:
        gone = list(without)
        quota = self.quotas[namespace]
        mine = self.used(namespace, gone)
        for r, amount in request.items():
            if amount <= 0 or not quota.governs(r):
                continue
            ceiling = quota.ceiling(r)
            if ceiling is not None and mine[r] + amount > ceiling:
                return False
            governing = [ns for ns, q in self.quotas.items() if q.governs(r)]
            in_use = sum((self.used(ns, gone)[r] for ns in governing), ZERO)
            pool = sum((q.guaranteed(r) for q in self.quotas.values()), ZERO)
            if in_use + amount > pool:
                return False
        return True

    def free(self, node: str, without: Iterable[PodUsage] = ()) -> Res:
        gone = {v.uid for v in without}
        free = dict(self.nodes[node])
        for p in self.pods:
            if p.node == node and p.uid not in gone:
                for r in RESOURCES:
                    free[r] -= p.request.get(r, ZERO)
        return free

    def fits(self, node: str, request: Res, without: Iterable[PodUsage] = ()) -> bool:
        free = self.free(node, without)
        return all(free[r] >= request.get(r, ZERO) for r in RESOURCES)

    def lender(self, namespace: str, request: Res) -> bool:
        quota, mine = self.quotas[namespace], self.used(namespace)
        return all(mine[r] + request.get(r, ZERO) <= quota.guaranteed(r) for r in RESOURCES)

    def borrower(self, namespace: str) -> bool:
        quota, mine = self.quotas[namespace], self.used(namespace)
        return any(mine[r] > quota.guaranteed(r) for r in RESOURCES if quota.governs(r))

    def needed(self, node: str, namespace: str, request: Res) -> set[str]:
        """Resources the node lacks, or the sum of min would be exceeded in."""
        free = self.free(node)
        out = {r for r in RESOURCES if request.get(r, ZERO) > free[r]}
        for r in RESOURCES:
            if request.get(r, ZERO) > 0 and self.quotas[namespace].governs(r):
                governing = [ns for ns, q in self.quotas.items() if q.governs(r)]
                in_use = sum((self.used(ns)[r] for ns in governing), ZERO)
                if in_use + request[r] > sum((q.guaranteed(r) for q in self.quotas.values()), ZERO):
                    out.add(r)
        return out

    def legal(self, victims: tuple[PodUsage, ...], needed: set[str]) -> bool:
        for namespace in {v.namespace for v in victims}:
            quota, mine = self.quotas[namespace], self.used(namespace)
            freed = dict.fromkeys(RESOURCES, ZERO)
            for v in victims:
                if v.namespace == namespace:
                    for r in RESOURCES:
                        freed[r] += v.request.get(r, ZERO)
            for r in needed:
                if freed[r] > 0 and mine[r] - freed[r] < quota.guaranteed(r):
                    return False
        return True

    def candidates(self, namespace: str, node: str | None = None) -> list[PodUsage]:
        return [
            p
            for p in self.pods
            if p.namespace != namespace
            and self.borrower(p.namespace)
            and (node is None or p.node == node)
        ]

    def legal_set_exists(self, namespace: str, request: Res, node: str | None = None) -> bool:
        """Brute force: some node, some legal set of borrowers' pods after which it is
        admitted and fits (on ``node`` only, with victims there only, if given)."""
        nodes = [node] if node else list(self.nodes)
        for target in nodes:
            pool = self.candidates(namespace, node)
            needed = self.needed(target, namespace, request)
            for size in range(len(pool) + 1):
                for victims in combinations(pool, size):
                    if (
                        self.legal(victims, needed)
                        and self.admits(namespace, request, victims)
                        and self.fits(target, request, victims)
                    ):
                        return True
        return False

    # -- driving it ---------------------------------------------------------------------------

    def state(self) -> QuotaState:
        return QuotaState.of(self.quotas, {ns: self.used(ns) for ns in self.quotas})

    def by_node(self) -> dict[str, dict[str, PodUsage]]:
        out: dict[str, dict[str, PodUsage]] = {n: {} for n in self.nodes}
        for p in self.pods:
            out[p.node][p.uid] = p
        return out

    def allocatable(self) -> dict[str, dict[str, str]]:
        return {
            n: {r: str(v) for r, v in alloc.items()} | {"pods": "110"}
            for n, alloc in self.nodes.items()
        }

    def fit_nodes(self) -> dict[str, FitNode]:
        return {n: FitNode(n, alloc) for n, alloc in self.allocatable().items()}

    def rules(self, namespace: str, request: Res, priority: int = 0) -> Rules:
        return Rules.of(Preemptor("waiting", namespace, priority, request), self.state())

    def place(self, arrival: Arrival, nodes: Iterable[str] = ()) -> bool:
        """The extender's admission (the code under test), then the first node it fits on."""
        if not self.state().decide(arrival.namespace, arrival.request).admitted:
            return False
        for node in nodes or sorted(self.nodes):
            if self.fits(node, arrival.request):
                self.serial += 1
                self.pods.append(
                    PodUsage(
                        uid=f"uid-{self.serial}",
                        namespace=arrival.namespace,
                        name=f"pod-{self.serial}",
                        node=node,
                        priority=arrival.priority,
                        never_preempts=arrival.never,
                        created=f"2026-11-22T10:{self.serial:02d}:00Z",
                        terminating=False,
                        request=arrival.request,
                    )
                )
                return True
        return False


@dataclass(frozen=True)
class Arrival:
    namespace: str
    request: Res
    priority: int = 0
    never: bool = False


amounts = st.integers(0, 3).map(Fraction)


@st.composite
def clusters(draw: st.DrawFn) -> Cluster:
    nodes = {
        f"n{i}": {r: Fraction(draw(st.integers(2, 8))) for r in RESOURCES}
        for i in range(draw(st.integers(1, 2)))
    }
    quotas = {}
    for ns in NAMESPACES:
        minimum = {r: Fraction(draw(st.integers(0, 6))) for r in RESOURCES}
        maximum = draw(
            st.none() | st.builds(lambda c, m: {"cpu": c, "memory": m}, amounts, amounts)
        )
        if maximum is not None:
            maximum = {r: minimum[r] + maximum[r] for r in RESOURCES}
        quotas[ns] = ElasticQuota(ns, minimum, maximum)
    cluster = Cluster(nodes, quotas)
    for arrival in draw(st.lists(arrivals(), max_size=8)):
        cluster.place(arrival)
    return cluster


def arrivals() -> st.SearchStrategy[Arrival]:
    request = st.builds(
        lambda c, m: {r: v for r, v in (("cpu", c), ("memory", m)) if v},
        st.integers(1, 3).map(Fraction),
        amounts,
    )
    return st.builds(
        Arrival,
        st.sampled_from(NAMESPACES),
        request,
        st.sampled_from((0, 100, 1000)),
        st.booleans(),
    )


SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(clusters(), arrivals())
def test_a_plan_is_valid_and_none_only_when_no_legal_set_exists(
    cluster: Cluster, waiting: Arrival
) -> None:
    ns, request = waiting.namespace, waiting.request
    assume(cluster.lender(ns, request))
    rules = cluster.rules(ns, request, waiting.priority)
    assert rules.reclaiming
    plan = plan_reclaim(rules, nodes=cluster.fit_nodes(), pods_by_node=cluster.by_node())
    if plan is None:
        assert not cluster.legal_set_exists(ns, request)
        return
    victims = tuple(plan.victims)
    assert cluster.admits(ns, request, victims) and cluster.fits(plan.node, request, victims)
    assert all(v.namespace != ns and cluster.borrower(v.namespace) for v in victims)
    assert cluster.legal(victims, cluster.needed(plan.node, ns, request))
    for spared in victims:
        rest = tuple(v for v in victims if v is not spared)
        assert not (cluster.admits(ns, request, rest) and cluster.fits(plan.node, request, rest))


@SETTINGS
@given(clusters(), arrivals())
def test_preempt_on_a_node_finds_a_legal_set_whenever_one_exists(
    cluster: Cluster, waiting: Arrival
) -> None:
    ns, request = waiting.namespace, waiting.request
    assume(cluster.lender(ns, request))
    rules = cluster.rules(ns, request, waiting.priority)
    allocatable = cluster.allocatable()
    for node, pods in cluster.by_node().items():
        victims = victims_on_node(rules, node, allocatable[node], pods.values())
        if victims is None:
            # nothing to free counts as "none" too (kube-scheduler never asks then)
            fits = cluster.admits(ns, request) and cluster.fits(node, request)
            assert fits or not cluster.legal_set_exists(ns, request, node)
            continue
        chosen = tuple(victims)
        assert all(v.node == node for v in chosen)
        assert cluster.admits(ns, request, chosen) and cluster.fits(node, request, chosen)
        assert cluster.legal(chosen, cluster.needed(node, ns, request))


@SETTINGS
@given(clusters(), st.lists(arrivals(), min_size=1, max_size=4))
def test_after_reclaim_settles(cluster: Cluster, lenders: list[Arrival]) -> None:
    waiting = [a for a in lenders if cluster.lender(a.namespace, a.request)]
    assume(waiting)
    comeback: list[Arrival] = []
    for _ in range(20):
        progress = False
        for arrival in list(waiting):
            if cluster.place(arrival):
                waiting.remove(arrival)
                progress = True
                continue
            if not cluster.lender(arrival.namespace, arrival.request):
                continue
            rules = cluster.rules(arrival.namespace, arrival.request, arrival.priority)
            plan = plan_reclaim(rules, nodes=cluster.fit_nodes(), pods_by_node=cluster.by_node())
            if plan is None or not plan.victims:
                continue
            gone = {v.uid for v in plan.victims}
            cluster.pods = [p for p in cluster.pods if p.uid not in gone]
            # nominated before its victims go, it holds the room (and its quota use) at once
            assert cluster.place(arrival, [plan.node])
            waiting.remove(arrival)
            comeback += [
                Arrival(v.namespace, v.request, v.priority, v.never_preempts) for v in plan.victims
            ]
            progress = True
        for arrival in list(comeback):  # a controller recreates them; quotas decide again
            if cluster.place(arrival):
                comeback.remove(arrival)
        if not progress:
            break
    for ns, quota in cluster.quotas.items():
        used = cluster.used(ns)
        assert all(
            used[r] <= ceiling for r in RESOURCES if (ceiling := quota.ceiling(r)) is not None
        )
    for r in RESOURCES:
        governing = [ns for ns, q in cluster.quotas.items() if q.governs(r)]
        in_use = sum((cluster.used(ns)[r] for ns in governing), ZERO)
        assert in_use <= sum((q.guaranteed(r) for q in cluster.quotas.values()), ZERO)
    for arrival in waiting:
        if cluster.lender(arrival.namespace, arrival.request):
            assert not cluster.legal_set_exists(arrival.namespace, arrival.request)
