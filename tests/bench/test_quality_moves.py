"""bench/quality_moves.py: what evictions did, from the pods' lives, worked by hand; and the
bench's watch store those lives come from."""

from bench.quality_moves import Budget, PodLife, Workloads, moves
from bench.quality_pods import Lives
from shared.kube.meta import PodMeta
from shared.pods import Pod, PodSpec

END = 300.0


def known(**overrides: object) -> Workloads:
    fields: dict[str, object] = {
        "ended": {},
        "created": {"w": 0.0, "v": 0.0, "u": 0.0},
        "startup": {"w": 10.0, "v": 10.0, "u": 10.0},
        "groups": {"w": "burst-0", "v": "burst-0", "u": "burst-0"},
        "budgets": {},
        "end": END,
        **overrides,
    }
    return Workloads(**fields)  # type: ignore[arg-type]


def test_a_pod_deleted_with_its_workload_was_not_evicted() -> None:
    lives = [PodLife("w-a", "w", 0.0, "n1", 1.0, gone_at=100.5)]
    got = moves(lives, known(ended={"w": 100.0}))
    assert got.evictions == 0 and got.lost == 0


def test_an_eviction_and_its_replacement_elsewhere() -> None:
    lives = [
        PodLife("w-a", "w", 0.0, "n1", 1.0, gone_at=50.0),
        PodLife("w-b", "w", 50.1, "n2", 53.0),
    ]
    got = moves(lives, known())
    assert (got.evictions, got.most_of_one, got.evicted_twice, got.back_on_source) == (1, 1, 0, 0)
    assert got.replacement_latencies == [3.0]  # 53 - 50


def test_a_replacement_back_on_the_node_its_pod_left_and_a_second_eviction() -> None:
    lives = [
        PodLife("w-a", "w", 0.0, "n1", 1.0, gone_at=50.0),
        PodLife("w-b", "w", 50.1, "n1", 52.0, gone_at=80.0),
        PodLife("w-c", "w", 80.1, "n2", 81.0),
    ]
    got = moves(lives, known())
    assert (got.evictions, got.most_of_one, got.evicted_twice, got.back_on_source) == (2, 2, 1, 1)


def test_a_replacement_never_bound_is_lost_unless_the_end_came_too_soon() -> None:
    lives = [
        PodLife("w-a", "w", 0.0, "n1", 1.0, gone_at=50.0),
        PodLife("w-b", "w", 50.1),  # never bound, the workload lives on: lost
        PodLife("v-a", "v", 0.0, "n1", 1.0, gone_at=90.0),
        PodLife("v-b", "v", 90.1),  # its workload ended 20 s after: not judged
        PodLife("u-a", "u", 0.0, "n1", 1.0, gone_at=290.0),  # the run ended 10 s after
    ]
    got = moves(lives, known(ended={"v": 110.0}))
    assert (got.evictions, got.lost) == (3, 1)


def test_evictions_past_the_budget_of_their_group_are_counted() -> None:
    """Three workloads alive, maxUnavailable 10 % → 1 may be disrupted at a time (rounded up).
    w is evicted at 50 and its replacement is ready at 62 (bound 52 + startup 10); v evicted
    at 55 makes two disrupted: one past the budget. u evicted at 70 is alone again."""
    lives = [
        PodLife("w-a", "w", 0.0, "n1", 1.0, gone_at=50.0),
        PodLife("w-b", "w", 50.1, "n2", 52.0),
        PodLife("v-a", "v", 0.0, "n1", 1.0, gone_at=55.0),
        PodLife("v-b", "v", 55.1, "n2", 56.0),
        PodLife("u-a", "u", 0.0, "n1", 1.0, gone_at=70.0),
        PodLife("u-b", "u", 70.1, "n3", 71.0),
    ]
    got = moves(lives, known(budgets={"burst-0": Budget(0.1)}))
    assert got.over_budget == 1
    assert moves(lives, known()).over_budget == 0  # no budget, nothing judged


def test_the_budget_counts_the_workloads_alive_then() -> None:
    assert Budget(0.1).allowed(3) == 1
    assert Budget(0.1).allowed(11) == 2
    assert Budget(0.1).allowed(0) == 0


def test_the_watch_store_keeps_when_each_pod_was_seen_bound_and_its_deletion_began() -> None:
    def pod(node: str = "", deleting: bool = False) -> Pod:
        meta = PodMeta(
            name="w-a",
            labels={"workload": "w"},
            deletionTimestamp="2026-01-01T00:00:00Z" if deleting else None,
        )
        return Pod(metadata=meta, spec=PodSpec(nodeName=node))

    store = Lives()
    store.replace([pod()])
    [seen] = store.snapshot()
    assert (seen.workload, seen.bound_at, seen.gone_at) == ("w", None, None)
    store.apply("MODIFIED", pod("n1"))
    store.apply("MODIFIED", pod("n2"))  # bound once: the first binding is kept
    [bound] = store.snapshot()
    assert bound.node == "n1" and bound.bound_at is not None and bound.gone_at is None
    store.apply("MODIFIED", pod("n1", deleting=True))
    store.apply("DELETED", pod("n1", deleting=True))
    [gone] = store.snapshot()
    assert gone.gone_at is not None and gone.gone_at >= bound.bound_at
    other = Lives()
    other.apply("DELETED", pod("n1"))  # gone from the watch without a deletion timestamp
    assert other.snapshot()[0].gone_at is not None
