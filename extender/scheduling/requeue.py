"""Requeue: make kube-scheduler retry the pods loadsched refused, once loadsched would admit them.

kube-scheduler tags a pod whose nodes an extender refused with the pseudo-plugin ``Extender``
and retries it on the next cluster event of any kind, else only at its periodic flush of
unschedulable pods (5 minutes). loadsched decides from state kube-scheduler does not watch:
its own node watch (names-only mode), time (values going stale or fresh, the hot value
decaying) and elastic quotas. So a retry can arrive before the extender's watch has the change
that admits the pod (and be refused again), and some changes that admit a pod (an
ElasticQuota edited, time passing) are no event for kube-scheduler at all.

:class:`RequeueTracker` (pure) remembers what filter refused: the nodes of pods that were left
with no node at all, and the pods an elastic quota refused. :class:`Requeuer` asks the same
decision code again every ``period`` while anything is remembered; when a remembered node
would now pass, or a remembered pod would now be admitted, that is a *transition*, and it
makes one JSON merge patch of the annotation :data:`REQUEUE_ANNOTATION` on a Node (the node
that now passes, else any node): kube-scheduler handles a Node annotation change as the
cluster event ``UpdateNodeAnnotation``, which requeues every pod tagged ``Extender``. So one
write covers every transition found until it is made, writes are at least ``min_interval``
apart, and a write consumes every refusal remembered (a pod refused again on its retry is
remembered again). Nothing is written while no refused pod still waits: a pod that a later
filter call placed (kube-scheduler's own retry won the race) is forgotten at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

import httpx

from extender.scheduling.metrics import ExtenderMetrics
from extender.scheduling.node_cache import NodeLoadCache
from extender.scheduling.quota_gate import QuotaGate
from extender.scheduling.wire import PodInfo
from shared.annotations import format_timestamp
from shared.errors import APIError, APIUnreachableError
from shared.estimation import Need
from shared.kube import patching
from shared.kube.paths import NODES
from shared.kube.requesting import DEFAULT_RETRY
from shared.kube.retrying import RetryPolicy
from shared.load_model import WITH_POD, refusal_for
from shared.policy import HOT_VALUE_KEY
from shared.quantity import ResourceList

logger = logging.getLogger(__name__)

REQUEUE_ANNOTATION = "loadsched.io/requeue"
"""Written on a Node when pods refused earlier would now be admitted: ``<cause>,<timestamp>``."""
REMEMBER_SECONDS = 330.0
"""How long a refusal is remembered: past kube-scheduler's own 5-minute flush of
unschedulable pods, which retries (and so refreshes) every pod still waiting."""

Cause = str
"""Why a refusal no longer holds: ``load``, ``hot-value``, ``stale``, ``node-added``, ``quota``."""


def cause_of(reason: tuple[str, str] | None) -> Cause:
    """The cause a node's refusal (metric, why) resolves as, once the node passes."""
    if reason is None:  # refused, yet not in the view: the node was not cached
        return "node-added"
    metric, why = reason
    if why == "not-cached":
        return "node-added"
    if why in ("overloaded", WITH_POD):
        return "hot-value" if metric == HOT_VALUE_KEY else "load"
    return "stale"


@dataclass(slots=True)
class _RefusedPod:
    pod: PodInfo
    request: ResourceList
    until: float
    requeued: bool = False
    """Its quota admits it now; it waits for the write."""


