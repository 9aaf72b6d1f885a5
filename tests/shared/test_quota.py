from fractions import Fraction
from typing import Any

import pytest

from shared.quota import ElasticQuota, QuotaState, Totals, decide, reclaiming

GI = 2**30


def cpu(n: float) -> dict[str, Fraction]:
    return {"cpu": Fraction(str(n))}


def res(cores: float, gi: float) -> dict[str, Fraction]:
    return {"cpu": Fraction(str(cores)), "memory": Fraction(str(gi)) * GI}


# The user story: namespace A {min 6, max 10} CPU, B {min 12, max 14}.
QUOTAS = {
    "a": ElasticQuota("a", min=cpu(6), max=cpu(10)),
    "b": ElasticQuota("b", min=cpu(12), max=cpu(14)),
}


@pytest.mark.parametrize(
    ("namespace", "request_cpu", "used", "admitted", "may_preempt"),
    [
        ("a", 2, {"a": cpu(4)}, True, False),  # A's first notebook pod: 6, exactly its min
        ("a", 2, {"a": cpu(6)}, True, False),  # the second borrows: 8 in use <= 18 of min
        ("b", 5, {"a": cpu(8), "b": cpu(3)}, True, False),  # job-2: B stays within its min
        ("a", 4, {"a": cpu(8)}, False, False),  # 12 > max 10
        ("a", 2, {"a": cpu(8)}, True, False),  # 10 == max: allowed
        ("b", 2, {"a": cpu(8), "b": cpu(12)}, False, False),  # 22 in use > 18 of min
        # b stays within its min, but a borrowed what b now wants: 10 + 5 + 5 = 20 > 18.
        # Refused like every pod (CapacityScheduling's PreFilter), and it takes it back.
        ("b", 5, {"a": cpu(10), "b": cpu(5)}, False, True),
        ("b", 3, {"a": cpu(10), "b": cpu(5)}, True, False),  # 18 == 18
        ("other", 100, {"a": cpu(10)}, True, False),  # no quota: unaffected
    ],
)
def test_admission_table(
    namespace: str, request_cpu: float, used: dict[str, Any], admitted: bool, may_preempt: bool
) -> None:
    decision = decide(namespace, cpu(request_cpu), QUOTAS, used)
    assert decision.admitted is admitted, decision.message
    assert decision.preemption_may_help is may_preempt


def test_messages_name_namespace_resource_and_numbers() -> None:
    over_max = decide("a", cpu(4), QUOTAS, {"a": cpu(8)})
    assert over_max.message == "elastic quota of namespace a: cpu used + request 12 > max 10"
    over_pool = decide("b", cpu(2), QUOTAS, {"a": cpu(8), "b": cpu(12)})
    assert "namespace b: cpu would be borrowed" in over_pool.message
    assert "in use 22 > sum of min 18" in over_pool.message


def test_a_lender_refused_by_the_sum_of_min_is_told_it_reclaims() -> None:
    decision = decide("b", cpu(5), QUOTAS, {"a": cpu(10), "b": cpu(5)})
    assert decision.message == (
        "elastic quota of namespace b: cpu of its min is lent to namespaces over theirs "
        "(in use 20 > sum of min 18); reclaiming"
    )


def test_lower_priority_pods_of_the_namespace_make_preemption_legal() -> None:
    decision = decide("a", cpu(4), QUOTAS, {"a": cpu(8)}, lower_priority_used=cpu(2))
    assert not decision.admitted and decision.preemption_may_help
    too_little = decide("a", cpu(4), QUOTAS, {"a": cpu(8)}, lower_priority_used=cpu(1))
    assert not too_little.preemption_may_help


