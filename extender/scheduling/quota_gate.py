"""Elastic quotas in the extender: admission at ``filter`` and victim choice at ``preempt``,
both answered from the watch-fed :class:`shared.quota_ledger.QuotaLedger`.

Where a rejection goes decides what kube-scheduler does next: it tries preemption only on
nodes in ``FailedNodes``. A quota rejection goes there when a legal preemption could cure it
(lower-priority pods of the same namespace, or a namespace within its ``min`` while others
borrow), and to ``FailedAndUnresolvableNodes`` otherwise.

At ``preempt``, kube-scheduler accepts any pod on a candidate node as a victim (it resolves
the UIDs against the node's pods), so its victims are replaced by legal ones, chosen by
:mod:`shared.reclaim` exactly as the annotator's reclaim controller chooses them:

- the preemptor's namespace stays within its ``min`` (a lender): pods of borrowers (other
  namespaces over their ``min`` in any resource), whatever their priority, enough for the pod
  to fit and for the sum of use to stay within the sum of ``min``, never pushing a namespace
  below its ``min`` in a resource the preemptor needs;
- otherwise: only lower-priority pods of the preemptor's own namespace, and enough of them
  that the quota admits the preemptor afterwards.

The node's room counts pods admitted at filter but not yet seen bound (their node unknown
here; kube-scheduler's own victims bound how much of it can be on this node), so a node is not
dropped for room that is already promised. A node without a legal set is dropped.
kube-scheduler (v1.34) only proposes nodes where it found at least one lower-priority pod to
remove, and rejects an answer that lists a node with no victims, so such a node is never
returned.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from extender.scheduling.metrics import ExtenderMetrics
from extender.scheduling.wire import MetaPod, MetaVictims, PodInfo
from shared.errors import LoadschedError
from shared.quantity import ResourceList
from shared.quota import Admission
from shared.quota_ledger import ASSUMED, PodUsage, QuotaLedger
from shared.reclaim import Preemptor, Rules, victims_on_node

logger = logging.getLogger(__name__)


class InvalidPod(LoadschedError):
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
        namespace, uid = pod.metadata.namespace, pod.metadata.uid
        ledger = self.ledger
        if namespace not in ledger.quotas:
            return None
        preemptor = Preemptor(uid, namespace, pod.priority, self.request_of(pod))
        rules = Rules.of(preemptor, ledger.state(without=uid))
        promised = list(ledger.by_node.get(ASSUMED, {}).values())
        answer: dict[str, MetaVictims] = {}
        for node, (default, violations) in proposed.items():
            victims = self._victims(rules, node, default, promised)
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
                Pods=[MetaPod(UID=victim) for victim in uids],
                # PodDisruptionBudgets are not watched here: a replaced set reports at most
                # the scheduler's own count for the node.
                NumPDBViolations=violations if same else min(violations, len(uids)),
            )
        return answer

    def _victims(
        self, rules: Rules, node: str, default: Sequence[str], promised: Sequence[PodUsage]
    ) -> list[PodUsage] | None:
        allocatable = self._allocatable(node)
        if not allocatable:
            return None
        known = [self.ledger.pods.get(uid) for uid in default]
        scheduler_victims = None if None in known else [u for u in known if u is not None]
        try:
            return victims_on_node(
                rules,
                node,
                allocatable,
                self.ledger.by_node.get(node, {}).values(),
                promised=promised,
                proposed=scheduler_victims,
            )
        except ValueError as e:
            logger.warning("node/%s: %s", node, e)
            return None