@dataclass
class RequeueTracker:
    """What filter refused, and which refusals no longer hold. Pure: time (seconds since the
    epoch, from the extender's clock) is passed in."""

    remember_seconds: float = REMEMBER_SECONDS
    nodes: dict[str, tuple[float, Cause, Need | None]] = field(default_factory=dict)
    """Refused node → (remembered until, the cause its passing would be, the room the smallest
    pod it refused needs, with estimation: ``None`` when any pod that passes will do)."""
    pods: dict[str, _RefusedPod] = field(default_factory=dict)
    """Pods refused by their elastic quota, by UID."""
    waiting: dict[str, float] = field(default_factory=dict)
    """Pods left with no node by the load filter, by UID → remembered until. The nodes
    matter only while one of them still waits."""
    _last: Mapping[str, str] | None = None
    _last_until: float = 0.0

    def __bool__(self) -> bool:
        return bool(self.waiting or self.pods)

    def refused_nodes(
        self,
        uid: str,
        rejected: Mapping[str, str],
        reasons: Callable[[str], tuple[str, str] | None],
        now: float,
        need: Need | None = None,
    ) -> None:
        """Pod ``uid`` was left with no node: remember it and the nodes refused, with the room
        the pod needs (``need``, with estimation): a node passes again once it has that room.
        kube-scheduler asks again and again with the same nodes while nothing changes, and the
        extender then hands out the same answer object: its nodes are remembered once, and
        only their time refreshed."""
        until = now + self.remember_seconds
        self.waiting[uid] = until
        self.pods.pop(uid, None)  # its quota admitted it this time
        if rejected is self._last:
            self._last_until = until
            return
        self._flush_last()
        self._last, self._last_until = rejected, until
        nodes = self.nodes
        for name in rejected:
            wanted = need
            kept = nodes.get(name)
            if kept is not None:  # the smallest pod waiting decides; None: any pod
                wanted = _smaller(kept[2], need)
            nodes[name] = (until, cause_of(reasons(name)), wanted)

    def placed(self, uid: str) -> None:
        """Pod ``uid`` got a node after all (a retry was admitted): it waits no more."""
        if self.waiting.pop(uid, None) is not None and not self.waiting:
            self._forget_nodes()
        self.pods.pop(uid, None)

    def _forget_nodes(self) -> None:
        self.nodes.clear()
        self._last = None

    def clear(self) -> None:
        """Forget everything: a requeue write makes kube-scheduler retry every pod it holds
        as refused by the extender; a pod refused again is remembered again."""
        self.waiting.clear()
        self.pods.clear()
        self._forget_nodes()

    def refused_pod(self, pod: PodInfo, request: ResourceList, now: float) -> None:
        self.pods[pod.metadata.uid] = _RefusedPod(pod, request, now + self.remember_seconds)

    def _flush_last(self) -> None:
        """Give the nodes of the last answer the time it was last handed out."""
        last, until = self._last, self._last_until
        if last is None:
            return
        nodes = self.nodes
        for name in last:
            entry = nodes.get(name)
            if entry is not None and entry[0] < until:
                nodes[name] = (until, *entry[1:])
        self._last = None

    def transitions(
        self,
        *,
        passes: Callable[[str, Need | None], bool],
        admits: Callable[[PodInfo, ResourceList], bool | None],
        now: float,
    ) -> list[tuple[Cause, str | None]]:
        """Forget what expired; return (cause, node) for each refusal that no longer holds
        (``passes(node, need)``: the node would take a pod needing ``need``, or any pod when
        ``None``; node ``None`` for a pod a quota now admits), each once. ``admits`` answers
        ``None`` for a pod that needs nothing any more (bound meanwhile)."""
        self._flush_last()
        found: list[tuple[Cause, str | None]] = []
        for uid, until in list(self.waiting.items()):
            if until <= now:
                del self.waiting[uid]
        if not self.waiting:
            self._forget_nodes()
        for name, (until, cause, need) in list(self.nodes.items()):
            if until <= now:
                del self.nodes[name]
            elif passes(name, need):
                del self.nodes[name]
                found.append((cause, name))
        for uid, refused in list(self.pods.items()):
            if refused.until <= now:
                del self.pods[uid]
                continue
            if refused.requeued:
                continue
            admitted = admits(refused.pod, refused.request)
            if admitted is None:
                del self.pods[uid]
            elif admitted:
                refused.requeued = True
                found.append(("quota", None))
        return found


def _smaller(a: Need | None, b: Need | None) -> Need | None:
    if a is None or b is None:
        return None
    return Need(min(a.cpu, b.cpu), min(a.memory, b.memory))


