"""Filter, prioritize and preempt: the extender's decisions, independent of HTTP.

Load rejections go to ``FailedAndUnresolvableNodes``: preempting pods cannot lower a node's
measured usage, so kube-scheduler must not try.
"""

from __future__ import annotations

import logging
import math
from collections import Counter as Tally
from collections.abc import Callable, Hashable, Mapping
from copy import copy
from datetime import datetime
from functools import partial
from itertools import chain, compress, filterfalse, repeat
from operator import add, and_, ge, itemgetter, not_
from typing import Generic, NamedTuple, TypeVar

import msgspec

from extender.scheduling.binding import Binder
from extender.scheduling.metrics import ExtenderMetrics
from extender.scheduling.node_view import (
    PASSES,
    PER_NODE,
    ChangeLog,
    NodeLoadCache,
    NodeView,
    RequestMemo,
    Standing,
    Wording,
    decode_node,
)
from extender.scheduling.quota_gate import QuotaGate
from extender.scheduling.requeue import RequeueTracker
from extender.scheduling.wire import (
    ENCODER,
    ExtenderArgs,
    FilterResult,
    HostPriority,
    MetaPod,
    MetaVictims,
    NodeList,
    PodInfo,
    PreemptionArgs,
    PreemptionResult,
    RejectionListing,
    node_names,
)
from shared.errors import LoadschedError
from shared.load_model import (
    MAX_NODE_SCORE,
    WITH_POD,
    LoadRules,
    Need,
    Verdict,
    normalized_table,
    spread_table,
    to_extender_score,
)
from shared.strategies import PodDemand, demand_of, pod_need, pod_score

logger = logging.getLogger(__name__)

NOT_CACHED = ("*", "not-cached")
"""The (metric, reason) of a node refused, under failClosed, because the cache lacks it."""
_ANY = math.inf
"""The room of a node without one: any pod fits."""


class NamesOnlyUnavailable(LoadschedError):
    """A names-only request reached an extender that has no node cache."""

    MESSAGE = (
        "loadsched extender has no node cache: nodeCacheCapable requests need the extender "
        "to run with --kubeconfig or in-cluster"
    )


FullNodes = list[tuple[str, Verdict, msgspec.Raw]]

EXTENDER_SCORES = [to_extender_score(score) for score in range(MAX_NODE_SCORE + 1)]
"""crane's 0..10 for each 0..100 score."""


class InvalidNode(LoadschedError):
    """A node item in ``Nodes.items`` has a field of the wrong type."""

    def __init__(self, index: int, error: msgspec.DecodeError) -> None:
        detail = str(error).replace("- at `$", f"- at `$.Nodes.items[{index}]", 1)
        super().__init__(detail)


K = TypeVar("K", bound=Hashable)
A = TypeVar("A")


class AnswerMemo(Generic[K, A]):
    """Names-only answers computed from one :class:`NodeView` version, by the node names asked
    about: for scores that depend on the pod (a strategy's), which the view cannot keep per
    node. Filter and pod-independent scores need none: they are joined from the view's
    per-node indexes on every request."""

    def __init__(self, size: int = 4) -> None:
        self._size = size
        self._version = -1
        self._answers: dict[K, A] = {}

    def get(self, version: int, key: K) -> A | None:
        if version != self._version:
            self._answers.clear()
            self._version = version
            return None
        return self._answers.get(key)

    def put(self, key: K, answer: A) -> None:
        """Keep ``answer``, dropping the oldest one kept when full."""
        if len(self._answers) >= self._size:
            del self._answers[next(iter(self._answers))]
        self._answers[key] = answer


class _Window(Generic[A]):
    __slots__ = ("answer", "names", "nodes", "positions", "version")

    def __init__(self, version: int, names: list[str], answer: A) -> None:
        self.version = version
        self.names = names
        self.nodes: frozenset[str] | None = None
        self.positions: dict[str, int] | None = None
        self.answer = answer


NAMES_KEPT = 200_000
"""How many names asked about the windows of a :class:`WindowMemo` hold, all told: at 5,000
nodes, every window of a lap of kube-scheduler's at any ``percentageOfNodesToScore`` (10 at
its adaptive 10 %, 2 at 50 %) many times over, and 40 windows of the whole cluster. The
filter and prioritize memos together hold about 250 bytes per name (the names, their
positions, the answers): about 50 MB when full."""

Patch = Callable[[A, list[str], list[int], NodeView], "A | None"]
"""Brings an answer about ``names`` up to date with the view where the nodes at the positions
given changed; ``None`` when it cannot (the answer is then computed again)."""


def _now(call: Callable[[], None]) -> None:
    call()


