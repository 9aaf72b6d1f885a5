"""Pods recently bound to each node, from the extender's pod watch: what estimation and
TargetLoadPacking add to a node's measured values.

A pod is kept from its binding for the policy's retention (beyond it, no sample the rules
still trust can miss the pod). Once it is deleted or finished it is kept as gone, with the time
it left, for the retention after that (with estimation's ``subtractDeparted``: the samples
still hold it for a window), else dropped; a list (after a watch restarts) keeps them. Every
change to a node's pods is reported (``on_change``), so that node's verdict
is computed again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from shared.annotations import parse_timestamp
from shared.estimation import Placement
from shared.pods import Pod
from shared.rules import LoadRules
from shared.strategies import placement_of, ready_time

logger = logging.getLogger(__name__)

PRUNE_EVERY = timedelta(seconds=30)


class PlacementIndex:
    """A :class:`shared.kube.watching.Store` of pods, keeping the recently bound ones by node."""

    def __init__(
        self,
        rules: LoadRules,
        *,
        clock: Callable[[], datetime],
        on_change: Callable[[str], None] = lambda _: None,
    ) -> None:
        self._rules = rules
        self._clock = clock
        self._on_change = on_change
        self._by_node: dict[str, dict[str, Placement]] = {}
        self._node_of: dict[str, str] = {}
        self._gone: dict[str, str] = {}
        """The node of each pod kept as gone (in ``_by_node`` with ``gone_at``)."""
        self._frozen: dict[str, tuple[Placement, ...]] = {}
        self._pruned_at: datetime | None = None

    def __len__(self) -> int:
        return len(self._node_of)

    def of(self, node: str) -> tuple[Placement, ...]:
        """The pods bound to ``node`` within the retention, and those gone from it within the
        retention (``gone_at`` set), oldest binding first."""
        frozen = self._frozen.get(node)
        if frozen is None:
            pods = self._by_node.get(node)
            if not pods:
                return ()
            frozen = self._frozen[node] = tuple(sorted(pods.values(), key=_bound_at))
        return frozen

    def replace(self, items: Sequence[Pod]) -> None:
        """The pods listed, and the pods gone before the list (still gone)."""
        before = set(self._by_node)
        kept: dict[str, dict[str, Placement]] = {}
        for uid, node in self._gone.items():
            kept.setdefault(node, {})[uid] = self._by_node[node][uid]
        self._by_node, self._node_of, self._frozen = kept, {}, {}
        now = self._clock()
        for pod in items:
            if _running_on(pod) and pod.metadata.uid not in self._gone:
                bound_at = _listed_binding(pod, now)
                if bound_at is not None:
                    self._add(pod, bound_at, now)
        for node in before | set(self._by_node):
            self._on_change(node)

    def apply(self, event: str, item: Pod) -> None:
        uid = item.metadata.uid
        if event == "DELETED" or item.is_terminal:
            self._depart(item)
            return
        node = item.spec.nodeName
        if not node:
            return  # not bound yet (a pod assumed at bind keeps its place)
        known = self._node_of.get(uid)
        if known == node:
            self._started(item, node)
            return
        if known is not None:
            self._remove(uid)  # assumed on another node than it was bound to
        now = self._clock()
        self._add(item, _binding(item, now), now, node)

    def _started(self, pod: Pod, node: str) -> None:
        """A known pod's update: when it became Ready is news once (estimation's window
        starts then); any other update changes nothing estimation reads."""
        estimation = self._rules.estimation
        placement = self._by_node[node][pod.metadata.uid]
        if estimation is None or placement.ready_at is not None or pod.ready_at() is None:
            return
        ready = ready_time(pod)
        if ready is None:
            return
        started = replace(placement, ready_at=ready)
        self._by_node[node][pod.metadata.uid] = started
        if started.started_at(estimation.startup) != placement.started_at(estimation.startup):
            self._frozen.pop(node, None)
            self._on_change(node)

    def record_binding(self, pod: Pod, node: str) -> None:
        """Count ``pod`` on ``node`` now, as kube-scheduler binds it (the bind verb), before
        the pod watch shows the binding."""
        uid = pod.metadata.uid
        if uid not in self._node_of and uid not in self._gone:
            now = self._clock()
            self._add(pod, now, now, node)

    def forget(self, uid: str) -> None:
        """The binding assumed for ``uid`` failed."""
        self._remove(uid)

    def prune(self, now: datetime) -> None:
        """Forget pods bound longer ago than the retention (no verdict can change); at most
        once every :data:`PRUNE_EVERY`."""
        if self._pruned_at is not None and timedelta(0) <= now - self._pruned_at < PRUNE_EVERY:
            return
        self._pruned_at = now
        since = now - self._rules.retention
        for node, pods in list(self._by_node.items()):
            old = [
                uid
                for uid, p in pods.items()
                if (p.bound_at <= since if p.gone_at is None else p.gone_at <= since)
            ]
            for uid in old:
                gone = pods.pop(uid).gone_at is not None
                (self._gone if gone else self._node_of).pop(uid, None)
            if old:
                self._frozen.pop(node, None)
            if not pods:
                del self._by_node[node]

    def _add(self, pod: Pod, bound_at: datetime, now: datetime, node: str = "") -> None:
        if bound_at <= now - self._rules.retention:
            return
        node, uid = node or pod.spec.nodeName, pod.metadata.uid
        self._by_node.setdefault(node, {})[uid] = placement_of(pod, bound_at, self._rules)
        self._node_of[uid] = node
        self._frozen.pop(node, None)
        self._on_change(node)

    def _depart(self, pod: Pod) -> None:
        """``pod`` left its node (deleted, or finished): kept as gone from now on, when
        estimation subtracts such pods, else forgotten. A pod the index did not keep (bound
        before the retention, or before the list) is taken from the event's object."""
        uid = pod.metadata.uid
        estimation = self._rules.estimation
        if estimation is None or not estimation.subtract_departed or not pod.spec.nodeName:
            self._remove(uid)  # nothing subtracts it, or it never ran (a binding assumed)
            return
        if uid in self._gone:
            return  # a finished pod's later updates, or its deletion
        now = self._clock()
        left = _deleted_at(pod, now)
        node = self._node_of.pop(uid, None)
        if node is not None:
            placement = self._by_node[node][uid]
        elif pod.is_terminal:
            return  # finished before the index could see when: it may be long gone
        else:
            node = pod.spec.nodeName
            bound_at = _condition_time(pod) or now - self._rules.retention
            placement = placement_of(pod, min(bound_at, now), self._rules)
        self._by_node.setdefault(node, {})[uid] = replace(placement, gone_at=left)
        self._gone[uid] = node
        self._frozen.pop(node, None)
        self._on_change(node)

    def _remove(self, uid: str) -> None:
        node = self._node_of.pop(uid, None)
        if node is None:
            return
        pods = self._by_node.get(node, {})
        pods.pop(uid, None)
        if not pods:
            self._by_node.pop(node, None)
        self._frozen.pop(node, None)
        self._on_change(node)


def _deleted_at(pod: Pod, now: datetime) -> datetime:
    """When a pod that left stopped: its deletion time when that is not ahead of now (its
    containers are told to stop then), else now."""
    stamp = pod.metadata.deletionTimestamp
    at = parse_timestamp(stamp) if stamp else None
    return at if at is not None and at <= now else now


def _bound_at(placement: Placement) -> datetime:
    return placement.bound_at


def _running_on(pod: Pod) -> bool:
    return bool(pod.spec.nodeName) and not pod.is_terminal


def _condition_time(pod: Pod) -> datetime | None:
    stamp = pod.scheduled_at()
    return parse_timestamp(stamp) if stamp else None


def _binding(pod: Pod, now: datetime) -> datetime:
    """When a pod seen bound on a watch event was bound: its condition's time (whole seconds)
    when that is not ahead of now, else now."""
    at = _condition_time(pod)
    return at if at is not None and at <= now else now


def _listed_binding(pod: Pod, now: datetime) -> datetime | None:
    """When a listed pod was bound, if it says (a pod bound before the list with no time is
    taken as bound long ago: it is in the samples by now, or soon)."""
    at = _condition_time(pod)
    return min(at, now) if at is not None else None
