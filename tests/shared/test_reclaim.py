"""Victim selection (shared by the extender's preempt and the annotator's reclaim controller):
tables for the node arithmetic, the multi-resource and the sum-of-min cases."""

from collections.abc import Sequence
from fractions import Fraction

import pytest

from shared.node_fit import FitNode, Taint, Toleration, deficit, free_on_node
from shared.quota import ElasticQuota, QuotaState
from shared.quota_ledger import ASSUMED, PodUsage
from shared.reclaim import (
    Preemptor,
    Rules,
    node_need,
    plan_reclaim,
    preference_order,
    select_victims,
    victims_on_node,
)

GI = 2**30


def res(cpu: float = 0, gi: float = 0) -> dict[str, Fraction]:
    out = {"cpu": Fraction(str(cpu)), "memory": Fraction(str(gi)) * GI}
    return {k: v for k, v in out.items() if v}


def cpu(n: float) -> dict[str, Fraction]:
    return res(cpu=n)


def usage(
    name: str,
    namespace: str,
    request: dict[str, Fraction] | float,
    node: str = "n1",
    *,
    priority: int = 0,
    created: str = "2026-11-22T10:00:00Z",
    never: bool = False,
    terminating: bool = False,
    bound: bool = True,
) -> PodUsage:
    return PodUsage(
        uid=f"{namespace}/{name}",
        namespace=namespace,
        name=name,
        node=node,
        priority=priority,
        never_preempts=never,
        created=created,
        terminating=terminating,
        request=request if isinstance(request, dict) else cpu(request),
        bound=bound,
    )


def state_of(quotas: dict[str, ElasticQuota], pods: list[PodUsage]) -> QuotaState:
    used: dict[str, dict[str, Fraction]] = {}
    for p in pods:
        mine = used.setdefault(p.namespace, {})
        for k, v in p.request.items():
            mine[k] = mine.get(k, Fraction(0)) + v
    return QuotaState.of(quotas, used)


def rules_for(
    quotas: dict[str, ElasticQuota],
    pods: list[PodUsage],
    namespace: str,
    request: dict[str, Fraction],
    priority: int = 0,
) -> Rules:
    return Rules.of(Preemptor("waiting", namespace, priority, request), state_of(quotas, pods))


def fit(nodes: dict[str, dict[str, str]]) -> dict[str, FitNode]:
    return {name: FitNode(name, allocatable) for name, allocatable in nodes.items()}


def by_node(pods: list[PodUsage]) -> dict[str, dict[str, PodUsage]]:
    out: dict[str, dict[str, PodUsage]] = {}
    for p in pods:
        out.setdefault(p.node, {})[p.uid] = p
    return out


QUOTAS = {
    "a": ElasticQuota("a", min=cpu(6), max=cpu(10)),
    "b": ElasticQuota("b", min=cpu(12), max=cpu(14)),
}
SEVEN = {"cpu": "7", "pods": "110"}


def test_free_and_deficit() -> None:
    free = free_on_node(SEVEN, [usage("x", "a", 2), usage("y", "b", 3)])
    assert free == {"cpu": 2, "pods": 108}
    assert deficit(cpu(5), free) == cpu(3)
    assert deficit(cpu(1), free) == {}
    assert deficit({"nvidia.com/gpu": Fraction(1)}, free) == {}  # not listed: not checked


@pytest.mark.parametrize(
    ("on_node", "promised", "freed", "need"),
    [
        ([usage("x", "a", 5)], [], None, cpu(3)),
        # nominated there: counts at the preemptor's priority (10) or above, as in kube-scheduler
        ([usage("x", "a", 2), usage("n", "a", 3, priority=10, bound=False)], [], None, cpu(3)),
        ([usage("x", "a", 2), usage("n", "a", 3, priority=5, bound=False)], [], None, {}),
        # promised room (admitted, binding not seen): each may be here; at worst all are
        ([usage("x", "a", 2)], [usage("p", "b", 3), usage("q", "b", 2)], None, cpu(5)),
        # kube-scheduler's own victims free 1 CPU and 1 slot, and suffice in its view
        ([usage("x", "a", 2)], [usage("p", "b", 3), usage("q", "b", 2)], cpu(1), cpu(1)),
        # never less than the known pods alone leave short
        ([usage("x", "a", 5)], [usage("p", "b", 3)], cpu(1), cpu(3)),
    ],
)
def test_node_need_counts_promised_room(
    on_node: list[PodUsage],
    promised: list[PodUsage],
    freed: dict[str, Fraction] | None,
    need: dict[str, Fraction],
) -> None:
    scheduler = None if freed is None else {**freed, "pods": Fraction(1)}
    got = node_need(
        cpu(5), SEVEN, on_node, priority=10, promised=promised, freed_by_scheduler=scheduler
    )
    assert {k: v for k, v in got.items() if k != "pods"} == need


