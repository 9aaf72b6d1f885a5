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

The pod watch lags kube-scheduler's own cache a little (more on a busy control plane), so a
victim named in one answer can still be in the ledger when the next preemption comes after
kube-scheduler has deleted it; naming it again fails that preemption outright ("the pod is
not found on that node") and leaves the pod waiting for an unrelated event. A victim named
in the last :data:`OFFERED_FOR` seconds is therefore treated as going: never named for
another pod (an answer names one node, so kube-scheduler deletes every victim it names, even
where its cache, behind, proposes them again), kept as taking room on its node (its room is
the earlier preemptor's), and not counted in its namespace's use, so a lender is not pushed
below its ``min`` on the strength of a pod that is already leaving. The pod it was named for
gets it again while kube-scheduler still proposes it, and no other (:meth:`_last_answer`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

import httpx

from extender.scheduling.metrics import ExtenderMetrics
from extender.scheduling.wire import MetaPod, MetaVictims, PodInfo
from shared.errors import (
    APIError,
    APIForbiddenError,
    APINotFoundError,
    APIUnreachableError,
    LoadschedError,
)
from shared.kube.requesting import DEFAULT_RETRY
from shared.kube.retrying import RetryPolicy
from shared.quantity import ResourceList
from shared.quota import Admission
from shared.quota_ledger import ASSUMED, PodUsage, QuotaLedger
from shared.reclaim import Preemptor, Rules, victims_on_node
from shared.reserving import write_reservation

logger = logging.getLogger(__name__)


class InvalidPod(LoadschedError):
    """The pod in a request has a malformed field (named in the message)."""


RECORD_ATTEMPTS = 8
"""Writes of one admission raced by other replicas before the pod is refused for now."""

OFFERED_FOR = 30.0
"""Seconds a victim named at ``preempt`` is treated as going: long past the watch's lag, and
the default grace period of the pods kube-scheduler deletes."""


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
        self._offered: dict[str, float] = {}
        """Victims named at ``preempt`` (UID → when), until :data:`OFFERED_FOR` passes or
        the watch shows them gone."""
        self._answered: dict[str, tuple[float, str, MetaVictims]] = {}
        """Preemptor UID → when, and the node and victims of its last answer."""
        self._client: httpx.AsyncClient | None = None
        self._retry = DEFAULT_RETRY
        self._unrecorded: set[str] = set()

    def attach(self, client: httpx.AsyncClient, retry: RetryPolicy) -> None:
        """Record admissions on the ElasticQuota objects through ``client`` (replicas share
        them); without it each process counts only its own."""
        self._client = client
        self._retry = retry

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

    async def record(self, pod: PodInfo, request: ResourceList) -> Admission:
        """Write the admission of ``pod`` (assumed here) on its ElasticQuota, deciding again
        on the object's current reservations: the patch carries the resourceVersion the
        decision was made on, so of two replicas admitting at once one gets a 409, reads the
        object again (with the other's reservation) and decides again. A refusal drops the
        assumption. No client, or no right to write (403) or no object (404): the decision
        made here stands, as with one replica."""
        client, ledger, uid = self._client, self.ledger, pod.metadata.uid
        if client is None or not ledger.shared_admission:
            return Admission(True)
        for _ in range(RECORD_ATTEMPTS):
            decision = ledger.admit(pod, request)
            target = ledger.reservation_patch(pod, request) if decision.admitted else None
            if target is None:
                if not decision.admitted:
                    ledger.forget(uid)
                    self._metrics.quota_rejections.labels("unresolvable").inc()
                    logger.info("pod/%s: %s", pod.key, decision.message)
                return decision
            try:
                if not await write_reservation(
                    client, ledger, target, what=f"admit pod/{pod.key}", retry=self._retry
                ):
                    continue
            except (APIForbiddenError, APINotFoundError) as e:
                if target.namespace not in self._unrecorded:
                    self._unrecorded.add(target.namespace)
                    logger.warning(
                        "elasticquota/%s/%s: admissions not shared with other replicas: %s",
                        target.namespace,
                        target.name,
                        e,
                    )
                return decision
            except (APIError, APIUnreachableError) as e:
                ledger.forget(uid)
                return Admission(False, f"elastic quota: admission not recorded: {e}")
            return decision
        ledger.forget(uid)
        return Admission(False, "elastic quota: admission raced by other replicas; retrying")

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
        last = self._last_answer(uid)
        mine: set[str] = set()
        if last is not None:
            node, offered = last
            mine = {m.UID for m in offered.Pods}
            # kube-scheduler still proposes them: its cache is behind its own deletions
            still = [m for m in offered.Pods if m.UID in set(proposed.get(node, ((), 0))[0])]
            if still:
                self._metrics.quota_preemptions.labels("repeated").inc()
                logger.info(
                    "pod/%s: preempt again on node/%s: %s, still going, and no others",
                    pod.key,
                    node,
                    [ledger.pods[m.UID].key if m.UID in ledger.pods else m.UID for m in still],
                )
                violations = min(offered.NumPDBViolations, len(still))
                return {node: MetaVictims(Pods=still, NumPDBViolations=violations)}
        going = self._going()
        state = ledger.state(without=uid, priority=pod.priority)
        for victim in going:
            state = state.without(victim.namespace, victim.request)
        rules = Rules.of(preemptor, state)
        promised = list(ledger.by_node.get(ASSUMED, {}).values())
        # the pod's own victims free their room for it; the others' take theirs
        spared = {victim.uid for victim in going if victim.uid not in mine}
        options: dict[str, tuple[list[PodUsage], MetaVictims]] = {}
        for node, (default, violations) in proposed.items():
            victims = self._victims(rules, node, default, promised, spared, mine)
            if victims == []:
                logger.info(
                    "pod/%s: preempt: it fits on node/%s by this count (the scheduler may not "
                    "have seen its last victims go yet): no victims",
                    pod.key,
                    node,
                )
                return {}
            if not victims:
                self._metrics.quota_preemptions.labels("dropped").inc()
                logger.info(
                    "pod/%s: no legal victims on node/%s under elastic quota", pod.key, node
                )
                continue
            uids = [v.uid for v in victims]
            same = set(uids) == set(default)
            self._metrics.quota_preemptions.labels("kept" if same else "replaced").inc()
            options[node] = (
                victims,
                MetaVictims(
                    Pods=[MetaPod(UID=victim) for victim in uids],
                    # PodDisruptionBudgets are not watched here: a replaced set reports at most
                    # the scheduler's own count for the node.
                    NumPDBViolations=violations if same else min(violations, len(uids)),
                ),
            )
        if not options:
            return {}
        node = min(options, key=lambda n: _cost(n, *options[n]))
        victims, chosen = options[node]
        logger.info(
            "pod/%s: preempt on node/%s: %s (of %d candidate nodes; the scheduler proposed %s)",
            pod.key,
            node,
            _names(victims),
            len(proposed),
            _names(u for u in (ledger.pods.get(d) for d in proposed[node][0]) if u),
        )
        now = time.monotonic()
        self._offered.update((m.UID, now) for m in chosen.Pods)
        self._answered[uid] = (now, node, chosen)
        return {node: chosen}

    def _last_answer(self, preemptor: str) -> tuple[str, MetaVictims] | None:
        """The node and victims of ``preemptor``'s answer of the last :data:`OFFERED_FOR`
        seconds, if any.

        kube-scheduler (asynchronous preemption) lets a preemptor try again as soon as its
        victims' deletions are sent, and while its cache still holds them it preempts again;
        new victims then would be evicted for nothing. So an answer names one node (the one
        kube-scheduler would pick among them: :func:`_cost`); a pod that preempts again while
        kube-scheduler still proposes the victims named for it gets them again, no others;
        and after that its own victims count as gone for it: where it then fits by this
        count, kube-scheduler's victims do not stand (its view is behind)."""
        now = time.monotonic()
        self._answered = {
            uid: entry for uid, entry in self._answered.items() if now - entry[0] < OFFERED_FOR
        }
        entry = self._answered.get(preemptor)
        return None if entry is None else entry[1:]

    def _going(self) -> list[PodUsage]:
        """Victims named lately that the ledger still has; forgets the rest. An answer names
        one node, so kube-scheduler deletes every victim it names: their room is the pod's
        they were named for, even where kube-scheduler, its cache behind, proposes them
        again for another."""
        pods, now = self.ledger.pods, time.monotonic()
        self._offered = {
            victim: at
            for victim, at in self._offered.items()
            if now - at < OFFERED_FOR and victim in pods
        }
        return [pods[victim] for victim in self._offered]

    def _victims(
        self,
        rules: Rules,
        node: str,
        default: Sequence[str],
        promised: Sequence[PodUsage],
        spared: set[str],
        mine: set[str],
    ) -> list[PodUsage] | None:
        """Victims on ``node``; ``mine``: those named for this pod a moment ago, gone for it
        (then kube-scheduler's own victims do not stand where it fits: its view is behind)."""
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
                [u for u in self.ledger.by_node.get(node, {}).values() if u.uid not in mine],
                promised=promised,
                proposed=scheduler_victims,
                spared=spared,
                again=bool(mine),
            )
        except ValueError as e:
            logger.warning("node/%s: %s", node, e)
            return None


def _names(pods: Iterable[PodUsage]) -> list[str]:
    return [u.key for u in pods]


def _cost(
    node: str, victims: Sequence[PodUsage], meta: MetaVictims
) -> tuple[int, int, int, int, str]:
    """kube-scheduler's order among candidate nodes (``pickOneNodeForPreemption``): fewest
    PodDisruptionBudget violations, lowest highest victim priority, fewest victims, lowest
    sum of priorities; then the name, so that the answer is the same every time."""
    priorities = [v.priority for v in victims]
    return (meta.NumPDBViolations, max(priorities), len(priorities), sum(priorities), node)
