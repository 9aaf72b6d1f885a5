"""Per-node load verdicts, cached until time or the node's annotations could change them.

:class:`NodeLoadCache` is fed by the node watch (names-only mode); :class:`RequestMemo` keeps
the decoded annotations of nodes sent in full-node requests, so an unchanged node is not
decoded again on the next call. Both hand out :class:`CachedLoad` entries.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Mapping, Sequence
from datetime import datetime

import msgspec

from extender.scheduling.node_view import NodeView
from extender.scheduling.placements import PlacementIndex
from extender.scheduling.wire import NODE_DECODER, Node
from extender.scheduling.wording import PER_NODE, Wording
from shared.annotation_keys import REBALANCED_FROM_ANNOTATION, REBALANCED_USAGE_ANNOTATION
from shared.annotations import Sample
from shared.estimation import Need, NodeSize, Placement
from shared.load_model import (
    LoadRules,
    NodeLoad,
    Verdict,
    evaluate,
    future_detail,
)
from shared.node_fit import FitNode
from shared.policy import NODE_LIMITS_KEY
from shared.rebalance_marks import decode_departures, decode_usages

logger = logging.getLogger(__name__)


class FutureTimestampWarnings:
    """Logs once per node that its annotations carry timestamps ahead of now: most likely
    crane's local-time convention read with another ``spec.timestampZone``. Owned by one cache
    or memo; remembers at most ``max_nodes`` names (then starts over)."""

    def __init__(self, max_nodes: int = 10_000) -> None:
        self._max = max_nodes
        self._warned: set[str] = set()

    def note(self, load: NodeLoad, verdict: Verdict, now: datetime) -> None:
        if load.node in self._warned:
            return
        if verdict.limits_error is not None:
            self._remember(load.node)
            logger.warning(
                "node/%s: predicate limits annotation ignored, the policy's apply: %s "
                "(logged once per node)",
                load.node,
                verdict.limits_error,
            )
            return
        future = [metric for metric, reason in verdict.unknown if reason == "future"]
        if not future:
            return
        self._remember(load.node)
        first = load.readings.get(future[0])
        detail = (
            future_detail(first.timestamp, first.timestamp - now)
            if isinstance(first, Sample)
            else "set spec.timestampZone"
        )
        logger.warning(
            "node/%s: %s not used: %s (logged once per node)",
            load.node,
            ", ".join(future),
            detail,
        )

    def _remember(self, node: str) -> None:
        if len(self._warned) >= self._max:
            self._warned.clear()
        self._warned.add(node)


class CachedLoad:
    """One node's decoded load and its last verdict."""

    __slots__ = ("_computed_at", "_placements", "_verdict", "_warnings", "fingerprint", "load")

    def __init__(
        self,
        load: NodeLoad,
        fingerprint: Fingerprint,
        warnings: FutureTimestampWarnings | None = None,
    ) -> None:
        self.load = load
        self.fingerprint = fingerprint
        self._warnings = warnings
        self._verdict: Verdict | None = None
        self._computed_at: datetime | None = None
        self._placements: tuple[Placement, ...] = ()

    def verdict(
        self, rules: LoadRules, now: datetime, placements: tuple[Placement, ...] = ()
    ) -> Verdict:
        """The verdict at ``now``; recomputed only when a fresh value used has expired since,
        or the node's recent pods (``placements``, a new tuple on every change) changed."""
        verdict = self._verdict
        computed_at = self._computed_at
        if (
            verdict is None
            or computed_at is None
            or now < computed_at
            or (verdict.valid_until is not None and now >= verdict.valid_until)
            or placements is not self._placements
        ):
            verdict = self._verdict = evaluate(self.load, rules, now, placements)
            self._computed_at = now
            self._placements = placements
            if (verdict.unknown or verdict.limits_error) and self._warnings is not None:
                self._warnings.note(self.load, verdict, now)
        return verdict


Fingerprint = tuple[object, ...]


def fingerprint(node: Node, rules: LoadRules) -> Fingerprint:
    """What the rules read of a node, in order: its annotations (the metrics, the hot value, its
    own limits) and, when estimation or a strategy reads them, its capacity and allocatable.
    Equal fingerprints, equal loads."""
    annotations = node.metadata.annotations
    if annotations:
        values: Fingerprint = (*map(annotations.get, rules.keys), annotations.get(NODE_LIMITS_KEY))
    else:
        values = (None,) * (len(rules.keys) + 1)
    if rules.reads_size:
        status = node.status
        sizes = (status.capacity or {}, status.allocatable or {})
        values += tuple(s.get(r) for s in sizes for r in ("cpu", "memory"))
    return values


def cached_load(
    node: Node,
    rules: LoadRules,
    previous: CachedLoad | None,
    warnings: FutureTimestampWarnings | None = None,
) -> CachedLoad:
    """``previous`` if what the rules read of the node is unchanged, else a freshly decoded one
    (whose verdicts report timestamps ahead of now and ignored limits to ``warnings``)."""
    key = fingerprint(node, rules)
    if previous is not None and previous.fingerprint == key:
        return previous
    size = None
    if rules.reads_size:
        size = NodeSize.from_status(node.status.capacity, node.status.allocatable)
    load = NodeLoad.from_annotations(node.metadata.name, node.metadata.annotations, rules, size)
    return CachedLoad(load, key, warnings)


