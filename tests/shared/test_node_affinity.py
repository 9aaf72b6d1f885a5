"""Required node affinity as kube-scheduler's NodeAffinity filter reads it, each case by hand."""

from typing import Any

import pytest

from shared.node_fit import FitNode, PodNeeds, placement_reason, required_affinity

NODE = FitNode("n1", {"cpu": "8"}, labels={"zone": "a", "disk": "ssd", "gpus": "4"})


def affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
        }
    }


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": key, "operator": operator, "values": list(values)}]}


@pytest.mark.parametrize(
    ("raw", "fits"),
    [
        (None, True),
        ({}, True),
        (affinity(expr("zone", "In", "a", "b")), True),
        (affinity(expr("zone", "In", "b")), False),
        (affinity(expr("zone", "NotIn", "b")), True),
        (affinity(expr("rack", "NotIn", "r1")), True),  # absent label: NotIn holds
        (affinity(expr("disk", "Exists")), True),
        (affinity(expr("disk", "DoesNotExist")), False),
        (affinity(expr("gpus", "Gt", "3")), True),
        (affinity(expr("gpus", "Lt", "4")), False),
        (affinity(expr("zone", "Gt", "3")), False),  # not a number
        (affinity(expr("zone", "In", "b"), expr("disk", "In", "ssd")), True),  # any term
        (
            affinity(
                {
                    "matchExpressions": [
                        {"key": "zone", "operator": "In", "values": ["a"]},
                        {"key": "disk", "operator": "In", "values": ["hdd"]},
                    ]
                }
            ),
            False,
        ),
        (
            affinity(
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
            ),
            True,
        ),
        (affinity({}), False),  # an empty term matches nothing
        (affinity(expr("zone", "Near", "a")), False),  # an unknown operator
        (
            {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": "x"}
                }
            },
            False,
        ),
    ],
)
def test_required_node_affinity(raw: Any, fits: bool) -> None:
    needs = PodNeeds(requests={}, required=required_affinity(raw))
    reason = placement_reason(needs, NODE)
    assert (reason is None) == fits, reason
