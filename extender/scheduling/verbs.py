"""Filter, prioritize and preempt: the extender's decisions, independent of HTTP.

Load rejections go to ``FailedAndUnresolvableNodes``: preempting pods cannot lower a node's
measured usage, so kube-scheduler must not try.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from functools import partial

import msgspec

from extender.scheduling.answers import (
    Filtered,
    Scores,
    answered,
    join_normalized,
    join_scores,
    node_score,
    patch_filter,
    patch_scores,
    scaled,
)
from extender.scheduling.binding import Binder
from extender.scheduling.memos import (
    AnswerMemo,
    WindowMemo,
    every_change,
    filter_changes,
    run_now,
)
from extender.scheduling.metrics import ExtenderMetrics
from extender.scheduling.node_cache import NodeLoadCache, RequestMemo, decode_node
from extender.scheduling.node_view import NodeView
from extender.scheduling.quota_gate import QuotaGate
from extender.scheduling.requeue import RequeueTracker
from extender.scheduling.tally import Tally
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
from extender.scheduling.wording import PER_NODE, Wording
from shared.errors import LoadschedError
from shared.load_model import (
    LoadRules,
    Need,
    Verdict,
)
from shared.rebalance_marks import carried_need, departure_message, refused_here, workload_key
from shared.strategies import PodDemand, demand_of, pod_need

logger = logging.getLogger(__name__)


FULL_NODE_WARNING = (
    "kube-scheduler sent a full-node request (nodeCacheCapable: false): kube-scheduler v1.33 "
    "and later score the nodes an extender returns in this mode as if nothing ran on them, so "
    "their NodeResourcesFit and NodeResourcesBalancedAllocation no longer spread pods by requests "
    "(kubernetes/kubernetes#141781); configure the extender with nodeCacheCapable: true"
)
"""Logged once, at the first full-node filter request."""


class NamesOnlyUnavailable(LoadschedError):
    """A names-only request reached an extender that has no node cache."""

    MESSAGE = (
        "loadsched extender has no node cache: nodeCacheCapable requests need the extender "
        "to run with --kubeconfig or in-cluster"
    )


FullNodes = list[tuple[str, Verdict, msgspec.Raw]]


class InvalidNode(LoadschedError):
    """A node item in ``Nodes.items`` has a field of the wrong type."""

    def __init__(self, index: int, error: msgspec.DecodeError) -> None:
        detail = str(error).replace("- at `$", f"- at `$.Nodes.items[{index}]", 1)
        super().__init__(detail)


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
        self._defer = defer or run_now
        """Runs work a request's answer does not wait for: at once by default; the served app
        passes the event loop's ``call_soon``, so it runs once the answer is written."""
        self.binder = Binder(
            node_cache.placements if node_cache is not None else None,
            metrics.filters_before_binding,
        )
        """The bind verb (``bindVerb: bind``), fed the pods filter and prioritize see."""
        self._rules = rules
        self._wording = wording
        """How refusals are worded; a node cache words its nodes' own the same way."""
        self._list_always = rejections == "always"
        """Every filter answer lists the nodes refused, not only one that passes none."""
        self._requeue = requeue
        self._full_node_warned = False
        self._clock = clock
        self._metrics = metrics
        self._cache = node_cache
        self._quota = quota
        self._memo = RequestMemo(rules)
        self._scored = AnswerMemo[tuple[frozenset[str], PodDemand], msgspec.Raw]()
        self._filtered = WindowMemo[Filtered](
            filter_changes, patch=patch_filter, release=self._defer
        )
        self._prioritized = WindowMemo[Scores](
            every_change,
            # spread scores depend on every node asked about: computed again, not patched
            patch=None if rules.normalize else patch_scores,
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
        self.binder.remember(pod, filtered=True)
        if not args.names_only and not self._full_node_warned:
            self._full_node_warned = True
            logger.warning(FULL_NODE_WARNING)
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
        need, departed = self.placing(pod, now) if check else (None, {})
        answer: FilterResult | msgspec.Raw
        if args.names_only:
            answer, tally, passes, passing = self._filter_names(
                args.NodeNames, now, check=check, need=need
            )
            if departed and not departed.keys().isdisjoint(passing):
                kept = [name for name in passing if name not in departed]
                # unresolvable: preempting pods there would not admit the pod either
                left = {n: departed[n] for n in passing if n in departed}
                answer = FilterResult(
                    NodeNames=kept,
                    FailedAndUnresolvableNodes={**tally.listed(bool(kept)), **left},
                )
                passes = bool(kept)
        else:
            tally = self._tally(check=check, need=need)
            rows = self._full_nodes(args, now)
            items = [raw for name, verdict, raw in rows if tally.judge(name, verdict)]
            if not items and (placed := tally.place_anyway()):
                items = [raw for name, _, raw in rows if name in placed]
            refused: dict[str, str] = {}
            if departed:
                passed = {id(raw) for raw in items}
                refused = {
                    n: departed[n] for n, _, raw in rows if n in departed and id(raw) in passed
                }
                items = [raw for name, _, raw in rows if id(raw) in passed and name not in refused]
            answer = FilterResult(
                Nodes=NodeList(items=items),
                FailedAndUnresolvableNodes={**tally.listed(bool(items)), **refused},
            )
            passes = bool(items)
        # counted once the answer is written: an answer that passes some node leaves the
        # refusals to be gathered then (:attr:`Tally._pending`)
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

    def placing(self, pod: PodInfo, now: datetime) -> tuple[Need | None, dict[str, str]]:
        """What filter asks room for on a node for ``pod`` (estimation's need, ``None`` when
        estimation is off), and the nodes the rebalancer moved a pod of its workload off
        lately, each with why it is refused there (``loadsched.io/rebalanced-from``, read by
        the node watch). While such a mark holds, the need is at least what the moved pod used
        (``loadsched.io/rebalanced-usage``): its replacement is asked for room for the usage
        that got it moved, not for its request × the factor."""
        need = pod_need(pod, self._rules)
        cache = self._cache
        if cache is None or not cache.departures:
            return need, {}
        owners = ((o.kind, o.name) for o in pod.metadata.ownerReferences or ())
        workload = workload_key(pod.metadata.namespace, owners)
        if workload is None:
            return need, {}
        departed = {
            node: departure_message(node, workload, marks[workload])
            for node, marks in cache.departures.items()
            if refused_here(workload, marks, now)
        }
        carried = carried_need(workload, cache.departures, cache.carried, now)
        if need is not None and carried is not None:
            need = need.at_least(carried)
        return need, departed

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

    def _tally(self, *, check: bool, need: Need | None) -> Tally:
        rules = self._rules
        return Tally(
            rules.fail_closed,
            check=check,
            need=need,
            place=rules.places_without_headroom,
            wording=self._wording,
            list_always=self._list_always,
        )

    def _filter_names(
        self, asked: msgspec.Raw, now: datetime, *, check: bool, need: Need | None = None
    ) -> Filtered:
        """A names-only filter answer, encoded, with its tally: the one kept for these names
        and this pod's estimate (:class:`WindowMemo`), else made from the view's per-node
        indexes in a few passes over the names in C (:meth:`Tally.judge_all`,
        :meth:`Tally.fit_all`)."""
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
        filtered = answered(tally, passing)
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

    def _scores(self, names: list[str], view: NodeView) -> Scores:
        """The pod-independent prioritize answer for ``names``."""
        if self._rules.normalize:
            return Scores(join_normalized(names, view), None)
        return join_scores(names, view)

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


def _reason(
    tight: Mapping[str, tuple[str, str]],
    others: Callable[[str], tuple[str, str] | None],
    name: str,
) -> tuple[str, str] | None:
    return tight.get(name) or others(name)


def _sample(rejected: dict[str, str], limit: int = 5) -> str:
    shown = "; ".join(list(rejected.values())[:limit])
    more = len(rejected) - limit
    return shown + (f"; and {more} more" if more > 0 else "")
