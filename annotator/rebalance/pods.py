"""The bound pods per node, from the annotator's pod watch: what each holds of its node
(its request) and, for estimation, its placement, as the rebalancer judges targets."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

import msgspec

from shared.annotations import parse_timestamp
from shared.estimation import Placement
from shared.pods import Pod
from shared.quantity import ResourceList
from shared.rules import LoadRules
from shared.strategies import placement_of


class BoundPod(msgspec.Struct, gc=False, frozen=True):
    """A pod bound to a node, as targets are judged: what it holds (a
    :class:`shared.node_fit.Holding`) and, for estimation, when it came."""

    uid: str
    request: ResourceList
    placement: Placement


def _bound_at(pod: Pod, now: datetime) -> datetime:
    """Its ``PodScheduled`` time, never ahead of now; now when it says none."""
    stamp = pod.scheduled_at()
    at = parse_timestamp(stamp) if stamp else None
    return min(at, now) if at is not None else now


class BoundPods:
    """A :class:`shared.kube.watching.Store` of pods bound to a node and not finished."""

    def __init__(self, rules: LoadRules, clock: Callable[[], datetime]) -> None:
        self._rules = rules
        self._clock = clock
        self._node_of: dict[str, str] = {}
        self._by_node: dict[str, dict[str, BoundPod]] = {}

    def on(self, node: str) -> list[BoundPod]:
        return list(self._by_node.get(node, {}).values())

    def _keep(self, pod: Pod) -> BoundPod | None:
        if not pod.spec.nodeName or pod.is_terminal:
            return None
        try:
            request = pod.request()
        except ValueError:
            request = {}
        placement = placement_of(pod, _bound_at(pod, self._clock()), self._rules)
        return BoundPod(pod.metadata.uid, request, placement)

    def _drop(self, uid: str) -> None:
        node = self._node_of.pop(uid, None)
        if node is not None:
            pods = self._by_node.get(node)
            if pods is not None:
                pods.pop(uid, None)
                if not pods:
                    del self._by_node[node]

    def replace(self, items: Sequence[Pod]) -> None:
        self._node_of.clear()
        self._by_node.clear()
        for pod in items:
            self.apply("ADDED", pod)

    def apply(self, event: str, item: Pod) -> None:
        uid = item.metadata.uid
        self._drop(uid)
        if event == "DELETED":
            return
        kept = self._keep(item)
        if kept is not None:
            self._node_of[uid] = item.spec.nodeName
            self._by_node.setdefault(item.spec.nodeName, {})[uid] = kept