class WindowMemo(Generic[A]):
    """Names-only answers by the node names asked about, exactly as sent (the bytes of
    ``NodeNames``), kept while the node view changes none of those nodes.

    kube-scheduler asks about a window of nodes at a time and moves it along the cluster pod
    after pod, so the same windows come back again and again; meanwhile the annotator rewrites
    a few nodes a second (at 5,000 nodes and crane's 3-minute period, 28 a second), so a
    view version rarely lasts from one pod to the next. An answer kept here is checked against
    the nodes changed since it was computed (``changes``: the :class:`ChangeLog` of the view
    that names every change the answer can see), in proportion to those changes, not to the
    nodes asked about; the first check makes the window's set of names, and is not made when
    the changes have most likely touched the window (a window of every node, or many changes).
    Windows are kept up to ``names_kept`` names asked about, all told (:data:`NAMES_KEPT`); the
    least recently used goes first.

    With ``patch``, an answer whose nodes did change is brought up to date node by node
    instead (prioritize: each node's entry is its own), so a change costs its own nodes, not
    the window's."""

    def __init__(
        self,
        changes: Callable[[NodeView], ChangeLog],
        names_kept: int = NAMES_KEPT,
        patch: Patch[A] | None = None,
        release: Callable[[Callable[[], None]], object] = _now,
    ) -> None:
        self._changes = changes
        self._release = release
        """Runs the freeing of the windows :meth:`put` drops (their names and answers, a few
        thousand objects each): at once by default; the served extender's once the answer
        that dropped them is written."""
        self._budget = names_kept
        self._kept = 0
        """The names asked about in the windows kept, all told."""
        self._patch = patch
        self._windows: dict[Hashable, _Window[A]] = {}

    def get(self, view: NodeView, key: Hashable) -> A | None:
        windows = self._windows
        window = windows.pop(key, None)
        if window is None:
            return None
        if not self._holds(window, view):
            self._kept -= len(window.names)
            return None
        windows[key] = window
        return window.answer

    def _holds(self, window: _Window[A], view: NodeView) -> bool:
        """Whether ``window``'s answer holds for the view as it is now (patched if need be)."""
        log = self._changes(view)
        if window.version == log.version:
            return True
        changed = log.since(window.version)
        if changed is None:
            return False
        if self._patch is not None:
            return self._patched(window, changed, view)
        if _likely_touched(len(window.names), len(changed), view):
            return False
        if window.nodes is None:
            window.nodes = frozenset(window.names)
        if not window.nodes.isdisjoint(changed):
            return False
        window.version = log.version
        return True

    def _patched(self, window: _Window[A], changed: list[str], view: NodeView) -> bool:
        assert self._patch is not None
        positions = window.positions
        if positions is None:
            names = window.names
            positions = window.positions = dict(zip(names, range(len(names)), strict=True))
        if len(positions) != len(window.names):
            return False  # a name asked about twice: one position each is not enough
        at = sorted({positions[n] for n in changed if n in positions})
        if at:
            answer = self._patch(window.answer, window.names, at, view)
            if answer is None:
                return False
            window.answer = answer
        window.version = self._changes(view).version
        return True

    def put(self, view: NodeView, key: Hashable, names: list[str], answer: A) -> None:
        """Keep ``answer``, computed from ``view`` as it is now for ``names``: the least
        recently used windows go first while the names kept would be over the budget."""
        windows = self._windows
        replaced = windows.pop(key, None)
        if replaced is not None:
            self._kept -= len(replaced.names)
        dropped: list[_Window[A]] = []
        while windows and self._kept + len(names) > self._budget:
            dropped.append(windows.pop(next(iter(windows))))
            self._kept -= len(dropped[-1].names)
        windows[key] = _Window(self._changes(view).version, names, answer)
        self._kept += len(names)
        if dropped:
            self._release(dropped.clear)


def every_change(view: NodeView) -> ChangeLog:
    """What a prioritize answer can see: any change (:attr:`NodeView.changes`)."""
    return view.changes


def filter_changes(view: NodeView) -> ChangeLog:
    """What a filter answer can see (:attr:`NodeView.filter_changes`)."""
    return view.filter_changes


def _likely_touched(asked: int, changes: int, view: NodeView) -> bool:
    """Whether ``changes`` node changes, spread over the view, have most likely touched a
    window of ``asked`` nodes (below a one-in-ten chance of none): checking would cost a set
    of the window's names for an answer most likely to be computed anyway."""
    cluster = len(view.verdicts)
    if asked >= cluster:
        return True
    return changes * math.log1p(-asked / cluster) < _UNTOUCHED_AT_LEAST


_UNTOUCHED_AT_LEAST = math.log(0.1)


class _Filtered(NamedTuple):
    """A names-only filter answer, encoded, with its tally (whose :attr:`_Tally.facts`, when
    it has them, let the answer be patched: :func:`_patch_filter`)."""

    answer: msgspec.Raw
    tally: _Tally
    passes: bool
    passing: list[str]
    """The nodes passed, in order: the names of the prioritize call that follows."""


