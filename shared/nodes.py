"""The fields of a Node that loadsched reads, decoded with msgspec (everything else in the
object is skipped unparsed): one struct for the extender (its node watch, and every item of
a full-node request) and the annotator (its node watch).

What only node fit and the annotator's address matching read (``metadata.labels``,
``spec.taints``, ``status.addresses``) stays raw bytes, decoded by :meth:`Node.fit` and
:meth:`Node.addresses` when asked: a full-node request decodes 5,000 nodes per call and reads
only names, annotations and allocatable. On ``bench/decode.py``'s 5,000 nodes, against the
extender's and the annotator's former Node structs: the extender's decode 1.04x (the raw
addresses), its watch's decode and fit 0.93x; the annotator's decode, fit and addresses 1.14x
(about 5 ms per relist of 5,000 nodes: labels, taints and addresses decoded in three calls).
"""

from __future__ import annotations

import msgspec

from shared.kube.meta import NodeMeta
from shared.node_fit import FitNode, taints_of


class Address(msgspec.Struct, gc=False):
    type: str = ""
    address: str = ""


class NodeSpec(msgspec.Struct, gc=False):
    unschedulable: bool = False
    taints: msgspec.Raw = msgspec.Raw()
    """Kept raw, like ``metadata.labels``: read by :meth:`Node.fit`."""


class NodeStatus(msgspec.Struct, gc=False):
    allocatable: dict[str, str] | None = None
    capacity: dict[str, str] | None = None
    addresses: msgspec.Raw = msgspec.Raw()
    """Kept raw: read by :meth:`Node.addresses`."""


_ADDRESSES = msgspec.json.Decoder(list[Address] | None)
_LABELS = msgspec.json.Decoder(dict[str, str] | None)


def _labels(raw: msgspec.Raw) -> dict[str, str]:
    """Labels as strings; values that are not strings are left out."""
    try:
        return _LABELS.decode(raw) or {}
    except msgspec.ValidationError:
        labels = msgspec.json.decode(raw)
        if not isinstance(labels, dict):
            return {}
        return {k: v for k, v in labels.items() if isinstance(v, str)}


class Node(msgspec.Struct, gc=False):
    metadata: NodeMeta = msgspec.field(default_factory=NodeMeta)
    spec: NodeSpec = msgspec.field(default_factory=NodeSpec)
    status: NodeStatus = msgspec.field(default_factory=NodeStatus)

    def fit(self) -> FitNode:
        """The node as :mod:`shared.node_fit` reads it: room, labels, taints, cordoned.
        Labels that are not strings and malformed taints are left out."""
        taints = msgspec.json.decode(self.spec.taints) if self.spec.taints else None
        return FitNode(
            name=self.metadata.name,
            allocatable=self.status.allocatable or {},
            labels=_labels(self.metadata.labels) if self.metadata.labels else {},
            taints=taints_of(taints),
            unschedulable=self.spec.unschedulable,
        )

    def addresses(self) -> list[Address]:
        """``status.addresses``; none when the list is malformed."""
        raw = self.status.addresses
        if not raw:
            return []
        try:
            return _ADDRESSES.decode(raw) or []
        except msgspec.ValidationError:
            return []


NODE_DECODER = msgspec.json.Decoder(Node)
