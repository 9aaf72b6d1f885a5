"""The elastic-quota controller (leader only): keeps ``status.used`` of every ElasticQuota
current, reports malformed ones, and reclaims lent capacity.

kube-scheduler's own preemption never proposes pods of equal or higher priority, and proposes
nothing at all while the pod fits on a node — yet a lender's pod is refused while the sum of
use would exceed the sum of ``min`` (borrowers hold its guarantee), whether or not the nodes
are full. This controller closes that gap: for an unschedulable pod whose namespace stays
within its ``min``, it plans with :func:`shared.reclaim.plan_reclaim` — the same victim
selection as the extender's ``preempt``: a node for the pod and a minimal set of borrower pods
(namespaces over their ``min`` in any resource, whatever their priority; lowest priority
first, then newest, online services with ``preemptionPolicy: Never`` last; never pushing a
namespace below its ``min`` in a resource the pod needs), on that node for the room it lacks
and on any node for what the sum of ``min`` needs back — and evicts them through the Eviction
API, so PodDisruptionBudgets are respected.

One plan is carried out per pass, and the next waits until the pod watch no longer shows its
victims (at most ``eviction_wait_seconds``; a victim may take its grace period to go): it sees
the last one's effect. The waiting pod is nominated to the node before its victims are
evicted (``status.nominatedNodeName``, as kube-scheduler's own preemption does), so the
scheduler keeps the freed room for it instead of handing it to a pod of equal or lower
priority; the nomination is re-asserted for ``in_flight_seconds`` (kube-scheduler clears it
whenever an attempt fails). Before either, the freed room is *promised* to the pod on its
ElasticQuota (a reservation at the pod's priority, until it is bound or gone, at most
``in_flight_seconds``): the extender's admission and this controller's own plans count it
against every pod of that priority or lower, whatever became of the nomination, so the room
goes to the pod it was freed for, first come first served. A pod still
waiting is planned again on every pass: once its room is there it needs nothing (it is not
counted against itself), and if another pod took that room it gets new victims.
Evictions are rate-limited (a token bucket), every step is recorded as an Event on the
waiting pod and on each victim, and ``dry_run`` records what would happen.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx

from annotator.evicting import Eviction, TokenBucket, evict
from annotator.metrics import AnnotatorMetrics
from annotator.objects import NodeStore
from annotator.recording import EventRecorder, ObjectRef
from shared.errors import LoadschedError
from shared.kube import patching
from shared.kube.paths import ELASTIC_QUOTAS, PODS
from shared.kube.requesting import DEFAULT_RETRY
from shared.kube.retrying import RetryPolicy
from shared.node_fit import tolerations_of
from shared.pods import Pod
from shared.quantity import ResourceList, format_quantity, parse_resources, to_quantity
from shared.quota_ledger import QuotaLedger
from shared.reclaim import Preemptor, ReclaimPlan, Rules, plan_reclaim
from shared.reserving import write_reservation

logger = logging.getLogger(__name__)

QUOTA_API = "scheduling.x-k8s.io/v1alpha1"
PROMISE_ATTEMPTS = 8
"""Writes of one promise raced by other writers of its ElasticQuota before the pass gives up."""


class WaitingPods:
    """Store of pods the scheduler found no node for (``PodScheduled=False/Unschedulable``);
    fed by the pod watch alongside the quota ledger."""

    def __init__(self, on_change: Callable[[], None] = lambda: None) -> None:
        self.pods: dict[str, Pod] = {}
        self._on_change = on_change

    def _keep(self, pod: Pod) -> bool:
        return pod.is_unschedulable and not pod.is_terminal and not pod.metadata.deletionTimestamp

    def replace(self, items: Sequence[Pod]) -> None:
        self.pods = {p.metadata.uid: p for p in items if self._keep(p)}
        self._on_change()

    def apply(self, event: str, item: Pod) -> None:
        """Any pod change may change what quotas use: every event wakes the controller."""
        uid = item.metadata.uid
        if event != "DELETED" and self._keep(item):
            self.pods[uid] = item
        else:
            self.pods.pop(uid, None)
        self._on_change()


def describe(resources: ResourceList) -> str:
    return ", ".join(f"{format_quantity(k, v)} {k}" for k, v in sorted(resources.items())) or "-"


class QuotaController:
    def __init__(
        self,
        *,
        kube: httpx.AsyncClient,
        ledger: QuotaLedger,
        nodes: NodeStore,
        waiting: WaitingPods,
        recorder: EventRecorder,
        metrics: AnnotatorMetrics,
        dry_run: bool = False,
        evictions_per_minute: float = 30.0,
        grace_seconds: int | None = None,
        in_flight_seconds: float = 60.0,
        eviction_wait_seconds: float = 30.0,
        monotonic: Callable[[], float] = time.monotonic,
        retry: RetryPolicy = DEFAULT_RETRY,
    ) -> None:
        self._kube = kube
        self._retry = retry
        self.ledger = ledger
        self._nodes = nodes
        self.waiting = waiting
        self._recorder = recorder
        self._metrics = metrics
        self._dry_run = dry_run
        self._bucket = TokenBucket(evictions_per_minute, monotonic)
        self._grace = grace_seconds
        self._in_flight_seconds = in_flight_seconds
        self._eviction_wait_seconds = eviction_wait_seconds
        self._monotonic = monotonic
        self.in_flight: dict[str, tuple[str, float]] = {}
        """Waiting pod UID → (the node room was made on, until when its nomination there is
        re-asserted)."""
        self.evicting: dict[str, float] = {}
        """Victims evicted that the pod watch still shows → until when to wait for that."""
        self.wake = asyncio.Event()

    async def run(self, period: float = 5.0) -> None:
        """Reconcile until cancelled (leadership lost); then export none of the quotas."""
        try:
            await self._loop(period)
        finally:
            self._metrics.clear_leader_only()

    async def _loop(self, period: float) -> None:
        """Reconcile on every change the watches report (debounced), and every ``period``."""
        while True:
            try:
                await self.reconcile()
            except (LoadschedError, httpx.HTTPError) as e:  # pragma: no cover - logged, retried
                logger.warning("elastic quota pass failed: %s; will retry", e)
            self.wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), timeout=period)
            await asyncio.sleep(0.2)  # let a burst of watch events settle

    async def reconcile(self) -> None:
        self._metrics.quota_passes.inc()
        self._metrics.set_quota_use(self.ledger.quotas, self.ledger.namespace_used)
        await self.write_status()
        await self.report_invalid()
        await self.reclaim()

    # -- status.used ------------------------------------------------------------------------

    async def write_status(self) -> None:
        ledger = self.ledger
        for (namespace, name), obj in list(ledger.objects.items()):
            if namespace not in ledger.quotas or (namespace, name) in ledger.invalid:
                continue
            used = ledger.namespace_used(namespace)
            current = obj.status.used if obj.status and obj.status.used else {}
            try:
                unchanged = parse_resources(current, where="status.used") == used
            except ValueError:
                unchanged = False
            if unchanged:
                continue
            patch: dict[str, Any] = {k: to_quantity(v) for k, v in sorted(used.items())}
            patch.update({k: None for k in current if k not in used})
            if self._dry_run:
                logger.info("elasticquota/%s/%s: would set status.used %s", namespace, name, patch)
                continue
            await self._patch_status(namespace, name, patch)

    async def _patch_status(self, namespace: str, name: str, used: dict[str, Any]) -> None:
        try:
            await patching.patch(  # sets fixed values, no resourceVersion: idempotent
                self._kube,
                ELASTIC_QUOTAS,
                name,
                {"status": {"used": used}},
                namespace=namespace,
                subresource="status",
                what=f"elasticquota/{namespace}/{name}: patch status",
                retry=self._retry,
                idempotent=True,
                conflicts=True,
            )
        except LoadschedError as e:
            self._metrics.quota_status_writes.labels("error").inc()
            logger.warning("elasticquota/%s/%s: status.used not written: %s", namespace, name, e)
            return
        self._metrics.quota_status_writes.labels("ok").inc()
        logger.debug("elasticquota/%s/%s: status.used = %s", namespace, name, used)

    async def report_invalid(self) -> None:
        for (namespace, name), why in list(self.ledger.invalid.items()):
            obj = self.ledger.objects.get((namespace, name))
            ref = ObjectRef(
                "ElasticQuota", namespace, name, obj.metadata.uid if obj else "", QUOTA_API
            )
            await self._recorder.record(
                ref, "InvalidElasticQuota", f"ignored: {why}", kind="Warning"
            )

    # -- reclaim ----------------------------------------------------------------------------

    async def _settle_in_flight(self) -> None:
        now = self._monotonic()
        for uid, (node, deadline) in list(self.in_flight.items()):
            pod = self.waiting.pods.get(uid)
            if pod is None or now >= deadline:
                del self.in_flight[uid]
            elif pod.status.nominatedNodeName != node:
                await self._nominate(pod, node)

    async def _nominate(self, pod: Pod, node: str | None) -> None:
        meta = pod.metadata
        try:
            await patching.patch(  # the UID is a precondition; the values are fixed
                self._kube,
                PODS,
                meta.name,
                {"metadata": {"uid": meta.uid}, "status": {"nominatedNodeName": node}},
                namespace=meta.namespace,
                subresource="status",
                what=f"pod/{pod.key}: nominate",
                retry=self._retry,
                idempotent=True,
            )
        except LoadschedError as e:
            logger.warning("pod/%s: not nominated to node/%s: %s", pod.key, node, e)

    async def _promise(self, pod: Pod, request: ResourceList) -> bool:
        """Record on the pod's ElasticQuota that the room about to be freed is its own, for
        ``in_flight_seconds`` (a reservation at its priority, read by every extender replica
        and by this controller); ``False`` if it could not be written (nothing is evicted)."""
        ledger = self.ledger
        for _ in range(PROMISE_ATTEMPTS):
            target = ledger.reservation_patch(
                pod, request, seconds=self._in_flight_seconds, promise=True
            )
            if target is None:
                break
            try:
                if await write_reservation(
                    self._kube, ledger, target, what=f"promise pod/{pod.key}", retry=self._retry
                ):
                    return True
            except LoadschedError as e:
                logger.warning("pod/%s: reclaim deferred: room not promised: %s", pod.key, e)
                return False
        logger.warning("pod/%s: reclaim deferred: room not promised", pod.key)
        return False

    def _evictions_pending(self) -> bool:
        """True while the last plan's victims are still counted: a plan made now would see
        neither them gone nor its waiting pod nominated, and take more than needed."""
        now = self._monotonic()
        for uid, deadline in list(self.evicting.items()):
            if uid not in self.ledger.pods or now >= deadline:
                del self.evicting[uid]
        return bool(self.evicting)

    async def reclaim(self) -> None:
        await self._settle_in_flight()
        ledger = self.ledger
        queue = sorted(
            self.waiting.pods.values(),
            key=lambda p: (-p.priority, p.metadata.creationTimestamp or ""),
        )
        self._metrics.quota_waiting_pods.set(len(queue))
        if self._evictions_pending():
            return
        for pod in queue:
            namespace, uid = pod.metadata.namespace, pod.metadata.uid
            if namespace not in ledger.quotas:
                continue
            try:
                request = pod.request()
            except ValueError as e:
                logger.warning("pod/%s: %s", pod.key, e)
                continue
            preemptor = Preemptor(
                uid,
                namespace,
                pod.priority,
                request,
                node_selector=pod.spec.nodeSelector or {},
                tolerations=tolerations_of(pod.spec.tolerations),
            )
            rules = Rules.of(preemptor, ledger.state(without=uid, priority=pod.priority))
            if not rules.reclaiming:
                continue
            nodes = self._nodes.capacity  # those the pod may not go to are skipped by the plan
            plan = plan_reclaim(rules, nodes=nodes, pods_by_node=ledger.by_node)
            if plan is None:
                await self._recorder.record(
                    _pod_ref(pod),
                    "ReclaimImpossible",
                    f"namespace {namespace} is within its elastic quota min, but no node can "
                    f"be freed for {describe(request)} without pushing another namespace below "
                    "its min in a resource the pod needs",
                    kind="Warning",
                )
                continue
            if not plan.victims:
                continue  # it fits already: the scheduler places it on its next attempt
            if not self._dry_run and not self._bucket.take(len(plan.victims)):
                self._metrics.reclaim_evictions.labels("throttled").inc(len(plan.victims))
                logger.info("pod/%s: reclaim deferred by the eviction rate limit", pod.key)
                return
            await self._carry_out(pod, request, plan)
            return  # one plan per pass: the next one sees its effect

    async def _carry_out(self, pod: Pod, request: ResourceList, plan: ReclaimPlan) -> None:
        prefix = "dry run: would evict" if self._dry_run else "evicting"
        names = ", ".join(f"{v.key} on node {v.node}" for v in plan.victims)
        await self._recorder.record(
            _pod_ref(pod),
            "Reclaiming",
            f"{prefix} {names} to give namespace {pod.metadata.namespace} back capacity "
            f"within its elastic quota min ({describe(request)} requested on node {plan.node})",
        )
        if not self._dry_run:
            # promised first, on its ElasticQuota: the extender counts the room as the pod's
            # until it is bound or gone, so no other pod of its priority or lower takes it
            if not await self._promise(pod, request):
                return
            # and nominated: kube-scheduler keeps the node's room for it
            await self._nominate(pod, plan.node)
        evicted: set[str] = set()
        for victim in plan.victims:
            ref = ObjectRef("Pod", victim.namespace, victim.name, victim.uid)
            message = (
                f"namespace {victim.namespace} is over its elastic quota min; capacity "
                f"reclaimed for pod {pod.key}"
            )
            if self._dry_run:
                logger.info("pod/%s: dry run: would evict %s", pod.key, victim.key)
                await self._recorder.record(ref, "Reclaimed", f"dry run: {message}")
                evicted.add(victim.uid)
                self._metrics.reclaim_evictions.labels("dry-run").inc()
                continue
            result, detail = await evict(
                self._kube,
                namespace=victim.namespace,
                name=victim.name,
                uid=victim.uid,
                grace_seconds=self._grace,
                retry=self._retry,
            )
            self._metrics.reclaim_evictions.labels(result.value).inc()
            if result is Eviction.EVICTED:
                self.evicting[victim.uid] = self._monotonic() + self._eviction_wait_seconds
                logger.info("pod/%s: evicted %s on node/%s", pod.key, victim.key, victim.node)
                await self._recorder.record(ref, "Reclaimed", message, kind="Warning")
                evicted.add(victim.uid)
            elif result is Eviction.GONE:
                evicted.add(victim.uid)
            else:
                logger.warning("pod/%s: eviction of %s %s: %s", pod.key, victim.key, result, detail)
                await self._recorder.record(
                    _pod_ref(pod),
                    "ReclaimBlocked",
                    f"eviction of {victim.key} {result.value}: {detail}",
                    kind="Warning",
                )
        if evicted:
            deadline = self._monotonic() + self._in_flight_seconds
            self.in_flight[pod.metadata.uid] = (plan.node, deadline)
        elif not self._dry_run:
            await self._nominate(pod, None)  # nothing was freed: hold no room


def _pod_ref(pod: Pod) -> ObjectRef:
    meta = pod.metadata
    return ObjectRef("Pod", meta.namespace, meta.name, meta.uid)
