"""Carries out a node's plan (:class:`Mover`): the moves the round's limits
(:mod:`shared.rebalance_limits`) and the rate limit allow; unless dry-run, the node marked
first (the extender then refuses each moved workload's replacement there) and the mark awaited
in the node watch, then each pod evicted through the Eviction API (a PodDisruptionBudget's 429
is counted and skipped). Every move leaves an Event and a record in the published status; a
node pods were evicted from is held, and the marks of evictions that did not happen are
withdrawn."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime

import httpx

from annotator.evicting import Eviction, TokenBucket, evict
from annotator.metrics import AnnotatorMetrics
from annotator.rebalance.marking import MARK_SEEN_SECONDS, NodeMarks
from annotator.rebalance.status import EvictionRecord, RebalanceStatus, stamp
from annotator.recording import EventRecorder, ObjectRef
from shared.estimation import Need
from shared.kube.requesting import DEFAULT_RETRY
from shared.kube.retrying import RetryPolicy
from shared.overload_streaks import Observation, OverloadTracker
from shared.rebalance import Move, NodePlan
from shared.rebalance_limits import RoundAllowance, within_limits
from shared.rebalance_policy import RebalancePolicy

logger = logging.getLogger(__name__)


class Mover:
    """Moves the pods of a node's plan, within the limits, mark first."""

    def __init__(
        self,
        *,
        kube: httpx.AsyncClient,
        settings: RebalancePolicy,
        marks: NodeMarks,
        tracker: OverloadTracker,
        recorder: EventRecorder,
        metrics: AnnotatorMetrics,
        status: RebalanceStatus,
        dry_run: bool,
        monotonic: Callable[[], float] = time.monotonic,
        retry: RetryPolicy = DEFAULT_RETRY,
    ) -> None:
        self._kube = kube
        self._settings = settings
        self._marks = marks
        self._tracker = tracker
        self._recorder = recorder
        self._metrics = metrics
        self._status = status
        self._dry_run = dry_run
        self._retry = retry
        self._bucket = TokenBucket(settings.limits.per_minute, monotonic)

    async def carry_out(
        self,
        plan: NodePlan,
        observation: Observation,
        allowance: RoundAllowance,
        moved: dict[str, datetime],
        now: datetime,
    ) -> None:
        """Move ``plan``'s pods that the limits allow; ``moved`` (workload → until when none
        of its pods is moved again) gains each workload evicted. The limits count evictions
        made: the share of one a budget blocked, that failed or was not tried goes back."""
        spent = self._allowed(plan, allowance)
        if not spent:
            return
        evicted = await self._evict(plan, observation, spent, moved, now)
        unmade = [move for move in spent if move not in evicted]
        if unmade and not self._dry_run:
            allowance.give_back(unmade)
            self._bucket.give_back(len(unmade))

    async def _evict(
        self,
        plan: NodePlan,
        observation: Observation,
        allowed: list[Move],
        moved: dict[str, datetime],
        now: datetime,
    ) -> list[Move]:
        """Mark the node (unless dry-run), evict ``allowed``, withdraw the marks of evictions
        that did not happen; the moves evicted."""
        until = (now + self._settings.cooldown).replace(microsecond=0)  # as the mark spells it
        marked: tuple[dict[str, datetime], dict[str, Need]] | None = None
        previous = self._marks.on(plan.node), self._marks.usages_on(plan.node)
        if not self._dry_run:
            marked = await self._marks.add(
                plan.node,
                {m.pod.facts.workload or "": until for m in allowed},
                now,
                {m.pod.facts.workload or "": m.pod.need for m in allowed},
            )
            if marked is None:
                return []  # without the mark a replacement could come straight back
            if not await self._marks.shown(plan.node, marked[0]):
                logger.warning(
                    "node/%s: the node watch did not show the rebalance mark within %gs; "
                    "nothing moved this round",
                    plan.node,
                    MARK_SEEN_SECONDS,
                )
                allowed = []  # withdrawn below, as for evictions that did not happen
        streak = observation.acting.streak if observation.acting else 0
        evicted = [m for m in allowed if await self._move(plan, m, streak, moved, until, now)]
        if evicted:
            self._tracker.hold(plan.node, now)
        if marked is not None:
            await self._withdraw(plan.node, marked, previous, moved, now)
        return evicted

    def _allowed(self, plan: NodePlan, allowance: RoundAllowance) -> list[Move]:
        """The moves the round's limits and the rate limit allow, spent from ``allowance``."""
        allowed, held_back = within_limits(plan.moves, self._settings.limits, allowance)
        if held_back:
            self._metrics.rebalance_skipped.labels("limit").inc(held_back)
        if not allowed:
            return []
        if not self._dry_run:
            allowed = self._throttled(plan, allowed)
            if not allowed:
                return []
        allowance.spend(allowed)
        return allowed

    def _throttled(self, plan: NodePlan, allowed: list[Move]) -> list[Move]:
        """As many of ``allowed`` as the rate limit has tokens for."""
        granted = self._bucket.take_up_to(len(allowed))
        if granted < len(allowed):
            throttled = len(allowed) - granted
            self._metrics.rebalance_evictions.labels("throttled", plan.metric).inc(throttled)
            logger.info("node/%s: %d eviction(s) deferred by the rate limit", plan.node, throttled)
            allowed = allowed[:granted]
        return allowed

    async def _move(
        self,
        plan: NodePlan,
        move: Move,
        streak: int,
        moved: dict[str, datetime],
        until: datetime,
        now: datetime,
    ) -> bool:
        """Evict ``move``'s pod (or, in dry-run, say it would); whether it was evicted."""
        message = move_message(plan, move, streak)
        facts = move.pod.facts
        pod_ref = ObjectRef("Pod", facts.namespace, facts.name, facts.uid)
        if self._dry_run:
            self._metrics.rebalance_evictions.labels("dry-run", plan.metric).inc()
            self._remember(now, move.pod.key, plan, move.target, "dry-run")
            logger.info("pod/%s: dry run: would evict: %s", move.pod.key, message)
            await self._recorder.record(pod_ref, "Rebalancing", f"dry run: would evict: {message}")
            return False
        result, detail = await evict(
            self._kube,
            namespace=facts.namespace,
            name=facts.name,
            uid=facts.uid,
            grace_seconds=self._settings.grace_seconds,
            retry=self._retry,
        )
        self._metrics.rebalance_evictions.labels(result.value, plan.metric).inc()
        self._remember(now, move.pod.key, plan, move.target, result.value, detail)
        if result is Eviction.EVICTED and facts.workload:
            moved[facts.workload] = until
        await self._tell(plan, move, pod_ref, result, detail, message)
        return result is Eviction.EVICTED

    async def _tell(
        self,
        plan: NodePlan,
        move: Move,
        pod_ref: ObjectRef,
        result: Eviction,
        detail: str,
        message: str,
    ) -> None:
        """The log line and Events of an eviction's ``result``."""
        key = move.pod.key
        if result is Eviction.EVICTED:
            logger.info("pod/%s: evicted: %s", key, message)
            await self._recorder.record(pod_ref, "Rebalanced", f"evicted: {message}")
            node_ref = ObjectRef("Node", "", plan.node, plan.node)
            await self._recorder.record(node_ref, "Rebalanced", f"evicted pod {key}: {message}")
        elif result is Eviction.BLOCKED:
            logger.info("pod/%s: eviction blocked: %s", key, detail)
            await self._recorder.record(
                pod_ref,
                "RebalanceBlocked",
                f"not evicted, a PodDisruptionBudget does not allow it now: {detail}",
                kind="Warning",
            )
        elif result is Eviction.FAILED:
            logger.warning("pod/%s: eviction failed: %s", key, detail)

    def _remember(
        self, now: datetime, pod: str, plan: NodePlan, target: str, result: str, detail: str = ""
    ) -> None:
        self._status.evictions.append(
            EvictionRecord(stamp(now), pod, plan.node, target, plan.metric, result, detail)
        )

    async def _withdraw(
        self,
        node: str,
        marked: tuple[dict[str, datetime], dict[str, Need]],
        previous: tuple[dict[str, datetime], dict[str, Need]],
        moved: dict[str, datetime],
        now: datetime,
    ) -> None:
        """Rewrite the node's marks as ``marked`` with this round's marks of evictions that did
        not happen undone: a workload not ``moved`` keeps the mark (and usage) it had before,
        if that mark has not expired (a workload with such a mark is in cooldown, so only a
        mark that came during the round), and loses it otherwise. A mark for an eviction that
        did not happen would refuse that workload there for nothing."""
        marks, written_usages = marked
        previous_marks, previous_usages = previous
        kept: dict[str, datetime] = {}
        usages = dict(written_usages)
        for workload, until in marks.items():
            if workload in moved:
                kept[workload] = until
            elif previous_marks.get(workload, now) > now:
                kept[workload] = previous_marks[workload]
                if workload in previous_usages:
                    usages[workload] = previous_usages[workload]
                else:
                    usages.pop(workload, None)
        if kept != marks:
            await self._marks.write(node, kept, usages)


def move_message(plan: NodePlan, move: Move, streak: int) -> str:
    """What an Event and the log say of ``move``."""
    pod = move.pod
    how = "measured" if pod.measured else "estimated from its request"
    unit = "cores" if plan.resource == "cpu" else "bytes"
    return (
        f"node {plan.node}: {plan.metric} {plan.value:.3f} above {plan.high:g} for "
        f"{streak} rounds; this pod uses {pod.usage:.3g} {unit} ({how}); "
        f"expected on node {move.target} ({plan.metric} "
        f"{move.value_after:.3f} with it)"
    )
