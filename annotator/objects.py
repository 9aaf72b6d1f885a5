"""The watch-fed store of the annotator's Nodes (:mod:`shared.nodes`): node addresses (to
match Prometheus series), node fit (for reclaim and the rebalancer), annotations and sizes (for
the rebalancer). The bound pods feed the hot value
(:mod:`annotator.sync.bindings`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from annotator.matching import InstanceIndex, NodeAddresses
from shared.estimation import NodeSize
from shared.node_fit import FitNode
from shared.nodes import NODE_DECODER, Node

__all__ = [
    "NODE_DECODER",
    "Node",
    "NodeStore",
    "addresses_of",
]


def size_of(node: Node) -> NodeSize:
    return NodeSize.from_status(node.status.capacity, node.status.allocatable)


def addresses_of(node: Node) -> NodeAddresses:
    found = node.addresses()
    return NodeAddresses(
        name=node.metadata.name,
        internal_ips=tuple(a.address for a in found if a.type == "InternalIP"),
        hostnames=tuple(a.address for a in found if a.type == "Hostname"),
    )


class NodeStore:
    """Node addresses by name; reports nodes that appear after the first list (those of the
    first list are synced by the first round anyway)."""

    def __init__(self, on_new: Callable[[set[str]], None] | None = None) -> None:
        self._listed = False
        self._nodes: dict[str, NodeAddresses] = {}
        self.capacity: dict[str, FitNode] = {}
        self.annotations: dict[str, dict[str, str]] = {}
        """Each node's annotations (the rebalancer reads its metrics and marks)."""
        self.sizes: dict[str, NodeSize] = {}
        self._index: InstanceIndex | None = None
        self._on_new = on_new

    def names(self) -> list[str]:
        return list(self._nodes)

    def index(self) -> InstanceIndex:
        if self._index is None:
            self._index = InstanceIndex(self._nodes.values())
        return self._index

    def replace(self, items: Sequence[Node]) -> None:
        fresh = {node.metadata.name: addresses_of(node) for node in items}
        self.capacity = {node.metadata.name: node.fit() for node in items}
        self.annotations = {node.metadata.name: node.metadata.annotations or {} for node in items}
        self.sizes = {node.metadata.name: size_of(node) for node in items}
        new = set(fresh) - set(self._nodes)
        self._nodes = fresh
        self._index = None
        if new and self._listed and self._on_new is not None:
            self._on_new(new)
        self._listed = True

    def apply(self, event: str, item: Node) -> None:
        name = item.metadata.name
        if event == "DELETED":
            self._nodes.pop(name, None)
            self.capacity.pop(name, None)
            self.annotations.pop(name, None)
            self.sizes.pop(name, None)
            self._index = None
            return
        self.capacity[name] = item.fit()
        self.annotations[name] = item.metadata.annotations or {}
        self.sizes[name] = size_of(item)
        addresses = addresses_of(item)
        is_new = name not in self._nodes
        if self._nodes.get(name) != addresses:
            self._nodes[name] = addresses
            self._index = None
        if is_new and self._on_new is not None:
            self._on_new({name})
