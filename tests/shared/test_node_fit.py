"""Node fit: Kubernetes' toleration rules, the order of the checks and their reasons, the room
arithmetic, and parsing taints and tolerations from the API's JSON."""

from dataclasses import dataclass
from fractions import Fraction

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from shared.node_fit import (
    FitNode,
    PodNeeds,
    Taint,
    Toleration,
    deficit,
    fits,
    free_on_node,
    taints_of,
    tolerates,
    tolerations_of,
    unfit_reason,
)
from shared.quantity import to_quantity

GPU = Taint("dedicated", "gpu", "NoSchedule")


@dataclass(frozen=True)
class Bound:
    request: dict[str, Fraction]


def cpu(n: float) -> dict[str, Fraction]:
    return {"cpu": Fraction(str(n))}


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        (Toleration("dedicated", "Equal", "gpu", "NoSchedule"), GPU, True),
        (Toleration("dedicated", "", "gpu", "NoSchedule"), GPU, True),  # empty means Equal
        (Toleration("dedicated", "Equal", "cpu", "NoSchedule"), GPU, False),  # other value
        (Toleration("dedicated", "Exists", "", "NoSchedule"), GPU, True),  # any value
        (Toleration("other", "Exists", "", "NoSchedule"), GPU, False),  # other key
        (Toleration("", "Exists", "", ""), GPU, True),  # empty key, Exists: everything
        (Toleration("", "Exists", "", "NoExecute"), GPU, False),  # ... of that effect only
        (Toleration("dedicated", "Equal", "gpu", ""), GPU, True),  # empty effect: all effects
        (Toleration("dedicated", "Equal", "gpu", "NoExecute"), GPU, False),  # other effect
        (Toleration("dedicated", "Lt", "gpu", "NoSchedule"), GPU, False),  # unknown operator
        (Toleration("k", "Equal", "", ""), Taint("k", "", "NoExecute"), True),
    ],
)
def test_toleration_rules(toleration: Toleration, taint: Taint, expected: bool) -> None:
    assert tolerates([toleration], taint) is expected


def test_no_tolerations_tolerate_nothing() -> None:
    assert not tolerates([], GPU)


NODE = FitNode(
    "n1",
    {"cpu": "4", "pods": "10"},
    labels={"disktype": "ssd", "zone": "a"},
)


@pytest.mark.parametrize(
    ("pod", "node", "bound", "reason"),
    [
        (PodNeeds(cpu(1)), NODE, [], None),
        (PodNeeds(cpu(1), {"disktype": "ssd"}), NODE, [], None),
        (PodNeeds(cpu(3)), NODE, [Bound(cpu(1))], None),  # exactly full
        (PodNeeds(cpu(1)), FitNode("n1", {"cpu": "4"}, unschedulable=True), [], "node is cordoned"),
        (
            PodNeeds(cpu(1), tolerations=(Toleration("", "Exists", "", ""),)),
            FitNode("n1", {"cpu": "4"}, unschedulable=True),
            [],
            None,  # tolerates node.kubernetes.io/unschedulable, as DaemonSet pods do
        ),
        (
            PodNeeds(cpu(1), {"disktype": "hdd"}),
            NODE,
            [],
            "nodeSelector disktype=hdd does not match",
        ),
        (PodNeeds(cpu(1), {"gpu": "yes"}), NODE, [], "nodeSelector gpu=yes does not match"),
        (
            PodNeeds(cpu(1)),
            FitNode("n1", {"cpu": "4"}, taints=(GPU,)),
            [],
            "taint dedicated=gpu:NoSchedule not tolerated",
        ),
        (
            PodNeeds(cpu(1)),
            FitNode("n1", {"cpu": "4"}, taints=(Taint("drain", "", "NoExecute"),)),
            [],
            "taint drain:NoExecute not tolerated",
        ),
        (
            PodNeeds(cpu(1)),
            FitNode("n1", {"cpu": "4"}, taints=(Taint("soft", "x", "PreferNoSchedule"),)),
            [],
            None,  # PreferNoSchedule only scores
        ),
        (
            PodNeeds(cpu(1), tolerations=(Toleration("dedicated", "Exists", "", ""),)),
            FitNode("n1", {"cpu": "4"}, taints=(GPU,)),
            [],
            None,
        ),
        (PodNeeds(cpu(5)), NODE, [], "needs cpu 1 more than free"),
        (PodNeeds(cpu(2)), NODE, [Bound(cpu(2.5))], "needs cpu 500m more than free"),
        (
            PodNeeds({"cpu": Fraction(5), "memory": Fraction(2 * 2**30)}),
            FitNode("n1", {"cpu": "4", "memory": "1Gi"}),
            [],
            "needs cpu 1, memory 1Gi more than free",
        ),
        (
            PodNeeds(cpu(0.1)),
            FitNode("n1", {"cpu": "4", "pods": "2"}),
            [Bound({}), Bound({})],
            "needs pods 1 more than free",  # no pod slot left
        ),
        (PodNeeds({"nvidia.com/gpu": Fraction(1)}), NODE, [], None),  # not listed: not checked
        (
            PodNeeds(cpu(1)),
            FitNode("n1", {"cpu": "four"}),
            [],
            "allocatable unreadable: status.allocatable.cpu: invalid quantity 'four': "
            "expected a number with an optional suffix, such as 500m or 2Gi",
        ),
        (  # the first failing check is named: cordoned before selector, taint and room
            PodNeeds(cpu(9), {"disktype": "hdd"}),
            FitNode("n1", {"cpu": "4"}, taints=(GPU,), unschedulable=True),
            [],
            "node is cordoned",
        ),
        (  # selector before taint and room
            PodNeeds(cpu(9), {"disktype": "hdd"}),
            FitNode("n1", {"cpu": "4"}, taints=(GPU,)),
            [],
            "nodeSelector disktype=hdd does not match",
        ),
        (  # taint before room
            PodNeeds(cpu(9)),
            FitNode("n1", {"cpu": "4"}, taints=(GPU,)),
            [],
            "taint dedicated=gpu:NoSchedule not tolerated",
        ),
    ],
)
def test_unfit_reason(pod: PodNeeds, node: FitNode, bound: list[Bound], reason: str | None) -> None:
    assert unfit_reason(pod, node, bound) == reason
    assert fits(pod, node, bound) is (reason is None)


