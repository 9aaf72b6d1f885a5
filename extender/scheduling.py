"""Filter, prioritize and preempt: the extender's decisions, independent of HTTP.

Load rejections go to ``FailedAndUnresolvableNodes``: preempting pods cannot lower a node's
measured usage, so kube-scheduler must not try.
"""

from __future__ import annotations

import logging
from collections import Counter as Tally
from collections.abc import Callable, Iterator
from datetime import datetime

import msgspec

from extender.metrics import ExtenderMetrics
from extender.node_loads import CachedLoad, NodeLoadCache, RequestMemo, decode_node
from extender.wire import (
    ExtenderArgs,
    FilterResult,
    HostPriority,
    MetaPod,
    MetaVictims,
    NodeList,
    PodInfo,
    PreemptionArgs,
    PreemptionResult,
)
from shared.load_model import LoadRules, Verdict

logger = logging.getLogger(__name__)

NOT_CACHED_OPEN = "not in the node cache yet; passed (staleData is failOpen)"
NOT_CACHED_CLOSED = "node[{}] is not in the extender's node cache yet; staleData is failClosed"


class NamesOnlyUnavailable(Exception):
    """A names-only request reached an extender that has no node cache."""

    MESSAGE = (
        "loadsched extender has no node cache: nodeCacheCapable requests need the extender "
        "to run with --kubeconfig or in-cluster"
    )


class InvalidNode(Exception):
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
    ) -> None:
        self._rules = rules
        self._clock = clock
        self._metrics = metrics
        self._cache = node_cache
        self._memo = RequestMemo(rules)

    def _entries(
        self, args: ExtenderArgs
    ) -> Iterator[tuple[str, CachedLoad | None, msgspec.Raw | None]]:
        """(name, load, raw item) for each node in the request, in request order."""
        if args.NodeNames is not None:
            if self._cache is None:
                raise NamesOnlyUnavailable(NamesOnlyUnavailable.MESSAGE)
            cache = self._cache
            for name in args.NodeNames:
                yield name, cache.get(name), None
            return
        for index, raw in enumerate((args.Nodes.items if args.Nodes else None) or ()):
            try:
                node = decode_node(raw)
            except msgspec.DecodeError as e:
                raise InvalidNode(index, e) from e
            yield node.metadata.name, self._memo.load(node), raw

    def _verdicts(
        self, args: ExtenderArgs, now: datetime
    ) -> Iterator[tuple[str, Verdict | None, msgspec.Raw | None]]:
        unknown: Tally[tuple[str, str]] = Tally()
        uncached = 0
        for name, entry, raw in self._entries(args):
            if entry is None:
                uncached += 1
                yield name, None, raw
                continue
            verdict = entry.verdict(self._rules, now)
            if verdict.unknown:
                unknown.update(verdict.unknown)
            yield name, verdict, raw
        self._metrics.count_unknown(unknown)
        if uncached:
            self._metrics.uncached_nodes.inc(uncached)

    def filter(self, pod: PodInfo, args: ExtenderArgs) -> FilterResult:
        now = self._clock()
        bypass = pod.is_daemonset_pod
        passed_names: list[str] = []
        passed_raw: list[msgspec.Raw] = []
        rejected: dict[str, str] = {}
        reasons: Tally[tuple[str, str]] = Tally()
        for name, verdict, raw in self._verdicts(args, now):
            message: str | None = None
            if not bypass:
                if verdict is None:
                    if self._rules.fail_closed:
                        message = NOT_CACHED_CLOSED.format(name)
                        reasons[("*", "not-cached")] += 1
                elif verdict.overload is not None:
                    message = verdict.overload
                    reasons[(verdict.overload_metric or "*", _reason(verdict))] += 1
            if message is None:
                passed_names.append(name)
                if raw is not None:
                    passed_raw.append(raw)
            else:
                rejected[name] = message
        self._metrics.count_filtered(reasons)
        if rejected:
            logger.debug(
                "pod/%s: %d node(s) rejected: %s", pod.key, len(rejected), _sample(rejected)
            )
        if args.NodeNames is not None:
            return FilterResult(NodeNames=passed_names, FailedAndUnresolvableNodes=rejected)
        return FilterResult(Nodes=NodeList(items=passed_raw), FailedAndUnresolvableNodes=rejected)

    def prioritize(self, pod: PodInfo, args: ExtenderArgs) -> list[HostPriority]:
        now = self._clock()
        scores = [
            HostPriority(Host=name, Score=verdict.extender_score if verdict else 0)
            for name, verdict, _ in self._verdicts(args, now)
        ]
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("pod/%s: scores %s", pod.key, {s.Host: s.Score for s in scores[:20]})
        return scores

    def preempt(self, args: PreemptionArgs) -> PreemptionResult:
        """Without quotas, load has no say in preemption: the scheduler's victims stand."""
        if args.NodeNameToMetaVictims is not None:
            return PreemptionResult(NodeNameToMetaVictims=args.NodeNameToMetaVictims)
        result: dict[str, MetaVictims] = {}
        for node, victims in (args.NodeNameToVictims or {}).items():
            result[node] = MetaVictims(
                Pods=[MetaPod(UID=pod.metadata.uid) for pod in victims.Pods or ()],
                NumPDBViolations=victims.NumPDBViolations,
            )
        return PreemptionResult(NodeNameToMetaVictims=result)


def _reason(verdict: Verdict) -> str:
    for metric, reason in verdict.unknown:
        if metric == verdict.overload_metric:
            return reason
    return "overloaded"


def _sample(rejected: dict[str, str], limit: int = 5) -> str:
    shown = "; ".join(list(rejected.values())[:limit])
    more = len(rejected) - limit
    return shown + (f"; and {more} more" if more > 0 else "")
