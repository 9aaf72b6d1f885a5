"""Elastic quotas in the extender: admission at ``filter`` and victim choice at ``preempt``,
both answered from the watch-fed :class:`shared.quota_ledger.QuotaLedger`.

Where a rejection goes decides what kube-scheduler does next: it tries preemption only on
nodes in ``FailedNodes``. A quota rejection goes there when a legal preemption could cure it
(lower-priority pods of the same namespace, or a namespace within its ``min`` while others
borrow), and to ``FailedAndUnresolvableNodes`` otherwise.

At ``preempt``, kube-scheduler accepts any pod on a candidate node as a victim (it resolves
the UIDs against the node's pods), so the default victims are replaced by legal ones:

- the preemptor's namespace stays within its ``min`` (reclaiming): only pods of namespaces
  that have a quota and stay at or above their own ``min``, lowest priority then newest first;
- otherwise: only lower-priority pods of the preemptor's own namespace, and enough of them
  that the quota admits the preemptor afterwards.

A node without a legal set is dropped. kube-scheduler (v1.34) only proposes nodes where it
found at least one lower-priority pod to remove, and rejects an answer that lists a node with
no victims, so such a node is never returned.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from extender.metrics import ExtenderMetrics
from extender.wire import MetaPod, MetaVictims, PodInfo
from shared.quantity import ResourceList, add, subtract
from shared.quota import Admission, Totals, admit, reclaiming
from shared.quota_ledger import PodUsage, QuotaLedger
from shared.reclaim import (
    deficit,
    free_on_node,
    keeps_min,
    newest_first_by_priority,
    select_victims,
)

logger = logging.getLogger(__name__)


class InvalidPod(Exception):
    """The pod in a request has a malformed field (named in the message)."""


class QuotaGate:
    def __init__(
        self,
        ledger: QuotaLedger,
        *,
        allocatable: Callable[[str], Mapping[str, str] | None],
        metrics: ExtenderMetrics,
    ) -> None:
        self.ledger = ledger
        self._allocatable = allocatable
        self._metrics = metrics

    def governs(self, pod: PodInfo) -> bool:
        return pod.metadata.namespace in self.ledger.quotas

    @staticmethod
    def request_of(pod: PodInfo) -> ResourceList:
        try:
            return pod.request()
        except ValueError as e:
            raise InvalidPod(f"$.Pod.{e}") from e

    def check(self, pod: PodInfo, request: ResourceList) -> Admission:
        """The admission ``pod`` would get now, with no side effect (no count, no log): what
        the requeue tracker asks of pods refused earlier."""
        return self.ledger.admit(pod, request)

    def admit(self, pod: PodInfo, request: ResourceList) -> Admission:
        decision = self.ledger.admit(pod, request)
        if not decision.admitted:
            outcome = "preemptible" if decision.preemption_may_help else "unresolvable"
            self._metrics.quota_rejections.labels(outcome).inc()
            logger.info("pod/%s: %s", pod.key, decision.message)
        return decision

    def assume(self, pod: PodInfo, request: ResourceList) -> None:
        self.ledger.assume(pod, request)

    # -- preempt ----------------------------------------------------------------------------

    def preempt(
        self, pod: PodInfo, proposed: Mapping[str, tuple[list[str], int]]
    ) -> dict[str, MetaVictims] | None:
        """Legal victims per candidate node; ``None`` when quotas have no say (no quota)."""
        namespace = pod.metadata.namespace
        ledger = self.ledger
        if namespace not in ledger.quotas:
            return None
        request = self.request_of(pod)
        own = ledger.pods.get(pod.metadata.uid)
        used: dict[str, ResourceList] = dict(ledger.used)
        pool_used = ledger.pool_used
        if own is not None:
            used[namespace] = subtract(used.get(namespace, {}), own.request)
            pool_used = subtract(pool_used, own.request)
        quotas = ledger.quotas
        if reclaiming(namespace, request, quotas, used):
            legal = keeps_min(quotas, used)
            enough = None

            def eligible(u: PodUsage) -> bool:
                return u.namespace != namespace and u.namespace in quotas
        else:

            def legal(_: Sequence[PodUsage]) -> bool:
                return True

            def enough(victims: Sequence[PodUsage]) -> bool:
                freed = add(*(v.request for v in victims))
                after = {namespace: subtract(used.get(namespace, {}), freed)}
                totals = Totals(min=ledger.pool_min, used=subtract(pool_used, freed))
                return admit(namespace, request, quotas, after, totals=totals).admitted

            def eligible(u: PodUsage) -> bool:
                return u.namespace == namespace and u.priority < pod.priority

        answer: dict[str, MetaVictims] = {}
        for node, (default, violations) in proposed.items():
            victims = self._victims(pod, node, request, eligible, legal, enough)
            if not victims:
                self._metrics.quota_preemptions.labels("dropped").inc()
                logger.info(
                    "pod/%s: no legal victims on node/%s under elastic quota", pod.key, node
                )
                continue
            uids = [v.uid for v in victims]
            same = set(uids) == set(default)
            self._metrics.quota_preemptions.labels("kept" if same else "replaced").inc()
            answer[node] = MetaVictims(
                Pods=[MetaPod(UID=uid) for uid in uids],
                # PodDisruptionBudgets are not watched here: a replaced set reports at most
                # the scheduler's own count for the node.
                NumPDBViolations=violations if same else min(violations, len(uids)),
            )
        return answer

    def _victims(
        self,
        pod: PodInfo,
        node: str,
        request: ResourceList,
        eligible: Callable[[PodUsage], bool],
        legal: Callable[[Sequence[PodUsage]], bool],
        enough: Callable[[Sequence[PodUsage]], bool] | None,
    ) -> list[PodUsage] | None:
        allocatable = self._allocatable(node)
        if not allocatable:
            return None
        on_node = [
            u for u in self.ledger.by_node.get(node, {}).values() if u.uid != pod.metadata.uid
        ]
        try:
            need = deficit(request, free_on_node(allocatable, on_node))
        except ValueError as e:
            logger.warning("node/%s: %s", node, e)
            return None
        candidates = newest_first_by_priority(
            u for u in on_node if not u.terminating and eligible(u)
        )
        return select_victims(need, candidates, legal=legal, enough=enough)