class LoadAwareExtender:
    def __init__(
        self,
        *,
        rules: LoadRules,
        clock: Callable[[], datetime],
        metrics: ExtenderMetrics,
        node_cache: NodeLoadCache | None,
        quota: QuotaGate | None = None,
        requeue: RequeueTracker | None = None,
        defer: Callable[[Callable[[], None]], object] | None = None,
        wording: Wording = PER_NODE,
        rejections: RejectionListing = "when-none-pass",
    ) -> None:
        self._defer = defer or _now
        """Runs work a request's answer does not wait for: at once by default; the served app
        passes the event loop's ``call_soon``, so it runs once the answer is written."""
        self.binder = Binder(node_cache.placements if node_cache is not None else None)
        """The bind verb (``bindVerb: bind``), fed the pods filter and prioritize see."""
        self._rules = rules
        self._wording = wording
        """How refusals are worded; a node cache words its nodes' own the same way."""
        self._list_always = rejections == "always"
        """Every filter answer lists the nodes refused, not only one that passes none."""
        self._requeue = requeue
        self._clock = clock
        self._metrics = metrics
        self._cache = node_cache
        self._quota = quota
        self._memo = RequestMemo(rules)
        self._scored = AnswerMemo[tuple[frozenset[str], PodDemand], msgspec.Raw]()
        self._filtered = WindowMemo[_Filtered](
            filter_changes, patch=_patch_filter, release=self._defer
        )
        self._prioritized = WindowMemo[_Scores](
            every_change,
            # spread scores depend on every node asked about: computed again, not patched
            patch=None if rules.normalize else _patch_scores,
            release=self._defer,
        )

    def _full_nodes(self, args: ExtenderArgs, now: datetime) -> FullNodes:
        """Full-node mode: (name, verdict, raw item) per node, in request order."""
        rows: FullNodes = []
        rules, memo = self._rules, self._memo
        placements = self._cache.placements if self._cache is not None else None
        for index, raw in enumerate((args.Nodes.items if args.Nodes else None) or ()):
            try:
                node = decode_node(raw)
            except msgspec.DecodeError as e:
                raise InvalidNode(index, e) from e
            name = node.metadata.name
            placed = placements.of(name) if placements is not None else ()
            rows.append((name, memo.load(node).verdict(rules, now, placed), raw))
        return rows

    def _view(self, now: datetime) -> NodeView:
        if self._cache is None:
            raise NamesOnlyUnavailable(NamesOnlyUnavailable.MESSAGE)
        return self._cache.view(now)

    def _names_view(self, asked: msgspec.Raw, now: datetime) -> NodeView:
        """:meth:`_view` for a names-only request; without a node cache, names that are not a
        list of strings are answered as such first (:class:`InvalidNodeNames`)."""
        if self._cache is None:
            node_names(asked)
        return self._view(now)

    def filter(self, pod: PodInfo, args: ExtenderArgs) -> FilterResult | msgspec.Raw:
        """Reject every node for a pod its namespace's elastic quota refuses; else reject
        overloaded nodes (and, failClosed, unknown ones); count what was unknown."""
        self.binder.remember(pod)
        quota = self._quota
        request = None
        if quota is not None and quota.governs(pod):
            request = quota.request_of(pod)
            decision = quota.admit(pod, request)
            if not decision.admitted:
                if self._requeue is not None:
                    self._requeue.refused_pod(pod, request, self._clock().timestamp())
                return self._refuse_all(args, decision.message, decision.preemption_may_help)
        now = self._clock()
        check = not pod.is_daemonset_pod
        need = pod_need(pod, self._rules) if check else None
        answer: FilterResult | msgspec.Raw
        if args.names_only:
            answer, tally, passes, _ = self._filter_names(
                args.NodeNames, now, check=check, need=need
            )
        else:
            tally = self._tally(check=check, need=need)
            rows = self._full_nodes(args, now)
            items = [raw for name, verdict, raw in rows if tally.judge(name, verdict)]
            if not items and (placed := tally.place_anyway()):
                items = [raw for name, _, raw in rows if name in placed]
            answer = FilterResult(
                Nodes=NodeList(items=items), FailedAndUnresolvableNodes=tally.listed(bool(items))
            )
            passes = bool(items)
        # counted once the answer is written: an answer that passes some node leaves the
        # refusals to be gathered then (:attr:`_Tally._pending`)
        self._defer(partial(tally.report, self._metrics))
        if quota is not None and request is not None and passes:
            quota.assume(pod, request)
        requeue = self._requeue
        if requeue is not None:
            if passes:
                requeue.placed(pod.metadata.uid)
            elif tally.rejected:
                # Left with no node: kube-scheduler retries it only on a cluster event.
                reasons: Callable[[str], tuple[str, str] | None] = self._view(now).reasons.get
                if tally.tight:
                    reasons = partial(_reason, tally.tight, reasons)
                requeue.refused_nodes(
                    pod.metadata.uid,
                    tally.rejected,
                    reasons,
                    now.timestamp(),
                    # placed without room, the pod takes any node passing on its own
                    None if tally.place else need,
                )
        if tally.placed_without_room and logger.isEnabledFor(logging.DEBUG):
            logger.debug(
                "pod/%s: no node asked about has room for its estimate %s; passed the nodes "
                "under their limits on their own",
                pod.key,
                need,
            )
        if logger.isEnabledFor(logging.DEBUG) and tally.rejected:
            logger.debug(
                "pod/%s: %d node(s) rejected: %s",
                pod.key,
                len(tally.rejected),
                _sample(tally.rejected),
            )
        return answer

    async def filter_recorded(self, pod: PodInfo, args: ExtenderArgs) -> FilterResult | msgspec.Raw:
        """:meth:`filter`; then a pod an elastic quota admitted has its admission written
        where the other replicas see it (:meth:`QuotaGate.record`), and is refused if that
        write's decision, made on every replica's admissions, refuses it."""
        answer = self.filter(pod, args)
        quota = self._quota
        if quota is None or not quota.ledger.is_assumed(pod.metadata.uid):
            return answer
        request = quota.request_of(pod)
        decision = await quota.record(pod, request)
        if decision.admitted:
            return answer
        if self._requeue is not None:
            self._requeue.refused_pod(pod, request, self._clock().timestamp())
        return self._refuse_all(args, decision.message, decision.preemption_may_help)

    def _tally(self, *, check: bool, need: Need | None) -> _Tally:
        rules = self._rules
        return _Tally(
            rules.fail_closed,
            check=check,
            need=need,
            place=rules.places_without_room,
            wording=self._wording,
            list_always=self._list_always,
        )

    def _filter_names(
        self, asked: msgspec.Raw, now: datetime, *, check: bool, need: Need | None = None
    ) -> _Filtered:
        """A names-only filter answer, encoded, with its tally: the one kept for these names
        and this pod's estimate (:class:`WindowMemo`), else made from the view's per-node
        indexes in a few passes over the names in C (:meth:`_Tally.judge_all`,
        :meth:`_Tally.fit_all`)."""
        view = self._names_view(asked, now)
        key = (bytes(asked), check, need)
        kept = self._filtered.get(view, key)
        if kept is not None:
            self._metrics.filter_kept.inc()
            if kept.passes and not self._rules.strategy_metrics:
                # kept while its nodes' scores may have changed: the prioritize answer, if not
                # kept as well, is prepared again
                self._defer(partial(self._prepare_scores, kept.passing, fresh=False))
            return kept
        names = node_names(asked)
        tally = self._tally(check=check, need=need)
        passing = tally.judge_all(names, view)
        if need is not None and passing:
            passing = tally.fit_all(passing, view)
        filtered = _answered(tally, passing)
        self._filtered.put(view, key, names, filtered)
        if filtered.passes and not self._rules.strategy_metrics:
            # kube-scheduler's prioritize call for this pod names exactly the nodes passed, in
            # this order, encoded as msgspec encodes them (node names need no escaping): its
            # answer is prepared once this one is written, while kube-scheduler reads it.
            self._defer(partial(self._prepare_scores, passing))
        return filtered

    def _prepare_scores(self, names: list[str], *, fresh: bool = True) -> None:
        """Keep the pod-independent prioritize answer for ``names``, from the view as it is
        now; unless ``fresh`` is false and the one kept for them still holds."""
        try:
            view = self._view(self._clock())
            key = ENCODER.encode(names)
            if fresh or self._prioritized.get(view, key) is None:
                self._prioritized.put(view, key, names, self._scores(names, view))
        except Exception:  # a deferred call has no caller to raise to
            logger.exception("preparing a prioritize answer")

    def _scores(self, names: list[str], view: NodeView) -> _Scores:
        """The pod-independent prioritize answer for ``names``."""
        if self._rules.normalize:
            return _Scores(_join_normalized(names, view), None)
        return _join_scores(names, view)

    def _refuse_all(self, args: ExtenderArgs, message: str, preemptible: bool) -> FilterResult:
        if args.names_only:
            names = node_names(args.NodeNames)
        else:
            names = [name for name, _, _ in self._full_nodes(args, self._clock())]
        failed = dict.fromkeys(names, message)
        return FilterResult(
            NodeNames=[] if args.names_only else None,
            Nodes=None if args.names_only else NodeList(items=[]),
            FailedNodes=failed if preemptible else {},
            FailedAndUnresolvableNodes={} if preemptible else failed,
        )

    def prioritize(self, pod: PodInfo, args: ExtenderArgs) -> list[HostPriority] | msgspec.Raw:
        """0..10 per node; a node the cache lacks scores 0, like one with no metrics. With a
        Trimaran strategy the score depends on what the pod brings (:func:`pod_score`); with
        ``normalize: minMax`` on the other nodes asked about too (:func:`normalized_table`)."""
        self.binder.remember(pod)
        now = self._clock()
        rules = self._rules
        demand = demand_of(pod, rules) if rules.strategy_metrics else None
        if not args.names_only:
            rows = self._full_nodes(args, now)
            raw = [node_score(verdict, demand, rules) for _, verdict, _ in rows]
            scores = scaled(raw, normalize=rules.normalize)
            return [HostPriority(row[0], score) for row, score in zip(rows, scores, strict=True)]
        view = self._names_view(args.NodeNames, now)
        if demand is not None:
            found = self._scored_for(node_names(args.NodeNames), demand, view)
        else:
            key = bytes(args.NodeNames)
            kept = self._prioritized.get(view, key)
            if kept is not None:
                self._metrics.prioritize_kept.inc()
            else:
                names = node_names(args.NodeNames)
                kept = self._scores(names, view)
                self._prioritized.put(view, key, names, kept)
            found = kept.answer
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("pod/%s: scores %s", pod.key, bytes(found)[:400].decode(errors="replace"))
        return found

    def _scored_for(self, names: list[str], demand: PodDemand, view: NodeView) -> msgspec.Raw:
        """Scores that depend on the pod: once per node set, demand and view."""
        key = (frozenset(names), demand)
        found = self._scored.get(view.version, key)
        if found is None:
            verdicts, rules = view.verdicts.get, self._rules
            raw = [node_score(verdicts(n), demand, rules) for n in names]
            scores = list(map(HostPriority, names, scaled(raw, normalize=rules.normalize)))
            found = msgspec.Raw(ENCODER.encode(scores))
            self._scored.put(key, found)
        return found

    @property
    def rules(self) -> LoadRules:
        return self._rules

    @property
    def quota(self) -> QuotaGate | None:
        return self._quota

    def view(self, now: datetime) -> NodeView:
        """Every cached node's verdict at ``now``, as names-only filter and prioritize read
        it; :class:`NamesOnlyUnavailable` without a node cache."""
        return self._view(now)

    def preempt(self, args: PreemptionArgs) -> PreemptionResult:
        """Load has no say in preemption; elastic quotas replace the scheduler's victims with
        legal ones (:mod:`.quota_gate`); otherwise the scheduler's victims stand."""
        if args.NodeNameToMetaVictims is not None:
            proposed = args.NodeNameToMetaVictims
        else:
            proposed = {
                node: MetaVictims(
                    Pods=[MetaPod(UID=pod.metadata.uid) for pod in victims.Pods or ()],
                    NumPDBViolations=victims.NumPDBViolations,
                )
                for node, victims in (args.NodeNameToVictims or {}).items()
            }
        if self._quota is not None and args.Pod is not None:
            chosen = self._quota.preempt(
                args.Pod,
                {
                    node: ([p.UID for p in victims.Pods], victims.NumPDBViolations)
                    for node, victims in proposed.items()
                },
            )
            if chosen is not None:
                return PreemptionResult(NodeNameToMetaVictims=chosen)
        return PreemptionResult(NodeNameToMetaVictims=proposed)


