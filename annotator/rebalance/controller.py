"""The rebalancer (leader only): moves pods off nodes that stay above a usage threshold, with
the decisions of :mod:`shared.rebalance`, through the Eviction API.

A round, every ``spec.rebalance.period``:

1. Every node is observed (:class:`shared.overload_streaks.OverloadTracker`): its streak of fresh
   rounds above ``high``. Marks (``loadsched.io/rebalanced-from``) that expired, or on a node
   now under every ``low``, are removed.
2. For each node whose streak is complete, furthest over first: its pods are read from the API
   server (not the watch: the opt-out annotation and the newest state count), those that may
   move are measured (the per-pod usage queries; a pod without a sample counts at its request
   × the estimation factor), and the fewest that cover the overshoot are given targets that
   loadsched's own filter passes and that stay under every ``high`` with the pod added.
3. Unless dry-run: the source node is marked first (the extender then refuses each moved
   workload's replacement there), then the pods are evicted within the limits: ``perNode``,
   ``perNamespace`` and ``perRound`` a round, ``perMinute`` overall, one pod per workload per
   ``cooldown``. A PodDisruptionBudget's 429 is counted and skipped. The node is then held
   until its metric can show the pods gone.

Every eviction is an Event on the pod and on the node (the metric, its value, the threshold,
the pod's usage and the expected target); the last plan and evictions are published in a
ConfigMap that the extender's ``/v1/status?part=rebalance`` and ``kubectl loadsched
rebalance`` read.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import quote

import httpx
import msgspec

from annotator.evicting import Eviction, TokenBucket, evict
from annotator.metrics import AnnotatorMetrics
from annotator.rebalance.full_pod import POD_LIST, FullPod
from annotator.rebalance.pods import BoundPod
from annotator.rebalance.status import (
    EvictionRecord,
    RebalanceStatus,
    observed_json,
    plan_json,
    stamp,
)
from annotator.recording import EventRecorder, ObjectRef
from shared.annotation_keys import REBALANCE_STATUS_KEY, REBALANCED_FROM_ANNOTATION
from shared.errors import APINotFoundError, LoadschedError
from shared.estimation import Need, NodeSize, need_of
from shared.kube import patching
from shared.kube.bodies import encode
from shared.kube.meta import PodMeta
from shared.kube.paths import CONFIGMAPS, NODES, PODS
from shared.kube.requesting import DEFAULT_RETRY, request
from shared.kube.retrying import RetryPolicy
from shared.load_model import NodeLoad, evaluate
from shared.node_fit import FitNode, PodNeeds, required_affinity, tolerations_of
from shared.overload_streaks import Observation, OverloadTracker, Threshold, thresholds_of
from shared.pods import Pod, pod_request
from shared.policy import DynamicSchedulerPolicy
from shared.quantity import ResourceList
from shared.quota import Admission
from shared.rebalance import Candidate, Move, NodePlan, PodFacts, TargetNode, plan_node, skip_reason
from shared.rebalance_marks import decode_departures, encode_departures
from shared.rules import LoadRules
from shared.strategies import placement_of

logger = logging.getLogger(__name__)

UsageQuery = Callable[[str], Awaitable[dict[tuple[str, str], float]]]
"""Runs a PromQL query; (namespace, pod) → value."""
MARK_SEEN_SECONDS = 5.0
"""How long the rebalancer waits for its own node watch to show a mark it wrote before it
evicts (a stand-in for the extender's watch, which reads the same API server)."""


@dataclass
class NodeFacts:
    """What the rebalancer reads of a node from the watch."""

    annotations: Mapping[str, str]
    size: NodeSize
    fit: FitNode


class Rebalancer:
    def __init__(
        self,
        *,
        kube: httpx.AsyncClient,
        policy: DynamicSchedulerPolicy,
        rules: LoadRules,
        node_facts: Callable[[], Mapping[str, NodeFacts]],
        bound_pods: Callable[[str], Sequence[BoundPod]],
        usage: UsageQuery,
        recorder: EventRecorder,
        metrics: AnnotatorMetrics,
        status_namespace: str,
        quota_admits: Callable[[Pod, ResourceList], Admission] | None = None,
        status_name: str = "loadsched-rebalance",
        dry_run: bool = False,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        retry: RetryPolicy = DEFAULT_RETRY,
    ) -> None:
        self._kube = kube
        self._monotonic = monotonic
        self._sleep = sleep
        self._settings = policy.spec.rebalance
        self._zone = policy.zone
        self._rules = rules
        self._estimation = policy.spec.estimation
        self.thresholds = thresholds_of(policy)
        self.tracker = OverloadTracker(self.thresholds, self._settings.consecutive_rounds)
        self._node_facts = node_facts
        self._bound_pods = bound_pods
        self._usage = usage
        self._recorder = recorder
        self._metrics = metrics
        self._quota_admits = quota_admits
        """With elastic quotas: whether a pod's quota admits it, itself not counted (its
        replacement asks the same, in place of it)."""
        self._status_namespace = status_namespace
        self._status_name = status_name
        self.dry_run = dry_run or self._settings.dry_run
        self._clock = clock
        self._retry = retry
        self._bucket = TokenBucket(self._settings.limits.per_minute, monotonic)
        self.moved: dict[str, datetime] = {}
        """Workload → until when none of its pods is moved again."""
        self.status = RebalanceStatus(dry_run=self.dry_run)
        self._published = b""

    # -- the loop -----------------------------------------------------------------------------

    async def run(self) -> None:
        """Rounds until cancelled (leadership lost); then its node counts are not exported:
        they would go stale beside the new leader's."""
        try:
            await self._loop()
        finally:
            self._metrics.rebalance_nodes.clear()

    async def _loop(self) -> None:
        period = self._settings.period.total_seconds()
        while True:
            try:
                await self.round()
            except (LoadschedError, httpx.HTTPError) as e:  # pragma: no cover - logged, retried
                logger.warning("rebalance round failed: %s; will retry", e)
            except Exception:  # pragma: no cover - a defect must not stop the leader's loops
                logger.exception("rebalance round failed; will retry")
            await asyncio.sleep(period)

    async def round(self) -> list[NodePlan]:
        self._metrics.rebalance_rounds.inc()
        now = self._clock()
        facts = self._node_facts()
        self.tracker.forget(facts)
        observations = {
            name: self.tracker.observe(name, node.annotations, self._zone, now)
            for name, node in facts.items()
        }
        states: dict[str, int] = dict.fromkeys(("over", "waiting", "held", "stale", "under"), 0)
        for observation in observations.values():
            states[observation.state] += 1
        for state, count in states.items():
            self._metrics.rebalance_nodes.labels(state).set(count)
        self.moved = {k: v for k, v in self.moved.items() if v > now}
        for node in facts.values():  # a new leader keeps the last one's cooldowns
            for workload, until in _marks_of(node).items():
                if until > now and until > self.moved.get(workload, now):
                    self.moved[workload] = until
        await self._clear_marks(facts, observations, now)
        acting = sorted(
            (o for o in observations.values() if o.state == "over"),
            key=lambda o: -_excess(o),
        )
        self.status.round_at = stamp(now)
        self.status.nodes = states
        self.status.observed = [
            observed_json(o)
            for o in observations.values()
            if o.state in ("over", "waiting", "held")
        ]
        plans: list[NodePlan] = []
        if acting:
            plans = await self._act(acting, facts, observations, now)
        self.status.plans = [plan_json(p) for p in plans]
        await self._publish()
        return plans

    # -- acting -------------------------------------------------------------------------------

    async def _act(
        self,
        acting: list[Observation],
        facts: Mapping[str, NodeFacts],
        observations: Mapping[str, Observation],
        now: datetime,
    ) -> list[NodePlan]:
        usage = await self._measured()
        targets = self._targets(facts, observations, now)
        planned: dict[str, Need] = {}
        plans: list[NodePlan] = []
        allowance = _Allowance(self._settings.limits.per_round)
        for observation in acting:
            acting_metric = observation.acting
            if acting_metric is None:
                continue
            threshold = next(t for t in self.thresholds if t.metric == acting_metric.metric)
            node = facts[observation.node]
            pods = await self._pods_on(observation.node)
            if pods is None:
                continue
            candidates = self._candidates(pods, threshold, usage, now)
            plan = plan_node(
                observation,
                threshold,
                node.size,
                candidates,
                targets,
                self.thresholds,
                now,
                planned,
            )
            if plan is None:
                continue
            plans.append(plan)
            if plan.unplaced:
                self._metrics.rebalance_skipped.labels("no-target").inc(len(plan.unplaced))
                logger.info(
                    "node/%s: %s %.3f above %g, but not moved: %s",
                    plan.node,
                    plan.metric,
                    plan.value,
                    plan.high,
                    "; ".join(f"{pod}: {why}" for pod, why in plan.unplaced),
                )
                continue
            if not plan.moves:
                self._metrics.rebalance_skipped.labels("no-candidate").inc()
                continue
            await self._carry_out(plan, observation, allowance, now)
        return plans

    def _candidates(
        self,
        pods: Sequence[FullPod],
        threshold: Threshold,
        usage: Mapping[str, dict[tuple[str, str], float]],
        now: datetime,
    ) -> list[Candidate]:
        candidates: list[Candidate] = []
        for pod in pods:
            meta = pod.metadata
            facts = PodFacts(
                namespace=meta.namespace,
                name=meta.name,
                uid=meta.uid,
                owners=tuple((o.kind, o.name) for o in meta.ownerReferences or ()),
                annotations=meta.annotations or {},
                labels=meta.labels or {},
                priority=pod.spec.priority or 0,
                phase=pod.status.phase,
                terminating=bool(meta.deletionTimestamp),
                local_storage=pod.spec.local_storage,
                unjudged=pod.spec.unjudged,
            )
            reason = skip_reason(facts, self._settings, self.moved, now)
            if reason is not None:
                self._metrics.rebalance_skipped.labels(reason).inc()
                if reason == "unjudged-constraint":
                    logger.debug(
                        "pod/%s/%s not moved: it asks for %s, which the target check does not "
                        'judge (annotate it loadsched.io/evict: "true" to move it anyway)',
                        meta.namespace,
                        meta.name,
                        facts.unjudged,
                    )
                continue
            try:
                request = pod_request(pod.spec)
            except ValueError:
                self._metrics.rebalance_skipped.labels("unreadable").inc()
                continue
            key = (meta.namespace, meta.name)
            as_pod = Pod(
                metadata=PodMeta(name=meta.name, namespace=meta.namespace, uid=meta.uid),
                spec=pod.spec,
                status=pod.status,
            )
            if self._quota_admits is not None and not self._quota_admits(as_pod, request).admitted:
                self._metrics.rebalance_skipped.labels("quota").inc()
                continue
            # what the extender's filter takes the replacement to use (the estimation policy's
            # basis, factors and defaults), also when a pod has no sample
            estimated = need_of(placement_of(as_pod, now, self._rules), self._estimation)
            cpu = usage["cpu"].get(key)
            memory = usage["memory"].get(key)
            need = Need(
                cpu if cpu is not None else estimated.cpu,
                memory if memory is not None else estimated.memory,
            )
            measured = (cpu if threshold.resource == "cpu" else memory) is not None
            candidates.append(
                Candidate(
                    facts=facts,
                    usage=need.of(threshold.resource),
                    measured=measured,
                    online=pod.spec.preemptionPolicy == "Never",
                    created=meta.creationTimestamp or "",
                    needs=PodNeeds(
                        requests=request,
                        node_selector=pod.spec.nodeSelector or {},
                        tolerations=tolerations_of(pod.spec.tolerations),
                        required=required_affinity(pod.spec.affinity),
                    ),
                    need=need,
                    estimate=estimated if self._rules.estimation is not None else None,
                )
            )
        return candidates

    async def _carry_out(
        self,
        plan: NodePlan,
        observation: Observation,
        allowance: _Allowance,
        now: datetime,
    ) -> None:
        limits = self._settings.limits
        allowed: list[Move] = []
        workloads: set[str] = set()
        counted: dict[str, int] = {}
        for move in plan.moves:
            facts = move.pod.facts
            workload = facts.workload or ""
            namespace_count = allowance.per_namespace.get(facts.namespace, 0) + counted.get(
                facts.namespace, 0
            )
            if (
                len(allowed) >= limits.per_node
                or allowance.round <= len(allowed)
                or namespace_count >= limits.per_namespace
                or workload in workloads
            ):
                self._metrics.rebalance_skipped.labels("limit").inc()
                continue
            workloads.add(workload)
            counted[facts.namespace] = counted.get(facts.namespace, 0) + 1
            allowed.append(move)
        if not allowed:
            return
        if not self.dry_run:
            granted = self._bucket.take_up_to(len(allowed))
            if granted < len(allowed):
                throttled = len(allowed) - granted
                self._metrics.rebalance_evictions.labels("throttled", plan.metric).inc(throttled)
                logger.info(
                    "node/%s: %d eviction(s) deferred by the rate limit", plan.node, throttled
                )
                allowed = allowed[:granted]
            if not allowed:
                return
        allowance.round -= len(allowed)
        for move in allowed:
            namespace = move.pod.facts.namespace
            allowance.per_namespace[namespace] = allowance.per_namespace.get(namespace, 0) + 1
        until = (now + self._settings.cooldown).replace(microsecond=0)  # as the mark spells it
        marked: dict[str, datetime] | None = None
        previous = _marks_of(self._node_facts().get(plan.node))
        if not self.dry_run:
            marked = await self._mark(
                plan.node, {m.pod.facts.workload or "": until for m in allowed}, now
            )
            if marked is None:
                return  # without the mark a replacement could come straight back: move nothing
            if not await self._mark_seen(plan.node, marked):
                logger.warning(
                    "node/%s: the node watch did not show the rebalance mark within %gs; "
                    "nothing moved this round",
                    plan.node,
                    MARK_SEEN_SECONDS,
                )
                allowed = []  # withdrawn below, as for evictions that did not happen
        streak = observation.acting.streak if observation.acting else 0
        evicted = False
        for move in allowed:
            pod = move.pod
            facts = pod.facts
            how = "measured" if pod.measured else "estimated from its request"
            unit = "cores" if plan.resource == "cpu" else "bytes"
            message = (
                f"node {plan.node}: {plan.metric} {plan.value:.3f} above {plan.high:g} for "
                f"{streak} rounds; this pod uses {pod.usage:.3g} {unit} ({how}); "
                f"expected on node {move.target} ({plan.metric} "
                f"{move.value_after:.3f} with it)"
            )
            pod_ref = ObjectRef("Pod", facts.namespace, facts.name, facts.uid)
            node_ref = ObjectRef("Node", "", plan.node, plan.node)
            if self.dry_run:
                self._metrics.rebalance_evictions.labels("dry-run", plan.metric).inc()
                self._remember(now, move.pod.key, plan, move.target, "dry-run")
                logger.info("pod/%s: dry run: would evict: %s", pod.key, message)
                await self._recorder.record(
                    pod_ref, "Rebalancing", f"dry run: would evict: {message}"
                )
                continue
            result, detail = await evict(
                self._kube,
                namespace=facts.namespace,
                name=facts.name,
                uid=facts.uid,
                grace_seconds=self._settings.grace_seconds,
                retry=self._retry,
            )
            self._metrics.rebalance_evictions.labels(result.value, plan.metric).inc()
            self._remember(now, pod.key, plan, move.target, result.value, detail)
            if result is Eviction.EVICTED:
                evicted = True
                if facts.workload:
                    self.moved[facts.workload] = until
                logger.info("pod/%s: evicted: %s", pod.key, message)
                await self._recorder.record(pod_ref, "Rebalanced", f"evicted: {message}")
                await self._recorder.record(
                    node_ref, "Rebalanced", f"evicted pod {pod.key}: {message}"
                )
            elif result is Eviction.BLOCKED:
                logger.info("pod/%s: eviction blocked: %s", pod.key, detail)
                await self._recorder.record(
                    pod_ref,
                    "RebalanceBlocked",
                    f"not evicted, a PodDisruptionBudget does not allow it now: {detail}",
                    kind="Warning",
                )
            elif result is Eviction.FAILED:
                logger.warning("pod/%s: eviction failed: %s", pod.key, detail)
        if evicted:
            self.tracker.hold(plan.node, now)
        unmoved = set(marked or {}) - set(self.moved) - set(previous)
        if marked is not None and unmoved:
            # a mark for an eviction that did not happen would refuse that workload for nothing
            kept = {k: v for k, v in marked.items() if k not in unmoved}
            await self._write_marks(plan.node, encode_departures(kept) if kept else None)

    def _remember(
        self, now: datetime, pod: str, plan: NodePlan, target: str, result: str, detail: str = ""
    ) -> None:
        self.status.evictions.append(
            EvictionRecord(stamp(now), pod, plan.node, target, plan.metric, result, detail)
        )

    # -- marks --------------------------------------------------------------------------------

    async def _mark(
        self, node: str, add: Mapping[str, datetime], now: datetime
    ) -> dict[str, datetime] | None:
        """Write ``add`` into the node's marks (those expired dropped); the marks written, or
        ``None`` when the write failed."""
        current = _marks_of(self._node_facts().get(node))
        marks = {k: v for k, v in current.items() if v > now}
        marks.update(add)
        if not await self._write_marks(node, encode_departures(marks)):
            return None
        return marks

    async def _mark_seen(self, node: str, marked: Mapping[str, datetime]) -> bool:
        """Whether this replica's node watch shows ``marked`` within :data:`MARK_SEEN_SECONDS`:
        the extender learns of the mark through a watch of its own, and a replacement it
        scheduled before would be placed as if there were none."""
        deadline = self._monotonic() + MARK_SEEN_SECONDS
        while True:
            shown = _marks_of(self._node_facts().get(node))
            if all(k in shown and shown[k] >= v for k, v in marked.items()):
                return True
            if self._monotonic() >= deadline:
                return False
            await self._sleep(0.05)

    async def _write_marks(self, node: str, value: str | None) -> bool:
        body = {"metadata": {"annotations": {REBALANCED_FROM_ANNOTATION: value}}}
        try:
            await patching.patch(
                self._kube,
                NODES,
                node,
                body,
                what=f"node/{node}: mark rebalanced workloads",
                retry=self._retry,
                idempotent=True,
                conflicts=True,
            )
        except APINotFoundError:
            return False
        except LoadschedError as e:
            logger.warning("node/%s: rebalance mark not written; nothing moved: %s", node, e)
            return False
        return True

    async def _clear_marks(
        self, facts: Mapping[str, NodeFacts], observations: Mapping[str, Observation], now: datetime
    ) -> None:
        """Drop marks that expired; all of a node's once it is under every ``low``."""
        if self.dry_run:
            return
        for name, node in facts.items():
            raw = node.annotations.get(REBALANCED_FROM_ANNOTATION)
            if raw is None:
                continue
            marks = decode_departures(raw)
            observation = observations.get(name)
            if observation is not None and observation.under_low:
                kept: dict[str, datetime] = {}
            else:
                kept = {k: v for k, v in marks.items() if v > now}
            if kept == marks and raw == encode_departures(marks):
                continue
            await self._write_marks(name, encode_departures(kept) if kept else None)

    # -- reading ------------------------------------------------------------------------------

    async def _pods_on(self, node: str) -> list[FullPod] | None:
        path = PODS.path() + "?fieldSelector=" + quote(f"spec.nodeName={node}", safe="")
        try:
            response = await request(
                self._kube, "GET", path, what=f"pods on node/{node}", retry=self._retry
            )
            items = POD_LIST.decode(response.content).items or []
        except (LoadschedError, msgspec.DecodeError) as e:
            logger.warning("node/%s: pods not read; not rebalanced this round: %s", node, e)
            return None
        return [p for p in items if p.status.phase not in ("Succeeded", "Failed")]

    async def _measured(self) -> dict[str, dict[tuple[str, str], float]]:
        """Per resource, (namespace, pod) → usage; a failed query is none (estimates apply)."""
        usage: dict[str, dict[tuple[str, str], float]] = {}
        for resource, promql in (
            ("cpu", self._settings.usage.cpu),
            ("memory", self._settings.usage.memory),
        ):
            try:
                usage[resource] = await self._usage(promql)
            except LoadschedError as e:
                self._metrics.rebalance_usage_errors.labels(resource).inc()
                logger.warning("per-pod %s usage not read; requests count instead: %s", resource, e)
                usage[resource] = {}
        return usage

    def _targets(
        self,
        facts: Mapping[str, NodeFacts],
        observations: Mapping[str, Observation],
        now: datetime,
    ) -> list[TargetNode]:
        rules = self._rules
        targets = []
        for name, node in facts.items():
            observation = observations.get(name)
            if observation is None or observation.state in ("over", "stale", "held"):
                continue
            bound = self._bound_pods(name)
            placements = [b.placement for b in bound] if rules.reads_pods else []
            load = NodeLoad.from_annotations(name, node.annotations, rules, node.size)
            verdict = evaluate(load, rules, now, placements)
            values = {m.metric: m.value for m in observation.metrics if m.value is not None}
            targets.append(
                TargetNode(
                    name=name,
                    verdict=verdict,
                    fit=node.fit,
                    bound=tuple(bound),
                    size=node.size,
                    values=values,
                    marks=_marks_of(node),
                    score=verdict.score,
                )
            )
        return targets

    # -- publishing ---------------------------------------------------------------------------

    async def _publish(self) -> None:
        """The status as a ConfigMap (when it changed), for the extender and the plugin."""
        text = json.dumps(self.status.as_json(), indent=1, sort_keys=True)
        body = encode(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": self._status_name,
                    "namespace": self._status_namespace,
                    "labels": {"app.kubernetes.io/managed-by": "loadsched"},
                },
                "data": {REBALANCE_STATUS_KEY: text},
            }
        )
        if body == self._published:
            return
        path = CONFIGMAPS.path(self._status_name, namespace=self._status_namespace)
        try:
            await request(
                self._kube,
                "PATCH",
                path + "?fieldManager=loadsched-rebalancer&force=true",
                what=f"configmap/{self._status_namespace}/{self._status_name}: apply",
                retry=self._retry,
                idempotent=True,
                conflicts=True,
                content=body,
                headers={"Content-Type": "application/apply-patch+yaml"},
            )
        except LoadschedError as e:
            logger.warning("rebalance status not published: %s", e)
            return
        self._published = body


@dataclass
class _Allowance:
    """What a round may still evict: in all, and per namespace so far."""

    round: int
    per_namespace: dict[str, int] = field(default_factory=dict)


def _marks_of(node: NodeFacts | None) -> dict[str, datetime]:
    return decode_departures(node.annotations.get(REBALANCED_FROM_ANNOTATION) if node else None)


def _excess(observation: Observation) -> float:
    acting = observation.acting
    if acting is None or acting.value is None:
        return 0.0
    return (acting.value - acting.high) / acting.high
