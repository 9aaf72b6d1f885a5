"""Per-node load verdicts, cached until time or the node's annotations could change them.

:class:`NodeLoadCache` is fed by the node watch (names-only mode); :class:`RequestMemo` keeps
the decoded annotations of nodes sent in full-node requests, so an unchanged node is not
decoded again on the next call. Both hand out :class:`CachedLoad` entries.
"""

from __future__ import annotations

import heapq
import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime

import msgspec

from extender.scheduling.placements import PlacementIndex
from extender.scheduling.wire import ENCODER, NODE_DECODER, HostPriority, Node
from shared.annotations import Sample
from shared.estimation import NodeSize, Placement
from shared.load_model import (
    LoadRules,
    MessageStyle,
    Need,
    NodeLoad,
    Verdict,
    evaluate,
    future_detail,
    reason_message,
    reason_refusal_for,
    refusal_for,
)
from shared.node_fit import FitNode
from shared.policy import NODE_LIMITS_KEY

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


NOT_CACHED_CLOSED = "node[{}] is not in the extender's node cache yet; staleData is failClosed"
NOT_CACHED_REASON = "node(s) not in the extender's node cache yet (staleData is failClosed)"


class Wording:
    """How filter answers word a refusal (:data:`shared.load_model.MessageStyle`): crane's
    message naming the node and its value, or one phrase per reason."""

    __slots__ = ("hot_limit", "per_node")

    def __init__(self, style: MessageStyle = "per-node", hot_limit: int = 0) -> None:
        self.per_node = style == "per-node"
        self.hot_limit = hot_limit

    def overload(self, verdict: Verdict) -> str | None:
        """The refusal of a node rejected on its own (``None`` when it passes)."""
        if self.per_node or verdict.overload is None:
            return verdict.overload
        return reason_message(verdict, self.hot_limit)

    def with_pod(
        self, verdict: Verdict, need: Need, name: str
    ) -> tuple[str, tuple[str, str]] | None:
        """The refusal of a node without room for the pod's estimate (estimation)."""
        if self.per_node:
            return refusal_for(verdict, need, name)
        return reason_refusal_for(verdict, need)

    def not_cached(self, name: str) -> str:
        """The refusal, under failClosed, of a node the cache lacks."""
        return NOT_CACHED_CLOSED.format(name) if self.per_node else NOT_CACHED_REASON


PER_NODE = Wording()
"""crane's wording."""

Standing = tuple[()] | tuple[str, tuple[str, str]]
"""A node's filter outcome in a :class:`NodeView`: (rejection message, (metric, reason)), or
:data:`PASSES`."""

PASSES: Standing = ()
"""A passing node's standing: empty, so false, and one object, so counted by identity."""

CHANGES_KEPT = 4096
"""How many node changes a :class:`ChangeLog` names back (:meth:`ChangeLog.since`)."""


class ChangeLog:
    """The nodes changed, one version per change: :meth:`since` names those changed after a
    version, the last :data:`CHANGES_KEPT` changes back."""

    __slots__ = ("_base", "_names", "version")

    def __init__(self) -> None:
        self.version = 0
        self._names: list[str] = []
        self._base = 0
        """The version of the first change in ``_names``."""

    def note(self, name: str) -> None:
        self.version += 1
        names = self._names
        names.append(name)
        if len(names) > CHANGES_KEPT:
            half = len(names) // 2
            del names[:half]
            self._base += half

    def since(self, version: int) -> list[str] | None:
        """The nodes changed after ``version`` (in order, repeats kept); ``None`` when that is
        further back than the changes kept."""
        if version < self._base:
            return None
        return self._names[version - self._base :]


def _filter_facts(view: NodeView, name: str) -> tuple[object, ...]:
    """What a names-only filter answer reads of node ``name`` in ``view``: its standing (``None``
    when the view lacks it), its unknown values and its rooms. Equal facts, equal answers."""
    verdict = view.verdicts.get(name)
    return (
        view.standing.get(name),
        view.unknowns.get(name),
        verdict.rooms if verdict is not None else None,
    )