def refusal(
    name: str,
    verdict: Verdict | None,
    *,
    fail_closed: bool,
    check: bool,
    need: Need | None = None,
    wording: Wording = PER_NODE,
) -> tuple[str, tuple[str, str]] | None:
    """Why filter rejects node ``name`` (its message, worded as ``wording`` says, and (metric,
    reason)), or ``None`` when it passes: ``verdict`` is ``None`` for a node the cache lacks;
    ``check`` is false for a DaemonSet pod, which load never keeps off a node; ``need`` is the
    pod's estimate, with estimation (:func:`shared.load_model.refusal_for`)."""
    if not check:
        return None
    if verdict is None:
        return _not_cached(name, wording) if fail_closed else None
    message = wording.overload(verdict)
    if message is not None:
        return message, verdict.overload_reason or ("*", "overloaded")
    if need is not None and verdict.rooms:
        return wording.with_pod(verdict, need, name)
    return None


def _reason(
    tight: Mapping[str, tuple[str, str]],
    others: Callable[[str], tuple[str, str] | None],
    name: str,
) -> tuple[str, str] | None:
    return tight.get(name) or others(name)


def node_score(verdict: Verdict | None, demand: PodDemand | None, rules: LoadRules) -> int | None:
    """A node's 0..100 score: ``None`` for one the cache lacks; the verdict's own score, or
    with a strategy (``demand`` given) the pod's (:func:`pod_score`)."""
    if verdict is None:
        return None
    if demand is None:
        return verdict.score
    return pod_score(verdict.strategy, verdict.score, verdict.hot, rules, demand)


