from fractions import Fraction

import pytest

from shared.quota import ElasticQuota
from shared.quota_ledger import PodUsage
from shared.reclaim import (
    deficit,
    free_on_node,
    keeps_min,
    newest_first_by_priority,
    plan_reclaim,
    reclaim_order,
    select_victims,
)


def cpu(n: float) -> dict[str, Fraction]:
    return {"cpu": Fraction(str(n))}


def usage(
    name: str,
    namespace: str,
    cores: float,
    node: str = "n1",
    *,
    priority: int = 0,
    created: str = "2026-11-22T10:00:00Z",
    never: bool = False,
    terminating: bool = False,
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
        request=cpu(cores),
    )


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


def test_select_victims_is_minimal_and_in_order() -> None:
    pods = [usage("small", "a", 1), usage("big", "a", 4), usage("mid", "a", 2)]
    # greedy takes small, big (covers 3), then reprieves small: {big}
    assert [v.name for v in select_victims(cpu(3), pods, legal=lambda _: True) or []] == ["big"]
    assert select_victims({}, pods, legal=lambda _: True) == []
    assert select_victims(cpu(8), pods, legal=lambda _: True) is None
    only_small = select_victims(cpu(1), pods, legal=lambda v: all(p.name != "big" for p in v))
    assert [v.name for v in only_small or []] == ["small"]


@pytest.mark.parametrize(
    ("victims", "legal"),
    [
        ([usage("j", "a", 2)], True),  # a: 8 -> 6 == min
        ([usage("j", "a", 2), usage("k", "a", 2)], False),  # a: 8 -> 4 < min
        ([usage("x", "b", 1)], False),  # b is below its min already
        ([usage("x", "nobody", 1)], False),  # no quota: not a borrower
    ],
)
def test_keeps_min(victims: list[PodUsage], legal: bool) -> None:
    assert keeps_min(QUOTAS, {"a": cpu(8), "b": cpu(3)})(victims) is legal


def test_orders() -> None:
    pods = [
        usage("old-low", "a", 1, priority=0, created="2026-11-22T09:00:00Z"),
        usage("new-low", "a", 1, priority=0, created="2026-11-22T11:00:00Z"),
        usage("high", "a", 1, priority=100),
        usage("online", "a", 1, priority=-5, never=True),
        usage("c-pod", "c", 1, priority=50),
    ]
    assert [p.name for p in newest_first_by_priority(pods)] == [
        "online",
        "new-low",
        "old-low",
        "c-pod",
        "high",
    ]
    quotas = {**QUOTAS, "c": ElasticQuota("c", min=cpu(0))}
    used = {"a": cpu(8), "c": cpu(5)}  # c is 5 over, a is 2 over
    assert [p.name for p in reclaim_order(pods, quotas, used, cpu(1))] == [
        "c-pod",
        "new-low",
        "old-low",
        "high",
        "online",
    ]


def test_the_user_story_evicts_one_job_pod_never_a_notebook() -> None:
    # 2 nodes x 7 CPU; a's job and notebook pods spread one of each per node; b's job-1 on n1
    pods = [
        usage("job-0", "a", 2, "n1"),
        usage("nb-0", "a", 2, "n1", priority=1000000, never=True),
        usage("job-1-b", "b", 3, "n1"),
        usage("job-1", "a", 2, "n2", created="2026-11-22T10:01:00Z"),
        usage("nb-1", "a", 2, "n2", priority=1000000, never=True),
    ]
    by_node: dict[str, dict[str, PodUsage]] = {}
    for p in pods:
        by_node.setdefault(p.node, {})[p.uid] = p
    plan = plan_reclaim(
        "b",
        cpu(5),
        nodes={"n1": SEVEN, "n2": SEVEN},
        pods_by_node=by_node,
        quotas=QUOTAS,
        used={"a": cpu(8), "b": cpu(3)},
    )
    assert plan is not None and plan.node == "n2"
    assert [v.name for v in plan.victims] == ["job-1"]


def test_no_plan_when_it_would_push_a_lender_below_min() -> None:
    by_node = {
        "n1": {p.uid: p for p in [usage("j0", "a", 2), usage("j1", "a", 2), usage("j2", "a", 3)]}
    }
    plan = plan_reclaim(
        "b",
        cpu(5),
        nodes={"n1": SEVEN},
        pods_by_node=by_node,
        quotas=QUOTAS,
        used={"a": cpu(7), "b": cpu(0)},
    )
    assert plan is None  # freeing 5 of a's 7 would leave a at 2 < min 6
    fits = plan_reclaim("b", cpu(0.5), nodes={"n1": SEVEN}, pods_by_node={}, quotas=QUOTAS, used={})
    assert fits is not None and fits.victims == []
