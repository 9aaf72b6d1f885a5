from fractions import Fraction

import msgspec

from shared.pods import POD_DECODER, Pod
from shared.quota_ledger import ASSUMED, QUOTA_DECODER, QuotaLedger
from tests.fakes.clock import Clock
from tests.quota_objects import elastic_quota, quota_pod


def pod(*args: object, **kwargs: object) -> Pod:
    return POD_DECODER.decode(msgspec.json.encode(quota_pod(*args, **kwargs)))  # type: ignore[arg-type]


def quota(*args: object, **kwargs: object):  # type: ignore[no-untyped-def]
    return QUOTA_DECODER.decode(msgspec.json.encode(elastic_quota(*args, **kwargs)))  # type: ignore[arg-type]


def cpu(n: float) -> dict[str, Fraction]:
    return {"cpu": Fraction(str(n))}


def story_ledger(clock: Clock | None = None) -> QuotaLedger:
    ledger = QuotaLedger(clock=(clock or Clock()).monotonic, assume_seconds=30)
    ledger.quota_store.replace(
        [quota("a", min={"cpu": 6}, max={"cpu": 10}), quota("b", min={"cpu": 12}, max={"cpu": 14})]
    )
    ledger.pod_store.replace(
        [
            pod("job-0", "a", 2, node="n1"),
            pod("job-1", "a", 2, node="n2"),
            pod("nb-0", "a", 2, node="n1", priority=1000000, never=True),
            pod("pending", "a", 2),  # neither bound nor nominated: does not count
            pod("done", "a", 2, node="n2", phase="Succeeded"),
            pod("x", "other", 4, node="n2"),
        ]
    )
    return ledger


def test_counts_bound_and_nominated_non_terminal_pods() -> None:
    ledger = story_ledger()
    assert ledger.namespace_used("a") == cpu(6)
    assert ledger.pool_used == cpu(6)  # namespaces without a quota stay out of the pool
    assert ledger.pool_min == cpu(18)
    assert set(ledger.by_node["n2"]) == {"uid-a-job-1", "uid-other-x"}
    ledger.pod_store.apply("ADDED", pod("p", "b", 3, nominated="n2"))
    assert ledger.namespace_used("b") == cpu(3) and ledger.pool_used == cpu(9)


def test_watch_events_update_incrementally() -> None:
    ledger = story_ledger()
    ledger.pod_store.apply("MODIFIED", pod("job-0", "a", 2, node="n1", phase="Failed"))
    assert ledger.namespace_used("a") == cpu(4)
    ledger.pod_store.apply("DELETED", pod("job-1", "a", 2, node="n2"))
    assert ledger.namespace_used("a") == cpu(2) and "n2" in ledger.by_node
    ledger.pod_store.apply("DELETED", pod("x", "other", 4, node="n2"))
    assert "n2" not in ledger.by_node
    # a relist drops what is gone
    ledger.pod_store.replace([pod("job-0", "a", 2, node="n1")])
    assert ledger.namespace_used("a") == cpu(2) and ledger.pool_used == cpu(2)


def test_admission_excludes_the_pod_itself_and_uses_totals() -> None:
    ledger = story_ledger()
    # nb-1 (2 CPU) borrows: 8 > min 6 but 8 <= 18 of min
    assert ledger.admit(pod("nb-1", "a", 2), cpu(2)).admitted
    # a nominated pod retried after preemption is not counted twice
    ledger.pod_store.apply("ADDED", pod("big", "a", 4, nominated="n2"))
    assert ledger.namespace_used("a") == cpu(10)
    assert ledger.admit(pod("big", "a", 4, nominated="n2"), cpu(4)).admitted
    refused = ledger.admit(pod("more", "a", 1), cpu(1))
    assert not refused.admitted
    assert refused.message == "elastic quota of namespace a: cpu used + request 11 > max 10"
    assert not refused.preemption_may_help  # nothing of lower priority in a


def test_lower_priority_pods_make_a_rejection_preemptible() -> None:
    ledger = story_ledger()
    ledger.pod_store.apply("ADDED", pod("filler", "a", 4, node="n2"))
    decision = ledger.admit(pod("vip", "a", 2, priority=10), cpu(2))
    assert not decision.admitted and decision.preemption_may_help