def test_free_and_deficit() -> None:
    free = free_on_node({"cpu": "7", "pods": "110"}, [Bound(cpu(2)), Bound(cpu(3))])
    assert free == {"cpu": Fraction(2), "pods": Fraction(108)}
    assert deficit(cpu(5), free) == cpu(3)
    assert deficit(cpu(2), free) == {}
    assert deficit({"nvidia.com/gpu": Fraction(1)}, free) == {}  # not listed: not checked
    assert deficit({}, {"cpu": Fraction(1), "pods": Fraction(0)}) == {"pods": Fraction(1)}


def test_free_on_node_names_a_malformed_allocatable() -> None:
    with pytest.raises(ValueError, match=r"status\.allocatable\.memory"):
        free_on_node({"memory": "lots"}, [])


def test_taints_of_skips_malformed_entries() -> None:
    spec = {
        "taints": [
            {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
            {"key": "drain", "effect": "NoExecute"},  # no value
            {"key": "x", "value": 3, "effect": "NoSchedule"},  # value not a string
            {"value": "v", "effect": "NoSchedule"},  # no key
            {"key": "y"},  # no effect
            "not a taint",
            None,
        ]
    }
    assert taints_of(spec) == (GPU, Taint("drain", "", "NoExecute"))
    assert taints_of(spec["taints"]) == (GPU, Taint("drain", "", "NoExecute"))  # the list


@pytest.mark.parametrize("spec", [None, {}, {"taints": None}, {"taints": "x"}, [], 3, "x"])
def test_taints_of_anything_else_is_none(spec: object) -> None:
    assert taints_of(spec) == ()


def test_tolerations_of_skips_malformed_entries() -> None:
    raw = [
        {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
        {"operator": "Exists"},
        {"key": "k", "value": "v"},  # operator defaults to Equal
        {"key": "t", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
        {"key": 1, "operator": "Exists"},  # key not a string
        {"key": "t", "tolerationSeconds": "30"},  # seconds not an integer
        {"key": "t", "tolerationSeconds": True},
        "nope",
    ]
    assert tolerations_of(raw) == (
        Toleration("dedicated", "Equal", "gpu", "NoSchedule"),
        Toleration("", "Exists", "", ""),
        Toleration("k", "Equal", "v", ""),
        Toleration("t", "Exists", "", "NoExecute", 30),
    )
    assert tolerations_of(None) == ()
    assert tolerations_of({"key": "k"}) == ()


names = st.text("abcdefgh", min_size=1, max_size=4)
resource_names = st.sampled_from(["cpu", "memory", "pods", "example.com/gpu"])
amounts = st.fractions(min_value=0, max_value=100, max_denominator=1000)
resources = st.dictionaries(resource_names, amounts, max_size=4)
blocking_taints = st.builds(Taint, names, names, st.sampled_from(["NoSchedule", "NoExecute"]))
tolerations = st.builds(
    Toleration,
    st.sampled_from(["", "a", "b", "ab"]),
    st.sampled_from(["Equal", "Exists", ""]),
    st.sampled_from(["", "a", "b"]),
    st.sampled_from(["", "NoSchedule", "NoExecute", "PreferNoSchedule"]),
)


def allocatable_of(*lists: dict[str, Fraction]) -> dict[str, str]:
    """The API's spelling of the sum (rounded up to a whole nano, never less)."""
    total: dict[str, Fraction] = {}
    for resources_ in lists:
        for name, value in resources_.items():
            total[name] = total.get(name, Fraction(0)) + value
    return {name: to_quantity(value) for name, value in total.items()}


@given(
    request=resources,
    bound=st.lists(resources, max_size=5),
    spare=resources,
    labels=st.dictionaries(names, names, max_size=3),
)
def test_a_node_with_room_and_no_requirements_fits(
    request: dict[str, Fraction],
    bound: list[dict[str, Fraction]],
    spare: dict[str, Fraction],
    labels: dict[str, str],
) -> None:
    slots = {"pods": Fraction(len(bound) + 1)}
    node = FitNode("n", allocatable_of(request, *bound, slots, spare), labels=labels)
    assert unfit_reason(PodNeeds(request), node, [Bound(b) for b in bound]) is None


@given(
    request=resources,
    allocatable=resources,
    bound=st.lists(resources, max_size=3),
    taint=blocking_taints,
    others=st.lists(blocking_taints, max_size=2),
    held=st.lists(tolerations, max_size=3),
    unschedulable=st.booleans(),
)
def test_an_untolerated_blocking_taint_never_fits(
    request: dict[str, Fraction],
    allocatable: dict[str, Fraction],
    bound: list[dict[str, Fraction]],
    taint: Taint,
    others: list[Taint],
    held: list[Toleration],
    unschedulable: bool,
) -> None:
    assume(not tolerates(held, taint))
    pod = PodNeeds(request, tolerations=tuple(held))
    node = FitNode(
        "n", allocatable_of(allocatable), taints=(*others, taint), unschedulable=unschedulable
    )
    assert not fits(pod, node, [Bound(b) for b in bound])