def scaled(raw: list[int | None], *, normalize: bool) -> list[int]:
    """The protocol's 0..10 for each 0..100 score of the nodes asked about (``None``, a node
    the cache lacks, scores 0): crane's mapping, or spread over these nodes with
    ``normalize: minMax``."""
    table = normalized_table(raw) if normalize else EXTENDER_SCORES
    return [0 if score is None else table[score] for score in raw]


Refusal = tuple[str, tuple[str, str]]
"""A refused node's :data:`Standing`: its message, and (metric, reason)."""


class _Tally:
    """One filter call's rejections and counts."""

    __slots__ = (
        "_pending",
        "_reasons",
        "_rejected",
        "check",
        "facts",
        "fail_closed",
        "list_always",
        "need",
        "place",
        "placed_without_room",
        "tight",
        "uncached",
        "unknown",
        "wording",
    )

    def __init__(
        self,
        fail_closed: bool,
        *,
        check: bool,
        need: Need | None = None,
        place: bool = False,
        wording: Wording = PER_NODE,
        list_always: bool = False,
    ) -> None:
        self.fail_closed = fail_closed
        self.wording = wording
        self.list_always = list_always
        """The answer lists the nodes refused even when it passes some (:meth:`listed`)."""
        self.check = check
        self.need = need
        """The pod's estimate (estimation): a node without room for it refuses it."""
        self.place = place
        """When no node has room for the pod, the nodes that refused only for want of room
        pass it (``whenNoNodeHasRoom: place``)."""
        self.placed_without_room = False
        self._rejected: dict[str, str] = {}
        self._reasons: Tally[tuple[str, str]] = Tally()
        self._pending: tuple[list[str], list[Standing | None], list[Refusal]] | None = None
        """What :meth:`judge_all` found refused and has not yet put in :attr:`rejected` and
        :attr:`reasons` (the names asked about, their standings, the refusals among them):
        put in when either is first read, which an answer that passes some node does not
        do, so it is done once the answer is written (:meth:`report`)."""
        self.unknown: Tally[tuple[str, str]] = Tally()
        self.uncached = 0
        self.tight: dict[str, tuple[str, str]] = {}
        """The nodes that refused only for want of room for this pod, and why."""
        self.facts: _Facts | None = None
        """What :meth:`judge_all` read of each node asked about, when the answer can be
        brought up to date from it (:meth:`patched`): not for a DaemonSet pod, nor with the
        pod's estimate (:meth:`fit_all`: whether any node has room depends on every one)."""

    @property
    def rejected(self) -> dict[str, str]:
        """The nodes refused, and each one's message."""
        if self._pending is not None:
            self._settle()
        return self._rejected

    @rejected.setter
    def rejected(self, rejected: dict[str, str]) -> None:
        if self._pending is not None:
            self._settle()
        self._rejected = rejected

    @property
    def reasons(self) -> Tally[tuple[str, str]]:
        """The nodes refused, counted by (metric, reason)."""
        if self._pending is not None:
            self._settle()
        return self._reasons

    @reasons.setter
    def reasons(self, reasons: Tally[tuple[str, str]]) -> None:
        if self._pending is not None:
            self._settle()
        self._reasons = reasons

    def _settle(self) -> None:
        assert self._pending is not None
        names, standing, refused = self._pending
        self._pending = None
        messages = map(itemgetter(0), refused)
        self._rejected.update(zip(compress(names, standing), messages, strict=True))
        self._reasons.update(map(itemgetter(1), refused))

    def judge(self, name: str, verdict: Verdict | None) -> bool:
        """True if the node passes; records why not, and what was unknown."""
        if verdict is None:
            self.uncached += 1
        elif verdict.unknown:
            self.unknown.update(verdict.unknown)
        refused = refusal(
            name,
            verdict,
            fail_closed=self.fail_closed,
            check=self.check,
            need=self.need,
            wording=self.wording,
        )
        if refused is None:
            return True
        self.rejected[name], reason = refused
        self.reasons[reason] += 1
        if reason[1] == WITH_POD:
            self.tight[name] = reason
        return False

    def fit_all(self, names: list[str], view: NodeView) -> list[str]:
        """Of ``names`` (nodes that pass on their own), those with room for the pod's
        estimate; records why the others refuse it. The rooms are compared in C."""
        need = self.need
        if need is None:
            return names
        fits: list[bool] | None = None
        for rooms, brings in ((view.cpu_rooms, need.cpu), (view.memory_rooms, need.memory)):
            if rooms:
                found = list(map(ge, map(rooms.get, names, repeat(_ANY)), repeat(brings)))
                fits = found if fits is None else list(map(and_, fits, found))
        if fits is None or all(fits):
            return names
        if self.place and not any(fits):
            self.placed_without_room = True
            return names
        self.rejected = dict(self.rejected)  # it may be the view's own, taken whole
        self.reasons = Tally(self.reasons)
        verdicts = view.verdicts
        for name in compress(names, map(not_, fits)):
            refused = self.wording.with_pod(verdicts[name], need, name)
            if refused is not None:
                self.rejected[name], reason = refused
                self.reasons[reason] += 1
                self.tight[name] = reason
        return list(compress(names, fits))

    def judge_all(self, names: list[str], view: NodeView) -> list[str]:
        """:meth:`judge` for many names at once, from the view's indexes (names-only mode);
        the names that pass, in order. One lookup per name, then passes in C over the
        results: a node's standing is ``()`` when it passes, (message, reason) when it does
        not and ``None`` when the view lacks it. What was read is kept as :attr:`facts`.

        When the names include every node the view rejects (as kube-scheduler's do: it asks
        about every node it has not ruled out itself), the rejections and their count by
        reason are the view's own, taken whole rather than rebuilt name by name (a copy is
        made before anything is added to them)."""
        standing = list(map(view.standing.get, names))
        refused: list[Refusal] = list(filter(None, standing))  # type: ignore[arg-type]
        missing = (
            [n for n, s in zip(names, standing, strict=True) if s is None]
            if len(names) - standing.count(PASSES) - len(refused)
            else []
        )
        self.uncached += len(missing)
        unknowns: dict[str, tuple[tuple[str, str], ...]] = {}
        if view.unknowns:
            pairs = zip(names, map(view.unknowns.get, names), strict=True)
            found: list[tuple[str, tuple[tuple[str, str], ...]]] = list(
                filter(itemgetter(1), pairs)  # type: ignore[arg-type]  # None filtered out
            )
            self.unknown.update(chain.from_iterable(map(itemgetter(1), found)))  # each time asked
            unknowns = dict(found)
        if not self.check:
            return names
        # with the pod's estimate, whether a node fits depends on every one (fit_all), even
        # when none passes on its own
        patchable = self.need is None
        if patchable:
            self.facts = _Facts(standing, unknowns)
        if refused:
            # every rejected node, each asked about once (names may repeat)
            if len(refused) == len(view.refusals) == len(set(compress(names, standing))):
                self.rejected = view.frozen_refusals()
                self.reasons = Tally(view.reason_counts)  # kept with the answer: a copy
            else:
                # put in :attr:`rejected` and :attr:`reasons` when first read (:attr:`_pending`)
                self._pending = (names, standing, refused)
        if self.fail_closed and missing:
            self.rejected = dict(self.rejected)
            self.rejected.update((n, self.wording.not_cached(n)) for n in missing)
            self.reasons = Tally(self.reasons)
            self.reasons[NOT_CACHED] += len(missing)
            # each node the view lacks stands refused, as it is answered
            if patchable:
                standing = [
                    _not_cached(n, self.wording) if s is None else s
                    for n, s in zip(names, standing, strict=True)
                ]
                self.facts = _Facts(standing, unknowns)
            return list(filterfalse(self.rejected.__contains__, names))
        return list(compress(names, map(not_, standing))) if refused else names

    def patched(self, names: list[str], at: list[int], view: NodeView) -> tuple[_Tally, list[str]]:
        """This tally brought up to date with the view for the nodes at positions ``at`` of
        ``names`` (asked about once each), in a new tally; with the names that pass now. Only
        with :attr:`facts`: each changed node's old standing and unknown values are taken out
        of the counts and its new ones put in, so the cost is the changes', plus passes in C
        over ``names`` for the nodes passed."""
        facts = self.facts
        assert facts is not None
        rejected, reasons = dict(self.rejected), Tally(self.reasons)  # settled before the copy
        tally = copy(self)
        tally.rejected, tally.reasons = rejected, reasons
        unknown = tally.unknown = Tally(self.unknown)
        standing = facts.standing.copy()
        unknowns = facts.unknowns.copy()
        fail_closed = self.fail_closed
        for i in at:
            name = names[i]
            before, now = standing[i], view.standing.get(name)
            tally.uncached += (now is None) - (before is None or before[1:] == (NOT_CACHED,))
            if now is None and fail_closed:
                now = _not_cached(name, self.wording)
            if before:
                del rejected[name]
                reasons[before[1]] -= 1
            if now:
                rejected[name] = now[0]
                reasons[now[1]] += 1
            standing[i] = now
            gone = unknowns.pop(name, None)
            if gone:
                unknown.subtract(gone)
            found = view.unknowns.get(name)
            if found:
                unknowns[name] = found
                unknown.update(found)
        tally.reasons, tally.unknown = +reasons, +unknown
        tally.facts = _Facts(standing, unknowns)
        return tally, list(compress(names, map(not_, standing))) if rejected else names

    def listed(self, passes: bool) -> dict[str, str]:
        """The refusals the answer lists: all of them when it passes no node, the only answer
        kube-scheduler reads them from (``--filter-rejections``); else none, unless
        :attr:`list_always`. A node left out of an answer that passes others is refused all
        the same, and as unresolvable, as every load refusal is."""
        return self.rejected if self.list_always or not passes else {}

    def place_anyway(self) -> dict[str, tuple[str, str]]:
        """With ``place``, once no node passed: the nodes that refused only for want of room
        for the pod (:attr:`tight`), their refusals forgotten; they pass it."""
        placed = self.tight
        if not (self.place and placed):
            return {}
        self.rejected = {n: m for n, m in self.rejected.items() if n not in placed}
        self.reasons = Tally(self.reasons)
        self.reasons.subtract(placed.values())
        self.reasons = +self.reasons
        self.tight = {}
        self.placed_without_room = True
        return placed

    def report(self, metrics: ExtenderMetrics) -> None:
        metrics.count_filtered(self.reasons)
        if self.placed_without_room:
            metrics.placed_without_room.inc()
        metrics.count_unknown(self.unknown)
        if self.uncached:
            metrics.uncached_nodes.inc(self.uncached)


