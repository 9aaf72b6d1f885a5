"""The bound pods per node, from the annotator's pod watch: what each holds of its node
(its request) and, for estimation, its placement, as the rebalancer judges targets."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from annotator.rebalance.controller import BoundPod
from shared.pods import Pod
from shared.rules import LoadRules
from shared.strategies import placement_of


def _bound_at(pod: Pod, fallback: datetime) -> datetime:
    stamp = pod.scheduled_at()
    if stamp:
        try:
            return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        except ValueError:
            pass
    return fallback


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