class NodeLoadCache:
    """Watch-fed store of every node's load (a :class:`shared.kube.watching.Store`).

    :meth:`view` hands out a :class:`NodeView` of all nodes, kept up to date incrementally:
    nodes changed by watch events are re-evaluated at the next request, and a heap of expiry
    times re-evaluates a node only when one of its fresh values goes stale.
    """

    def __init__(self, rules: LoadRules, wording: Wording = PER_NODE) -> None:
        self._rules = rules
        self._nodes: dict[str, CachedLoad] = {}
        self._view = NodeView(wording)
        self._dirty: set[str] = set()
        self._expiries: list[tuple[datetime, str]] = []
        self._as_of: datetime | None = None
        self.allocatable: dict[str, Mapping[str, str]] = {}
        """Each node's ``status.allocatable`` as sent (for preemption arithmetic)."""
        self.fit_nodes: dict[str, FitNode] = {}
        """Each node as node fit reads it: allocatable, labels, taints, cordoned."""
        self.future_warnings = FutureTimestampWarnings()
        self.placements: PlacementIndex | None = None
        """Pods recently bound, when the rules read them (set before the watches start)."""
        self.departures: dict[str, dict[str, datetime]] = {}
        """The rebalancer's marks (``loadsched.io/rebalanced-from``) of the nodes that carry
        one: workload → until when its pods are refused there."""
        self.carried: dict[str, dict[str, Need]] = {}
        """Beside the marks (``loadsched.io/rebalanced-usage``): workload → what its pod used
        when it was moved off the node."""

    def __len__(self) -> int:
        return len(self._nodes)

    def touch(self, name: str) -> None:
        """The node's pods changed: evaluate it again at the next request."""
        self._dirty.add(name)

    def allocatable_of(self, name: str) -> Mapping[str, str] | None:
        return self.allocatable.get(name)

    def get(self, name: str) -> CachedLoad | None:
        return self._nodes.get(name)

    def replace(self, items: Sequence[Node]) -> None:
        old = self._nodes
        self._nodes = {
            node.metadata.name: cached_load(
                node, self._rules, old.get(node.metadata.name), self.future_warnings
            )
            for node in items
        }
        self.allocatable = {node.metadata.name: node.status.allocatable or {} for node in items}
        self.fit_nodes = {node.metadata.name: node.fit() for node in items}
        self.departures, self.carried = {}, {}
        for node in items:
            self._note_departures(node)
        self._dirty = set(self._nodes) | set(old)

    def _note_departures(self, node: Node) -> None:
        annotations = node.metadata.annotations or {}
        name = node.metadata.name
        marks = decode_departures(annotations.get(REBALANCED_FROM_ANNOTATION))
        usages = decode_usages(annotations.get(REBALANCED_USAGE_ANNOTATION)) if marks else {}
        if marks:
            self.departures[name] = marks
        else:
            self.departures.pop(name, None)
        if usages:
            self.carried[name] = usages
        else:
            self.carried.pop(name, None)

    def apply(self, event: str, item: Node) -> None:
        name = item.metadata.name
        if event == "DELETED":
            self._nodes.pop(name, None)
            self.allocatable.pop(name, None)
            self.fit_nodes.pop(name, None)
            self.departures.pop(name, None)
            self.carried.pop(name, None)
        else:
            self.allocatable[name] = item.status.allocatable or {}
            self.fit_nodes[name] = item.fit()
            self._note_departures(item)
            previous = self._nodes.get(name)
            entry = cached_load(item, self._rules, previous, self.future_warnings)
            if entry is previous:
                return
            self._nodes[name] = entry
        self._dirty.add(name)

    def view(self, now: datetime) -> NodeView:
        """Every cached node's verdict at ``now``."""
        view = self._view
        if self._as_of is not None and now < self._as_of:
            self._dirty = set(self._nodes) | set(view.verdicts)  # the clock went back
        self._as_of = now
        if self.placements is not None:
            self.placements.prune(now)
        expiries = self._expiries
        while expiries and expiries[0][0] <= now:
            _, name = heapq.heappop(expiries)
            self._dirty.add(name)
        if self._dirty:
            rules, nodes, placements = self._rules, self._nodes, self.placements
            for name in self._dirty:
                entry = nodes.get(name)
                if entry is None:
                    view.drop(name)
                    continue
                placed = placements.of(name) if placements is not None else ()
                verdict = entry.verdict(rules, now, placed)
                view.put(name, verdict)
                if verdict.valid_until is not None:
                    heapq.heappush(expiries, (verdict.valid_until, name))
            self._dirty = set()
        return view


def decode_node(raw: bytes | msgspec.Raw) -> Node:
    return NODE_DECODER.decode(raw)


class RequestMemo:
    """Decoded loads of nodes seen in full-node requests, bounded in size."""

    def __init__(self, rules: LoadRules, max_entries: int = 50_000) -> None:
        self._rules = rules
        self._max = max_entries
        self._nodes: dict[str, CachedLoad] = {}
        self.future_warnings = FutureTimestampWarnings()

    def load(self, node: Node) -> CachedLoad:
        name = node.metadata.name
        previous = self._nodes.get(name)
        entry = cached_load(node, self._rules, previous, self.future_warnings)
        if len(self._nodes) >= self._max and name not in self._nodes:
            self._nodes.clear()
        self._nodes[name] = entry
        return entry