def test_preference_order_online_last_then_lowest_priority_then_newest() -> None:
    pods = [
        usage("old-low", "a", 1, priority=0, created="2026-11-22T09:00:00Z"),
        usage("new-low", "a", 1, priority=0, created="2026-11-22T11:00:00Z"),
        usage("high", "a", 1, priority=1000),
        usage("online", "a", 1, priority=-5, never=True),
        usage("mid", "c", 1, priority=100),
    ]
    assert [p.name for p in preference_order(pods)] == [
        "new-low",
        "old-low",
        "mid",
        "high",
        "online",
    ]


def test_select_is_minimal_and_backtracks_past_a_greedy_dead_end() -> None:
    pods = [usage("small", "a", 1), usage("big", "a", 4), usage("mid", "a", 2)]
    need = {("node", "cpu"): Fraction(3)}
    gains = [{("node", "cpu"): p.request["cpu"]} for p in pods]

    def anything(chosen: object, candidate: object) -> bool:
        return True

    # greedy takes small, big (covers 3), then reprieves small: {big}
    assert [v.name for v in select_victims(need, pods, gains, anything) or []] == ["big"]
    assert select_victims({}, pods, gains, anything) == []
    assert select_victims({("node", "cpu"): Fraction(8)}, pods, gains, anything) is None

    # at most 2 CPU may be taken: greedy takes small (1) and then may take neither big nor
    # mid; the search backs out of small and finds {mid}
    def two_at_most(chosen: Sequence[PodUsage], candidate: PodUsage) -> bool:
        return sum(p.request["cpu"] for p in [*chosen, candidate]) <= 2

    need = {("node", "cpu"): Fraction(2)}
    assert [v.name for v in select_victims(need, pods, gains, two_at_most) or []] == ["mid"]


# -- who may be taken -----------------------------------------------------------------------

MULTI = {
    "x": ElasticQuota("x", min=res(4, 4), max=res(8, 16)),
    "y": ElasticQuota("y", min=res(4, 8), max=res(8, 16)),
}
# x uses 1 CPU and 6 GiB: over its memory min, under its CPU min; three pods of 2 GiB
X_PODS = [usage(f"x{i}", "x", res(1 / 3, 2), created=f"2026-11-22T10:0{i}:00Z") for i in range(3)]
MEM_FULL = {"cpu": "8", "memory": str(8 * GI), "pods": "110"}


def test_a_borrower_in_any_resource_is_reclaimable() -> None:
    """The issue's first case: y, within its min, needs memory on a node full in memory."""
    filler = usage("y0", "y", res(1, 2))
    pods = [*X_PODS, filler]
    rules = rules_for(MULTI, pods, "y", res(1, 2))
    assert rules.reclaiming and rules.state.is_borrower("x")
    victims = victims_on_node(rules, "n1", MEM_FULL, pods)
    # newest first; x goes from 6 GiB to 4 GiB (its memory min), and below its CPU min,
    # which is allowed: the pod needs no CPU freed
    assert [v.name for v in victims or []] == ["x2"]


def test_never_below_min_in_a_resource_the_preemptor_needs() -> None:
    pods = [*X_PODS, usage("y0", "y", res(1, 2))]
    # 4 GiB needed: taking two of x's pods would leave x at 2 GiB < its 4 GiB min
    assert victims_on_node(rules_for(MULTI, pods, "y", res(1, 4)), "n1", MEM_FULL, pods) is None
    # the node is short of CPU too: x is under its CPU min, so none of its pods may go
    cpu_full = {**MEM_FULL, "cpu": "1.5"}
    assert victims_on_node(rules_for(MULTI, pods, "y", res(1, 2)), "n1", cpu_full, pods) is None


def test_a_borrowers_own_pod_may_not_reclaim() -> None:
    # x is a borrower (memory): even a CPU-only pod of x takes only x's lower-priority pods
    rules = rules_for(MULTI, X_PODS, "x", res(1), priority=10)
    assert not rules.reclaiming
    assert rules.eligible(X_PODS[0])
    assert not rules.eligible(usage("y0", "y", res(1, 1)))


@pytest.mark.parametrize(
    ("pod", "eligible"),
    [
        (usage("job", "a", 2), True),
        (usage("online", "a", 2, priority=1000000, never=True), True),  # any priority
        (usage("gone", "a", 2, terminating=True), False),
        (usage("nominated", "a", 2, bound=False), False),  # holds no room yet
        (usage("b-pod", "b", 2), False),  # the preemptor's own namespace
        (usage("free", "nobody", 2), False),  # no quota: not a borrower
    ],
)
def test_eligible_for_a_lender(pod: PodUsage, eligible: bool) -> None:
    rules = rules_for(QUOTAS, [usage("j", "a", 8)], "b", cpu(5))
    assert rules.eligible(pod) is eligible