class _Facts(NamedTuple):
    """What a names-only filter answer read of each node asked about (:meth:`_Tally.judge_all`)."""

    standing: list[Standing | None]
    """Per position: the node's standing, as answered (a node the view lacks is ``None``, or
    its not-cached refusal under failClosed)."""
    unknowns: dict[str, tuple[tuple[str, str], ...]]
    """The unknown values of the nodes asked about that have some."""


def _not_cached(name: str, wording: Wording) -> tuple[str, tuple[str, str]]:
    return wording.not_cached(name), NOT_CACHED


def _patch_filter(
    filtered: _Filtered, names: list[str], at: list[int], view: NodeView
) -> _Filtered | None:
    """``filtered`` with the nodes at positions ``at`` of ``names`` as the view has them now
    (:meth:`_Tally.patched`), encoded again; ``None`` for an answer without the facts to patch
    (a DaemonSet pod's, or one made with the pod's estimate): it is computed again."""
    if filtered.tally.facts is None:
        return None
    return _answered(*filtered.tally.patched(names, at, view))


def _answered(tally: _Tally, passing: list[str]) -> _Filtered:
    """The names-only filter answer that passes ``passing`` and rejects as ``tally`` says."""
    result = FilterResult(NodeNames=passing, FailedAndUnresolvableNodes=tally.listed(bool(passing)))
    return _Filtered(msgspec.Raw(ENCODER.encode(result)), tally, bool(passing), passing)


