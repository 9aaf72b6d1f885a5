"""The watch-fed stores of the annotator's Nodes and Pods (:mod:`shared.nodes`,
:mod:`shared.pods`): node addresses (to match Prometheus series) and node fit (for reclaim),
and bindings (for the hot value)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from annotator.hot_value import BindingWindows
from annotator.matching import InstanceIndex, NodeAddresses
from shared.node_fit import FitNode
from shared.nodes import NODE_DECODER, Node
from shared.pods import POD_DECODER, Pod

__all__ = [
    "NODE_DECODER",
    "POD_DECODER",
    "BindingStore",
    "Node",
    "NodeStore",
    "Pod",
    "addresses_of",
    "scheduled_at",
]


def addresses_of(node: Node) -> NodeAddresses:
    found = node.addresses()
    return NodeAddresses(
        name=node.metadata.name,
        internal_ips=tuple(a.address for a in found if a.type == "InternalIP"),
        hostnames=tuple(a.address for a in found if a.type == "Hostname"),
    )


def scheduled_at(pod: Pod) -> datetime | None:
    """When the scheduler bound the pod (its PodScheduled condition), if recorded."""
    for condition in pod.status.conditions or ():
        if (
            condition.type == "PodScheduled"
            and condition.status == "True"
            and condition.lastTransitionTime
        ):
            try:
                return datetime.strptime(
                    condition.lastTransitionTime, "%Y-%m-%dT%H:%M:%SZ"
                ).replace(tzinfo=UTC)
            except ValueError:
                return None
    return None


class NodeStore:
    """Node addresses by name; reports nodes that appear after the first list (those of the
    first list are synced by the first round anyway)."""

    def __init__(self, on_new: Callable[[set[str]], None] | None = None) -> None:
        self._listed = False
        self._nodes: dict[str, NodeAddresses] = {}
        self.capacity: dict[str, FitNode] = {}
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
            self._index = None
            return
        self.capacity[name] = item.fit()
        addresses = addresses_of(item)
        is_new = name not in self._nodes
        if self._nodes.get(name) != addresses:
            self._nodes[name] = addresses
            self._index = None
        if is_new and self._on_new is not None:
            self._on_new({name})


class BindingStore:
    """Bound pods from a watch (``spec.nodeName`` set), recorded as bindings per node."""

    def __init__(
        self,
        windows: BindingWindows,
        *,
        clock: Callable[[], datetime],
        on_change: Callable[[set[str]], None],
    ) -> None:
        self.windows = windows
        self._clock = clock
        self._on_change = on_change

    def _record(self, pods: Sequence[Pod]) -> None:
        now = self._clock()
        changed = {
            pod.spec.nodeName
            for pod in pods
            if pod.spec.nodeName
            and self.windows.record(
                pod.spec.nodeName, pod.metadata.uid, scheduled_at(pod) or now, now
            )
        }
        if changed:
            self._on_change(changed)

    def replace(self, items: Sequence[Pod]) -> None:
        self._record(items)

    def apply(self, event: str, item: Pod) -> None:
        if event != "DELETED":
            self._record([item])