# -- the sum of min ---------------------------------------------------------------------------


def test_sum_of_min_needs_victims_although_the_node_has_room() -> None:
    # a {min 6} holds 10 (it borrowed 4 while b was idle); b {min 12} now runs 5 and wants 5
    # more: 10 + 5 + 5 = 20 > 18, so 2 must come back though n1 has room
    pods = [
        usage("a0", "a", 2, created="2026-11-22T10:00:00Z"),
        usage("a1", "a", 2, created="2026-11-22T10:01:00Z", priority=1000),
        usage("a2", "a", 3, "n2", created="2026-11-22T10:02:00Z"),
        usage("a3", "a", 3, "n2", created="2026-11-22T10:03:00Z"),
        usage("b0", "b", 5, "n3"),
    ]
    nodes = {"n1": {"cpu": "16", "pods": "110"}, "n2": SEVEN, "n3": SEVEN}
    rules = rules_for(QUOTAS, pods, "b", cpu(5))
    assert rules.quota_need() == {("pool", "cpu"): 2}
    plan = plan_reclaim(rules, nodes=fit(nodes), pods_by_node=by_node(pods))
    # lowest priority, then newest: a3 (3 CPU, on n2) covers the 2; the pod goes to n1
    assert plan is not None and plan.node == "n1"
    assert [v.name for v in plan.victims] == ["a3"]
    # the extender, on a node kube-scheduler proposes, can only take pods there
    on_n1 = victims_on_node(rules, "n1", nodes["n1"], by_node(pods)["n1"].values())
    assert [v.name for v in on_n1 or []] == ["a0"]


def test_no_plan_when_it_would_push_a_lender_below_min() -> None:
    pods = [usage("j0", "a", 2), usage("j1", "a", 2), usage("j2", "a", 3)]
    rules = rules_for(QUOTAS, pods, "b", cpu(5))
    assert plan_reclaim(rules, nodes=fit({"n1": SEVEN}), pods_by_node=by_node(pods)) is None
    fits = plan_reclaim(
        rules_for(QUOTAS, [], "b", cpu(0.5)), nodes=fit({"n1": SEVEN}), pods_by_node={}
    )
    assert fits is not None and fits.victims == []


def test_the_user_story_evicts_one_job_pod_never_a_notebook() -> None:
    # 2 nodes x 7 CPU; a's job and notebook pods spread one of each per node; b's job-1 on n1
    pods = [
        usage("job-0", "a", 2, "n1"),
        usage("nb-0", "a", 2, "n1", priority=1000000, never=True),
        usage("job-1-b", "b", 3, "n1"),
        usage("job-1", "a", 2, "n2", created="2026-11-22T10:01:00Z"),
        usage("nb-1", "a", 2, "n2", priority=1000000, never=True),
    ]
    rules = rules_for(QUOTAS, pods, "b", cpu(5))
    plan = plan_reclaim(rules, nodes=fit({"n1": SEVEN, "n2": SEVEN}), pods_by_node=by_node(pods))
    assert plan is not None and plan.node == "n2"
    assert [v.name for v in plan.victims] == ["job-1"]


GPU = Taint("dedicated", "gpu", "NoSchedule")
STORY = [
    usage("job-0", "a", 2, "n1"),
    usage("nb-0", "a", 2, "n1", priority=1000000, never=True),
    usage("job-1-b", "b", 3, "n1"),
    usage("job-1", "a", 2, "n2", created="2026-11-22T10:01:00Z"),
    usage("nb-1", "a", 2, "n2", priority=1000000, never=True),
]


TEN = {"cpu": "10", "pods": "110"}


