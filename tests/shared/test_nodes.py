"""The one Node struct: what node fit and address matching read of a real-looking node."""

from typing import Any

import msgspec
import pytest

from shared.node_fit import FitNode, Taint
from shared.nodes import NODE_DECODER, Address, Node
from tests import payloads


def decode(body: dict[str, Any]) -> Node:
    return NODE_DECODER.decode(msgspec.json.encode(body))


def test_a_kubelet_node_reads_as_node_fit_and_address_matching_need() -> None:
    body = payloads.node("n1", {"load": "1"}, index=3)
    body["spec"]["taints"] = [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]
    body["spec"]["unschedulable"] = True
    node = decode(body)
    assert node.metadata.name == "n1"
    assert node.metadata.annotations is not None and node.metadata.annotations["load"] == "1"
    assert node.fit() == FitNode(
        name="n1",
        allocatable=body["status"]["allocatable"],
        labels=body["metadata"]["labels"],
        taints=(Taint("gpu", "yes", "NoSchedule"),),
        unschedulable=True,
    )
    assert node.addresses() == [Address("InternalIP", "10.0.0.3"), Address("Hostname", "n1")]


@pytest.mark.parametrize(
    ("metadata", "spec", "status", "labels", "taints", "addresses"),
    [
        ({}, {}, {}, {}, (), []),
        # values that are not strings are left out, the rest kept
        ({"labels": {"a": "b", "n": 1, "x": None}}, {}, {}, {"a": "b"}, (), []),
        ({"labels": ["a"]}, {}, {}, {}, (), []),
        # a taint without an effect, or not an object, is skipped
        (
            {},
            {"taints": [{"key": "k"}, "t", {"key": "k", "effect": "NoExecute"}]},
            {},
            {},
            (Taint("k", "", "NoExecute"),),
            [],
        ),
        ({}, {"taints": {"key": "k"}}, {}, {}, (), []),
        # a malformed address list reads as none
        ({}, {}, {"addresses": [{"type": 1}]}, {}, (), []),
        ({}, {}, {"addresses": "10.0.0.1"}, {}, (), []),
        ({}, {}, {"addresses": None}, {}, (), []),
    ],
)
def test_what_is_kept_raw_is_read_leniently(
    metadata: dict[str, Any],
    spec: dict[str, Any],
    status: dict[str, Any],
    labels: dict[str, str],
    taints: tuple[Taint, ...],
    addresses: list[Address],
) -> None:
    node = decode({"metadata": {"name": "n", **metadata}, "spec": spec, "status": status})
    fit = node.fit()
    assert (fit.labels, fit.taints, node.addresses()) == (labels, taints, addresses)