def _join_normalized(names: list[str], view: NodeView) -> msgspec.Raw:
    """The prioritize answer for ``names`` with ``normalize: minMax``: each node's entry up to
    its score, joined with its score spread over these nodes; a node the view lacks scores 0."""
    raw = list(map(view.raw_scores.get, names, repeat(-1)))
    low = min(raw, default=0)
    if low < 0:  # a name the view lacks
        known = [None if score < 0 else score for score in raw]
        scores = scaled(known, normalize=True)
        return msgspec.Raw(ENCODER.encode(list(map(HostPriority, names, scores))))
    ends = [b"%d}" % score for score in spread_table(low, max(raw, default=0))]
    prefixes = map(view.score_prefixes.__getitem__, names)
    entries = map(add, prefixes, map(ends.__getitem__, raw))
    return msgspec.Raw(b"".join((b"[", b",".join(entries), b"]")))


class _Scores(NamedTuple):
    """A prioritize answer, and each node's entry in it, in order, when it is made of them
    (not with ``normalize: minMax``, whose scores depend on every node asked about)."""

    answer: msgspec.Raw
    entries: list[bytes] | None


def _entry(name: str, view: NodeView) -> bytes:
    """A node's prioritize entry; a node the view lacks scores 0."""
    return view.encoded_scores.get(name) or ENCODER.encode(HostPriority(name, 0))