class Requeuer:
    """The loop that turns transitions into Node annotation writes (see the module doc)."""

    def __init__(
        self,
        *,
        tracker: RequeueTracker,
        node_cache: NodeLoadCache,
        quota: QuotaGate | None,
        fail_closed: bool,
        metrics: ExtenderMetrics,
        clock: Callable[[], datetime],
        period: float,
        min_interval: float,
        retry: RetryPolicy = DEFAULT_RETRY,
    ) -> None:
        self.tracker = tracker
        self._retry = retry
        self._cache = node_cache
        self._quota = quota
        self._fail_closed = fail_closed
        self._metrics = metrics
        self._clock = clock
        self._period = period
        self._min_interval = min_interval
        self._pending: list[tuple[Cause, str | None]] = []
        self._last_write = -min_interval

    def admits(self, pod: PodInfo, request: ResourceList) -> bool | None:
        quota = self._quota
        if quota is None or pod.metadata.uid in quota.ledger.pods:
            return None
        return quota.check(pod, request).admitted

    def due(self) -> tuple[Cause, str] | None:
        """One pass: collect transitions; the write to make now, if one is due and allowed."""
        if not self.tracker and not self._pending:
            return None  # nothing refused is waiting: nothing to look at
        moment = self._clock()
        now = moment.timestamp()
        view = self._cache.view(moment)
        if self.tracker:
            refusals, verdicts, fail_closed = view.refusals, view.verdicts, self._fail_closed

            def passes(name: str, need: Need | None) -> bool:
                """Would filter pass ``name`` now, for a pod needing ``need`` (estimation), or
                for an ordinary pod?"""
                if name in refusals:
                    return False
                verdict = verdicts.get(name)
                if verdict is None:
                    return not fail_closed
                return need is None or refusal_for(verdict, need, name) is None

            found = self.tracker.transitions(passes=passes, admits=self.admits, now=now)
            for cause, _ in found:
                self._metrics.requeue_transitions.labels(cause).inc()
            self._pending += found
        if self._pending and not self.tracker:
            self._pending = []  # every pod they were for has been placed (or forgotten) since
        if not self._pending or now - self._last_write < self._min_interval:
            return None
        named = (n for _, n in self._pending if n is not None and n in view.verdicts)
        # Any node will do for a quota: the same one on every replica, so that two replicas
        # writing in the same second write the same value, and the second write changes nothing.
        node = next(named, None) or min(view.verdicts, default=None)
        if node is None:
            return None
        self._last_write = now
        return self._pending[0][0], node

    async def write(self, client: httpx.AsyncClient, cause: Cause, node: str) -> None:
        """Write the requeue annotation; on failure the transitions stay pending."""
        value = f"{cause},{format_timestamp(self._clock())}"
        try:
            await patching.patch(  # sets one fixed value: idempotent
                client,
                NODES,
                node,
                {"metadata": {"annotations": {REQUEUE_ANNOTATION: value}}},
                what=f"node/{node}",
                retry=self._retry,
                idempotent=True,
                conflicts=True,
            )
        except (APIError, APIUnreachableError) as e:
            self._metrics.requeue_writes.labels("error").inc()
            logger.warning("node/%s: requeue annotation not written (%s): %s", node, cause, e)
            return
        self._pending = []
        self.tracker.clear()
        self._metrics.requeue_writes.labels("written").inc()
        logger.info("node/%s: requeue annotation written: pods refused earlier (%s)", node, cause)

    async def run(self, client: httpx.AsyncClient) -> None:
        metrics = self._metrics
        metrics.requeue_tracked.labels("nodes").set_function(lambda: len(self.tracker.nodes))
        metrics.requeue_tracked.labels("pods").set_function(lambda: len(self.tracker.pods))
        while True:
            await asyncio.sleep(self._period)
            try:
                due = self.due()
                if due is not None:
                    await self.write(client, *due)
            except Exception:  # the loop must outlive any single pass
                logger.exception("requeue pass failed")