def test_assumed_pods_count_until_bound_or_expired() -> None:
    clock = Clock()
    ledger = story_ledger(clock)
    burst = [pod(f"burst-{i}", "a", 2) for i in range(3)]
    admitted = []
    for p in burst:
        if ledger.admit(p, cpu(2)).admitted:
            ledger.assume(p, cpu(2))
            admitted.append(p.metadata.name)
    assert admitted == ["burst-0", "burst-1"]  # 6 + 2 + 2 = 10 = max
    assert ledger.assumed == 2
    # an update before binding keeps the assumption; the binding replaces it
    ledger.pod_store.apply("MODIFIED", burst[0])
    assert ledger.namespace_used("a") == cpu(10)
    ledger.pod_store.apply("MODIFIED", pod("burst-0", "a", 2, node="n1"))
    assert ledger.namespace_used("a") == cpu(10) and not ledger.is_assumed("uid-a-burst-0")
    assert ledger.assumed == 1
    # the scheduler gave up on burst-1: its assumption goes
    ledger.pod_store.apply("MODIFIED", pod("burst-1", "a", 2, unschedulable=True))
    assert ledger.namespace_used("a") == cpu(8)
    assert ledger.assumed == 0
    ledger.assume(burst[2], cpu(2))
    clock.advance(31)
    ledger.expire_assumed()
    assert ledger.namespace_used("a") == cpu(8)
    assert ledger.assumed == 0


def test_invalid_and_duplicate_quotas_are_ignored_and_reported() -> None:
    ledger = QuotaLedger()
    ledger.quota_store.replace(
        [
            quota("a", min={"cpu": "lots"}),
            quota("b", min={"cpu": 1}, name="first"),
            quota("b", min={"cpu": 9}, name="second"),
        ]
    )
    assert set(ledger.quotas) == {"b"} and ledger.quotas["b"].guaranteed("cpu") == 1
    assert "spec.min.cpu: invalid quantity" in ledger.invalid[("a", "quota")]
    assert "already has an ElasticQuota" in ledger.invalid[("b", "second")]
    ledger.quota_store.apply("MODIFIED", quota("a", min={"cpu": 2}))
    assert set(ledger.quotas) == {"a", "b"} and ("a", "quota") not in ledger.invalid
    ledger.quota_store.apply("DELETED", quota("b", name="first"))
    assert ledger.quotas["b"].guaranteed("cpu") == 9


def test_pool_follows_quota_changes() -> None:
    ledger = story_ledger()
    ledger.quota_store.apply("ADDED", quota("other", min={"cpu": 1}))
    assert ledger.pool_used == cpu(10) and ledger.pool_min == cpu(19)
    ledger.quota_store.apply("DELETED", quota("other"))
    assert ledger.pool_used == cpu(6)


def test_the_pool_sums_each_resource_over_the_quotas_that_govern_it() -> None:
    ledger = story_ledger()
    body = quota_pod("m0", "mem", 2, node="n1")
    body["spec"]["containers"][0]["resources"]["requests"]["memory"] = "1Gi"
    ledger.quota_store.apply("ADDED", quota("mem", min={"memory": "4Gi"}))
    ledger.pod_store.apply("ADDED", POD_DECODER.decode(msgspec.json.encode(body)))
    # mem's quota says nothing of CPU: its pod's CPU stays out of the pool
    assert ledger.pool_used == {"cpu": 6, "memory": 2**30}
    assert ledger.pool_min == {"cpu": 18, "memory": 4 * 2**30}
    ledger.quota_store.apply("DELETED", quota("mem"))
    assert ledger.pool_used == {"cpu": 6}


def test_only_bound_pods_hold_room_on_a_node() -> None:
    ledger = story_ledger()
    ledger.pod_store.apply("ADDED", pod("nom", "b", 3, nominated="n2"))
    ledger.assume(pod("new", "b", 1), cpu(1))
    assert ledger.pods["uid-a-job-1"].bound
    assert not ledger.pods["uid-b-nom"].bound and ledger.pods["uid-b-nom"].node == "n2"
    assert not ledger.pods["uid-b-new"].bound and ledger.pods["uid-b-new"].node == ASSUMED


def test_state_without_the_pod_a_decision_is_about() -> None:
    ledger = story_ledger()
    ledger.pod_store.apply("ADDED", pod("nom", "b", 3, nominated="n2"))
    state = ledger.state(without="uid-b-nom")
    assert state.use_of("b") == {"cpu": 0} and state.totals.used == cpu(6)
    assert ledger.state().use_of("b") == cpu(3) and ledger.state().totals.used == cpu(9)
