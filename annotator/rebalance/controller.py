"""The rebalancer (leader only): moves pods off nodes that stay above a usage threshold, with
the decisions of :mod:`shared.rebalance`, through the Eviction API.

A round, every ``spec.rebalance.period``:

1. Every node is observed (:class:`shared.overload_streaks.OverloadTracker`): its streak of fresh
   rounds above ``high``. Marks (``loadsched.io/rebalanced-from``) that expired, or on a node
   now under every ``low``, are removed (:mod:`.marking`).
2. For each node whose streak is complete, furthest over first: its pods are read from the API
   server (not the watch: the opt-out annotation and the newest state count; :mod:`.reading`),
   those that may move are measured (the per-pod usage queries; a pod without a sample counts
   at its request × the estimation factor; :mod:`.candidates`), and the fewest that cover the
   overshoot are given targets (:mod:`.nodes`) that loadsched's own filter passes and that stay
   under every ``high`` with the pod added.
3. Unless dry-run: the source node is marked first (the extender then refuses each moved
   workload's replacement there), then the pods are evicted within the limits: ``perNode``,
   ``perNamespace`` and ``perRound`` a round, ``perMinute`` overall, one pod per workload per
   ``cooldown`` (:mod:`.moving`). A PodDisruptionBudget's 429 is counted and skipped. The node
   is then held until its metric can show the pods gone.

Every eviction is an Event on the pod and on the node (the metric, its value, the threshold,
the pod's usage and the expected target); the last plan and evictions are published in a
ConfigMap (:mod:`.publishing`) that the extender's ``/v1/status?part=rebalance`` and
``kubectl loadsched rebalance`` read.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime

import httpx

from annotator.metrics import AnnotatorMetrics
from annotator.rebalance.candidates import CandidateRules, PodUsage, judge
from annotator.rebalance.full_pod import FullPod
from annotator.rebalance.marking import NodeMarks
from annotator.rebalance.moving import Mover
from annotator.rebalance.nodes import NodeFacts, marks_of, targets_of
from annotator.rebalance.pods import BoundPod
from annotator.rebalance.publishing import StatusPublisher
from annotator.rebalance.reading import UsageQuery, measured, pods_on
from annotator.rebalance.status import RebalanceStatus, observed_json, plan_json, stamp
from annotator.recording import EventRecorder
from shared.errors import LoadschedError
from shared.estimation import Need
from shared.kube.requesting import DEFAULT_RETRY
from shared.kube.retrying import RetryPolicy
from shared.movable_pods import SkipReason
from shared.overload_streaks import (
    Observation,
    OverloadTracker,
    Threshold,
    furthest_over_first,
    thresholds_of,
)
from shared.pods import Pod
from shared.policy import DynamicSchedulerPolicy
from shared.quantity import ResourceList
from shared.quota import Admission
from shared.rebalance import Candidate, NodePlan, TargetNode, plan_node
from shared.rebalance_limits import RoundAllowance
from shared.rules import LoadRules

logger = logging.getLogger(__name__)

NODE_STATES = ("over", "waiting", "held", "stale", "under")


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
        self._settings = policy.spec.rebalance
        self._zone = policy.zone
        self._rules = rules
        self._choice = CandidateRules(
            self._settings, rules, policy.spec.estimation, quota_admits=quota_admits
        )
        self.thresholds = thresholds_of(policy)
        self.tracker = OverloadTracker(self.thresholds, self._settings.consecutive_rounds)
        self._node_facts = node_facts
        self._bound_pods = bound_pods
        self._usage = usage
        self._metrics = metrics
        self._dry_run = dry_run or self._settings.dry_run
        self._clock = clock
        self._sleep = sleep
        self._retry = retry
        self.moved: dict[str, datetime] = {}
        """Workload → until when none of its pods is moved again."""
        self.status = RebalanceStatus(dry_run=self._dry_run)
        self._publisher = StatusPublisher(
            kube=kube, namespace=status_namespace, name=status_name, retry=retry
        )
        self._marks = NodeMarks(
            kube=kube, node_facts=node_facts, monotonic=monotonic, sleep=sleep, retry=retry
        )
        self._mover = Mover(
            kube=kube,
            settings=self._settings,
            marks=self._marks,
            tracker=self.tracker,
            recorder=recorder,
            metrics=metrics,
            status=self.status,
            dry_run=self._dry_run,
            monotonic=monotonic,
            retry=retry,
        )

    @property
    def dry_run(self) -> bool:
        """Whether it only shows its plans (the policy's ``dryRun`` or ``--dry-run``): fixed
        when it starts, as the evictions it makes follow it."""
        return self._dry_run

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
            await self._sleep(period)

    async def round(self) -> list[NodePlan]:
        self._metrics.rebalance_rounds.inc()
        now = self._clock()
        facts = self._node_facts()
        observations = self._observe(facts, now)
        states = self._count(observations)
        self._keep_cooldowns(facts, now)
        if not self._dry_run:
            await self._marks.clear(facts, observations, now)
        acting = furthest_over_first(observations.values())
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
        await self._publisher.publish(self.status)
        return plans

    def _observe(self, facts: Mapping[str, NodeFacts], now: datetime) -> dict[str, Observation]:
        """Every node's observation this round (nodes gone forgotten)."""
        self.tracker.forget(facts)
        return {
            name: self.tracker.observe(name, node.annotations, self._zone, now)
            for name, node in facts.items()
        }

    def _count(self, observations: Mapping[str, Observation]) -> dict[str, int]:
        """Nodes per state, exported."""
        states: dict[str, int] = dict.fromkeys(NODE_STATES, 0)
        for observation in observations.values():
            states[observation.state] += 1
        for state, count in states.items():
            self._metrics.rebalance_nodes.labels(state).set(count)
            self._metrics.rebalance_node_rounds.labels(state).inc(count)
        return states

    def _keep_cooldowns(self, facts: Mapping[str, NodeFacts], now: datetime) -> None:
        """Drop the cooldowns that ended; take those the nodes' marks name (a new leader keeps
        the last one's)."""
        self.moved = {k: v for k, v in self.moved.items() if v > now}
        for node in facts.values():
            for workload, until in marks_of(node).items():
                if until > now and until > self.moved.get(workload, now):
                    self.moved[workload] = until

    # -- acting -------------------------------------------------------------------------------

    async def _act(
        self,
        acting: list[Observation],
        facts: Mapping[str, NodeFacts],
        observations: Mapping[str, Observation],
        now: datetime,
    ) -> list[NodePlan]:
        usage = await measured(self._usage, self._settings.usage, self._metrics)
        targets = targets_of(facts, observations, self._bound_pods, self._rules, now)
        planned: dict[str, Need] = {}
        plans: list[NodePlan] = []
        allowance = RoundAllowance(self._settings.limits.per_round)
        for observation in acting:
            plan = await self._plan(observation, facts, usage, targets, planned, now)
            if plan is None:
                continue
            plans.append(plan)
            if self._movable(plan):
                await self._mover.carry_out(plan, observation, allowance, self.moved, now)
        return plans

    async def _plan(
        self,
        observation: Observation,
        facts: Mapping[str, NodeFacts],
        usage: PodUsage,
        targets: Sequence[TargetNode],
        planned: dict[str, Need],
        now: datetime,
    ) -> NodePlan | None:
        """The node's plan (``planned`` updated), or ``None``: nothing acts or no pods read."""
        acting_metric = observation.acting
        if acting_metric is None:
            return None
        threshold = next(t for t in self.thresholds if t.metric == acting_metric.metric)
        pods = await pods_on(self._kube, observation.node, self._retry)
        if pods is None:
            return None
        candidates = self._candidates(pods, threshold, usage, now)
        size = facts[observation.node].size
        return plan_node(
            observation, threshold, size, candidates, targets, self.thresholds, now, planned
        )

    def _movable(self, plan: NodePlan) -> bool:
        """Whether ``plan`` has moves; the pods no node takes, counted and logged."""
        if plan.unplaced:
            self._metrics.rebalance_skipped.labels("no-target").inc(len(plan.unplaced))
            logger.info(
                "node/%s: %s %.3f above %g; %s: %s",
                plan.node,
                plan.metric,
                plan.value,
                plan.high,
                f"{len(plan.moves)} other pod(s) move instead" if plan.moves else "not moved",
                "; ".join(f"{pod}: {why}" for pod, why in plan.unplaced),
            )
        elif not plan.moves:
            self._metrics.rebalance_skipped.labels("no-candidate").inc()
        return bool(plan.moves)

    def _candidates(
        self, pods: Sequence[FullPod], threshold: Threshold, usage: PodUsage, now: datetime
    ) -> list[Candidate]:
        """The pods that may move; those that may not, counted by why."""
        candidates: list[Candidate] = []
        for pod in pods:
            judged = judge(pod, threshold, usage, self.moved, now, self._choice)
            if isinstance(judged, Candidate):
                candidates.append(judged)
            else:
                self._skipped(pod, judged)
        return candidates

    def _skipped(self, pod: FullPod, reason: SkipReason) -> None:
        self._metrics.rebalance_skipped.labels(reason).inc()
        if reason == "unjudged-constraint":
            logger.debug(
                "pod/%s/%s not moved: it asks for %s, which the target check does not "
                'judge (annotate it loadsched.io/evict: "true" to move it anyway)',
                pod.metadata.namespace,
                pod.metadata.name,
                pod.spec.unjudged,
            )
