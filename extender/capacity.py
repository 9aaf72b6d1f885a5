"""Node capacity for job dispatch (:class:`shared.capacity.Capacity`), read from what the
scheduler's side of the extender already watches: the node view (load verdicts, allocatable,
labels, taints, cordons) and the pod index of every bound pod. It lives beside the two rooms
so that neither imports the other; :mod:`extender.app` hands it to the dispatcher."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime

from extender.scheduling.node_cache import NodeLoadCache
from shared.node_fit import FitNode, Holding
from shared.quota_ledger import PodUsage, QuotaLedger

NO_PODS: dict[str, PodUsage] = {}


class NodeCapacity:
    """:class:`shared.capacity.Capacity` over ``nodes`` and ``pods`` (the pod index is kept
    with or without elastic quotas)."""

    def __init__(self, nodes: NodeLoadCache, pods: QuotaLedger) -> None:
        self._nodes = nodes
        self._pods = pods

    def fit_nodes(self, now: datetime) -> Iterator[tuple[FitNode, Iterable[Holding]]]:
        refused = self._nodes.view(now).refusals
        by_node = self._pods.by_node
        for name, node in self._nodes.fit_nodes.items():
            if name not in refused:
                yield node, by_node.get(name, NO_PODS).values()
