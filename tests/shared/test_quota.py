from fractions import Fraction

import pytest

from shared.quota import ElasticQuota, admit, reclaiming


def cpu(n: float) -> dict[str, Fraction]:
    return {"cpu": Fraction(str(n))}


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
        ("other", 100, {"a": cpu(10)}, True, False),  # no quota: unaffected
    ],
)
def test_admission_table(
    namespace: str, request_cpu: float, used: dict, admitted: bool, may_preempt: bool
) -> None:
    decision = admit(namespace, cpu(request_cpu), QUOTAS, used)
    assert decision.admitted is admitted, decision.message
    assert decision.preemption_may_help is may_preempt


def test_messages_name_namespace_resource_and_numbers() -> None:
    over_max = admit("a", cpu(4), QUOTAS, {"a": cpu(8)})
    assert over_max.message == "elastic quota of namespace a: cpu used + request 12 > max 10"
    over_pool = admit("b", cpu(2), QUOTAS, {"a": cpu(8), "b": cpu(12)})
    assert "namespace b: cpu would be borrowed" in over_pool.message
    assert "in use 22 > sum of min 18" in over_pool.message


def test_lower_priority_pods_of_the_namespace_make_preemption_legal() -> None:
    decision = admit("a", cpu(4), QUOTAS, {"a": cpu(8)}, lower_priority_used=cpu(2))
    assert not decision.admitted and decision.preemption_may_help
    too_little = admit("a", cpu(4), QUOTAS, {"a": cpu(8)}, lower_priority_used=cpu(1))
    assert not too_little.preemption_may_help


def test_missing_min_and_max_and_other_resources() -> None:
    quotas = {
        "gpu": ElasticQuota(
            "gpu", min={"nvidia.com/gpu": Fraction(2)}, max={"nvidia.com/gpu": Fraction(4)}
        ),
        "free": ElasticQuota("free"),
    }
    # cpu is in neither min nor max: this quota does not govern it
    assert admit("gpu", cpu(1), quotas, {}).admitted
    # named in max only: min is 0, so all of it is borrowed from the others' min
    maxed = {"m": ElasticQuota("m", max=cpu(4)), "lender": ElasticQuota("lender", min=cpu(2))}
    assert admit("m", cpu(2), maxed, {}).admitted
    assert not admit("m", cpu(3), maxed, {}).admitted
    assert admit("gpu", {"nvidia.com/gpu": Fraction(2)}, quotas, {}).admitted
    assert not admit("gpu", {"nvidia.com/gpu": Fraction(5)}, quotas, {}).admitted
    assert admit("gpu", {"memory": Fraction(0)}, quotas, {}).admitted


def test_reclaiming_means_within_min() -> None:
    assert reclaiming("b", cpu(5), QUOTAS, {"b": cpu(3)})
    assert not reclaiming("a", cpu(2), QUOTAS, {"a": cpu(6)})
    assert not reclaiming("other", cpu(1), QUOTAS, {})


@pytest.mark.parametrize(
    ("obj", "error"),
    [
        ({"spec": {"min": {"cpu": "x"}}}, "spec.min.cpu: invalid quantity"),
        ({"spec": {"max": ["cpu"]}}, "spec.max: must be a map"),
        ({"spec": "nope"}, "spec: must be an object"),
    ],
)
def test_malformed_objects_name_the_field(obj: dict, error: str) -> None:
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