def _joined(entries: list[bytes]) -> msgspec.Raw:
    return msgspec.Raw(b"".join((b"[", b",".join(entries), b"]")))


def _join_scores(names: list[str], view: NodeView) -> _Scores:
    """The prioritize answer for ``names``, joined from each node's encoded entry."""
    entries: list[bytes | None] = list(map(view.encoded_scores.get, names))
    try:
        answer = _joined(entries)  # type: ignore[arg-type]
    except TypeError:  # a None among them: a name the view lacks
        entries = [e or _entry(n, view) for n, e in zip(names, entries, strict=True)]
        answer = _joined(entries)  # type: ignore[arg-type]
    return _Scores(answer, entries)  # type: ignore[arg-type]


def _patch_scores(
    scores: _Scores, names: list[str], at: list[int], view: NodeView
) -> _Scores | None:
    """``scores`` with the entries of the nodes at positions ``at`` of ``names`` as the view
    has them now: joined again, not computed again."""
    entries = scores.entries
    if entries is None:
        return None
    for i in at:
        entries[i] = _entry(names[i], view)
    return _Scores(_joined(entries), entries)


def _sample(rejected: dict[str, str], limit: int = 5) -> str:
    shown = "; ".join(list(rejected.values())[:limit])
    more = len(rejected) - limit
    return shown + (f"; and {more} more" if more > 0 else "")