def test_missing_min_and_max_and_other_resources() -> None:
    quotas = {
        "gpu": ElasticQuota(
            "gpu", min={"nvidia.com/gpu": Fraction(2)}, max={"nvidia.com/gpu": Fraction(4)}
        ),
        "free": ElasticQuota("free"),
    }
    # cpu is in neither min nor max: this quota does not govern it
    assert decide("gpu", cpu(1), quotas, {}).admitted
    # named in max only: min is 0, so all of it is borrowed from the others' min
    maxed = {"m": ElasticQuota("m", max=cpu(4)), "lender": ElasticQuota("lender", min=cpu(2))}
    assert decide("m", cpu(2), maxed, {}).admitted
    assert not decide("m", cpu(3), maxed, {}).admitted
    assert decide("gpu", {"nvidia.com/gpu": Fraction(2)}, quotas, {}).admitted
    assert not decide("gpu", {"nvidia.com/gpu": Fraction(5)}, quotas, {}).admitted
    assert decide("gpu", {"memory": Fraction(0)}, quotas, {}).admitted


def test_reclaiming_means_within_min() -> None:
    assert reclaiming("b", cpu(5), QUOTAS, {"b": cpu(3)})
    assert not reclaiming("a", cpu(2), QUOTAS, {"a": cpu(6)})
    assert not reclaiming("other", cpu(1), QUOTAS, {})


MULTI = {
    "x": ElasticQuota("x", min=res(4, 4)),
    "y": ElasticQuota("y", min=res(4, 8)),
    "c": ElasticQuota("c", min=cpu(2)),
}


@pytest.mark.parametrize(
    ("namespace", "used", "borrower"),
    [
        ("x", res(1, 6), True),  # over in memory, under in CPU: a borrower
        ("x", res(5, 1), True),
        ("x", res(4, 4), False),  # exactly at min
        ("c", res(2, 64), False),  # c's quota does not govern memory
        ("c", res(3, 0), True),
    ],
)
def test_a_borrower_is_over_its_min_in_any_resource(
    namespace: str, used: dict[str, Fraction], borrower: bool
) -> None:
    state = QuotaState.of(MULTI, {namespace: used})
    assert state.is_borrower(namespace) is borrower


def test_a_lender_stays_within_its_min_in_every_resource() -> None:
    # x is over its memory min: a CPU-only pod of x does not reclaim (CapacityScheduling's
    # usedOverMinWith looks at every resource), though it stays within x's CPU min
    assert not reclaiming("x", res(1, 0), MULTI, {"x": res(1, 6)})
    assert reclaiming("x", res(1, 0), MULTI, {"x": res(1, 4)})
    assert reclaiming("y", res(1, 2), MULTI, {"y": res(1, 2)})


def test_the_pool_of_a_resource_counts_only_the_quotas_that_govern_it() -> None:
    totals = Totals.of(MULTI, {"x": res(1, 6), "c": res(1, 64)})
    assert totals.used == res(2, 6) and totals.min == res(10, 12)
    state = QuotaState(MULTI, {"x": res(1, 6), "c": res(1, 64)}, totals)
    assert state.pool_excess("y", res(1, 7)) == {"memory": 1 * GI}
    assert state.without("x", res(1, 2)).totals.used == res(1, 4)


@pytest.mark.parametrize(
    ("obj", "error"),
    [
        ({"spec": {"min": {"cpu": "x"}}}, "spec.min.cpu: invalid quantity"),
        ({"spec": {"max": ["cpu"]}}, "spec.max: must be a map"),
        ({"spec": "nope"}, "spec: must be an object"),
    ],
)
def test_malformed_objects_name_the_field(obj: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        ElasticQuota.from_object(obj)


def test_from_object() -> None:
    quota = ElasticQuota.from_object(
        {
            "metadata": {"namespace": "a"},
            "spec": {"min": {"cpu": "6", "memory": "8Gi"}, "max": {"cpu": "10"}},
        }
    )
    assert quota.namespace == "a" and quota.guaranteed("memory") == 8 * 2**30
    assert quota.ceiling("cpu") == 10 and quota.ceiling("memory") is None
    assert ElasticQuota.from_object({"metadata": {"namespace": "b"}, "spec": {}}).max is None