class NodeView:
    """Every cached node's verdict, indexed for names-only requests and kept up to date node by
    node (:meth:`put`, :meth:`drop`), so that a change costs in proportion to the nodes changed
    and a request one dictionary lookup per name asked about, in C (no per-name Python):

    - ``standing``: every cached node's (rejection message, (metric, reason)), ``()`` when it
      passes (:data:`PASSES`);
    - ``encoded_scores``: its prioritize entry, already JSON (joined into the answer as is);
      ``raw_scores`` its 0..100 score and ``score_prefixes`` its entry up to the score, for
      answers that spread the scores over the nodes asked about (``normalize: minMax``);
    - ``unknowns``: its unknown values, for nodes that have some;
    - ``cpu_rooms`` and ``memory_rooms``: with estimation, the room a passing node leaves the
      pod being placed (cores, bytes; :class:`shared.load_model.Room`), for nodes that have one;
    - ``reasons``: the (metric, reason) of each rejected node, and ``reason_counts`` how many
      rejected nodes have each: a request that asks about every rejected node (kube-scheduler
      asks about every node it has not ruled out itself) takes these and ``refusals`` whole.

    ``clean`` (passing with every value known), ``scores`` and ``refusals`` are the same facts
    for other readers. ``version`` changes with every change, so answers computed from one
    version can be kept until the next (:class:`extender.scheduling.verbs.AnswerMemo`).
    ``changes`` names the nodes changed since a version, so an answer about nodes none of which
    changed can be kept longer (:class:`extender.scheduling.verbs.WindowMemo`);
    ``filter_changes`` names only the changes a filter answer can see (a node's standing,
    unknown values or rooms; :func:`_filter_facts`): a passing node whose new values still pass
    changes its score, not the filter answers about it."""

    __slots__ = (
        "_frozen",
        "_frozen_version",
        "clean",
        "changes",
        "cpu_rooms",
        "encoded_scores",
        "filter_changes",
        "raw_scores",
        "memory_rooms",
        "reason_counts",
        "reasons",
        "refusals",
        "score_prefixes",
        "scores",
        "standing",
        "unknowns",
        "verdicts",
        "wording",
    )

    def __init__(self, wording: Wording = PER_NODE) -> None:
        self.wording = wording
        self.changes = ChangeLog()
        self.filter_changes = ChangeLog()
        self.verdicts: dict[str, Verdict] = {}
        self.clean: set[str] = set()
        self.scores: dict[str, HostPriority] = {}
        self.encoded_scores: dict[str, bytes] = {}
        self.raw_scores: dict[str, int] = {}
        self.score_prefixes: dict[str, bytes] = {}
        self.standing: dict[str, Standing] = {}
        self.refusals: dict[str, str] = {}
        self.reasons: dict[str, tuple[str, str]] = {}
        self.reason_counts: Counter[tuple[str, str]] = Counter()
        self.unknowns: dict[str, tuple[tuple[str, str], ...]] = {}
        self.cpu_rooms: dict[str, float] = {}
        self.memory_rooms: dict[str, float] = {}
        self._frozen: dict[str, str] = {}
        self._frozen_version = 0

    @property
    def version(self) -> int:
        """Changes with every change to any node."""
        return self.changes.version

    def frozen_refusals(self) -> dict[str, str]:
        """``refusals`` as of this version: a copy made once per version, so that what a
        caller keeps does not change under it, and the same object until the next change
        (callers read it, never change it)."""
        if self._frozen_version != self.version:
            self._frozen = dict(self.refusals)
            self._frozen_version = self.version
        return self._frozen

    def put(self, name: str, verdict: Verdict) -> None:
        if self.verdicts.get(name) is verdict:
            return  # re-evaluated to the very same verdict: nothing to change
        before = _filter_facts(self, name)
        self._forget(name)
        self.verdicts[name] = verdict
        score = self.scores[name] = HostPriority(name, verdict.extender_score)
        self.encoded_scores[name] = encoded = ENCODER.encode(score)
        self.raw_scores[name] = verdict.score
        self.score_prefixes[name] = encoded[: encoded.rindex(b":") + 1]
        message = self.wording.overload(verdict)
        if message is None:
            self.standing[name] = PASSES
        else:
            reason = verdict.overload_reason or ("*", "overloaded")
            self.standing[name] = (message, reason)
            self.refusals[name] = message
            self.reasons[name] = reason
            self.reason_counts[reason] += 1
        if verdict.unknown:
            self.unknowns[name] = verdict.unknown
        for room in verdict.rooms:
            rooms = self.cpu_rooms if room.resource == "cpu" else self.memory_rooms
            rooms[name] = room.left
        if verdict.overload is None and not verdict.unknown:
            self.clean.add(name)
        self.changes.note(name)
        if _filter_facts(self, name) != before:
            self.filter_changes.note(name)

    def drop(self, name: str) -> None:
        """The node is gone from the view."""
        self._forget(name)
        self.changes.note(name)
        self.filter_changes.note(name)

    def _forget(self, name: str) -> None:
        reason = self.reasons.get(name)
        if reason is not None:
            left = self.reason_counts[reason] - 1
            if left:
                self.reason_counts[reason] = left
            else:
                del self.reason_counts[reason]
        for index in (
            self.verdicts,
            self.scores,
            self.encoded_scores,
            self.raw_scores,
            self.score_prefixes,
            self.standing,
            self.refusals,
            self.reasons,
            self.unknowns,
            self.cpu_rooms,
            self.memory_rooms,
        ):
            index.pop(name, None)
        self.clean.discard(name)


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
        self._dirty = set(self._nodes) | set(old)

    def apply(self, event: str, item: Node) -> None:
        name = item.metadata.name
        if event == "DELETED":
            self._nodes.pop(name, None)
            self.allocatable.pop(name, None)
            self.fit_nodes.pop(name, None)
        else:
            self.allocatable[name] = item.status.allocatable or {}
            self.fit_nodes[name] = item.fit()
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