@pytest.mark.parametrize(
    ("n1", "selector", "tolerations", "node", "victims"),
    [
        # n1 (first by name of two equally cheap plans) when the pod may go there
        (FitNode("n1", TEN), {}, (), "n1", ["job-0"]),
        (FitNode("n1", TEN, labels={"pool": "x"}), {"pool": "x"}, (), "n1", ["job-0"]),
        (
            FitNode("n1", TEN, taints=(GPU,)),
            {},
            (Toleration("dedicated", "Exists", "", ""),),
            "n1",
            ["job-0"],
        ),
        (
            FitNode("n1", TEN, taints=(Taint("soft", "", "PreferNoSchedule"),)),
            {},
            (),
            "n1",
            ["job-0"],
        ),
        # else room is made on n2 (whose labels match no selector)
        (FitNode("n1", TEN, taints=(GPU,)), {}, (), "n2", ["job-1"]),
        (FitNode("n1", TEN, taints=(Taint("drain", "", "NoExecute"),)), {}, (), "n2", ["job-1"]),
        (FitNode("n1", TEN, unschedulable=True), {}, (), "n2", ["job-1"]),
        (FitNode("n1", TEN, labels={"pool": "y"}), {"pool": "x"}, (), None, None),
        (FitNode("n1", TEN), {"pool": "x"}, (), None, None),
    ],
)
def test_plan_goes_only_where_the_pod_may_run(
    n1: FitNode,
    selector: dict[str, str],
    tolerations: tuple[Toleration, ...],
    node: str | None,
    victims: list[str] | None,
) -> None:
    # b (within its min) wants 5 CPU: n1 (10) has 3 free, n2 (7) has 3; each plan takes one
    # of a's job pods (a may give back 2 and stay within its min of 6)
    state = state_of(QUOTAS, STORY)
    preemptor = Preemptor("waiting", "b", 0, cpu(5), selector, tolerations)
    nodes = {"n1": n1, "n2": FitNode("n2", SEVEN)}
    plan = plan_reclaim(Rules.of(preemptor, state), nodes=nodes, pods_by_node=by_node(STORY))
    if node is None:
        assert plan is None
    else:
        assert plan is not None and plan.node == node
        assert [v.name for v in plan.victims] == victims


# -- preempt: room already promised -----------------------------------------------------------


def test_preempt_counts_room_promised_to_admitted_pods() -> None:
    # n1 holds a's 4 CPU bound; b's pods p (2) and q (2) were admitted, their binding not
    # seen yet. By bound pods alone n1 has 3 free and b's 3-CPU pod fits, yet kube-scheduler
    # (which placed p there) proposes a victim.
    bound = [usage("a0", "a", 2), usage("a1", "a", 2, created="2026-11-22T10:01:00Z")]
    promised = [usage("p", "b", 2, ASSUMED, bound=False), usage("q", "b", 2, ASSUMED, bound=False)]
    quotas = {**QUOTAS, "a": ElasticQuota("a", max=cpu(10))}  # a borrows all it holds
    rules = rules_for(quotas, [*bound, *promised], "b", cpu(3))
    assert victims_on_node(rules, "n1", SEVEN, bound) is None  # promised room not counted
    # counting it, bounded by what kube-scheduler's victim (a0: 2 CPU) frees: one pod
    victims = victims_on_node(rules, "n1", SEVEN, bound, promised=promised, proposed=[bound[0]])
    assert [v.name for v in victims or []] == ["a1"]
    # without kube-scheduler's bound, all promised room is counted here: both pods go
    victims = victims_on_node(rules, "n1", SEVEN, bound, promised=promised)
    assert [v.name for v in victims or []] == ["a1", "a0"]


def test_a_promised_pod_among_the_schedulers_victims_is_on_that_node() -> None:
    # a's pod p was admitted and assumed; kube-scheduler lists it as a victim on n1
    p = usage("p", "a", 2, ASSUMED, bound=False, created="2026-11-22T11:00:00Z")
    bound = [usage("a0", "a", 2), usage("b0", "b", 1)]
    rules = rules_for(QUOTAS, [p, *bound, usage("a1", "a", 4, "n2")], "b", cpu(3))
    victims = victims_on_node(rules, "n1", SEVEN, bound, promised=[p], proposed=[p])
    assert [v.name for v in victims or []] == ["p"]


def test_when_the_pod_fits_by_its_own_count_the_schedulers_legal_victims_stand() -> None:
    bound = [usage("a0", "a", 2), usage("a1", "a", 2)]
    rules = rules_for(QUOTAS, [*bound, usage("a2", "a", 4, "n2")], "b", cpu(1))
    victims = victims_on_node(rules, "n1", SEVEN, bound, proposed=[bound[0]])
    assert [v.name for v in victims or []] == ["a0"]
    other = usage("z", "nobody", 1)
    assert victims_on_node(rules, "n1", SEVEN, [*bound, other], proposed=[other]) is None


def test_a_borrowing_preemptor_takes_its_own_lower_priority_pods_enough_for_max() -> None:
    pods = [
        usage("job-0", "a", 2),
        usage("nb-0", "a", 2, priority=1000000, never=True),
        usage("job-1", "a", 2, "n2"),
        usage("nb-1", "a", 2, "n2", priority=1000000, never=True),
        usage("low", "other", 0.5, "n2", priority=-10),
    ]
    rules = rules_for(QUOTAS, pods, "a", cpu(4), priority=10)
    assert not rules.reclaiming and rules.quota_need() == {("own", "cpu"): 2}
    nodes = {"cpu": "7.5", "pods": "110"}
    # n1: 7.5 - 4 = 3.5 free, 0.5 short; job-0 frees it and a's max: 8 - 2 + 4 = 10
    assert [v.name for v in victims_on_node(rules, "n1", nodes, pods[:2]) or []] == ["job-0"]
