"""What each namespace uses against its elastic quota, kept incrementally from two watches
(pods and ElasticQuotas), so a decision costs the same with 20,000 pods cached as with 20.

A pod counts while it is not terminal and is bound or nominated to a node. Pods the extender
has just admitted are *assumed* (counted, on the placeholder node :data:`ASSUMED`: filter
does not learn the node kube-scheduler picks) until the watch shows them bound, or for
``assume_seconds``: kube-scheduler binds asynchronously, and without this a burst of pods
would each be judged against usage that does not yet include the ones before it.
Pure: no I/O; the watches feed :attr:`QuotaLedger.pod_store` and :attr:`QuotaLedger.quota_store`.

With ``shared_admission`` (the extender: replicas behind one Service; and the reclaim
controller, which reads what they record), an assumption is also
written on the namespace's ElasticQuota object, in the annotation :data:`ADMITTED_ANNOTATION`
(``{"<uid>": [<until, Unix seconds>, {"cpu": "100m", ...}]}``), by a patch guarded by the
object's resourceVersion (:mod:`extender.scheduling.quota_gate`): every replica's quota watch
brings the others' admissions, and a decision is counted against them. A reservation counts
until its deadline while this ledger does not count the pod itself (not seen bound yet, not
seen gone); it is dropped from the annotation only once past its deadline, never because
one replica has seen the pod bound (another may not have yet).

The reclaim controller records its *promises* there too: room it freed for a waiting pod,
with that pod's priority, until the pod is bound or gone or the deadline passes. A promise
holds against pods of the same or lower priority (the first come is served first) and not
against a higher one, so it survives kube-scheduler clearing the pod's nomination after a
failed attempt.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from shared.kube.paths import ELASTIC_QUOTAS
from shared.pods import Pod
from shared.quantity import ResourceList, add
from shared.quota import Admission, ElasticQuota, QuotaState, Totals
from shared.quota_objects import (
    ADMITTED_ANNOTATION,
    QUOTA_DECODER,
    QuotaObject,
    QuotaStatus,
    Reservation,
    ReservationPatch,
    encode_reservations,
    is_older,
    reservations_of,
)

__all__ = [
    "ADMITTED_ANNOTATION",
    "ASSUMED",
    "ELASTIC_QUOTAS_PATH",
    "QUOTA_DECODER",
    "PodUsage",
    "QuotaLedger",
    "QuotaObject",
    "QuotaStatus",
]

logger = logging.getLogger(__name__)

ZERO = Fraction(0)
ASSUMED = "<assumed>"
"""The node of a pod admitted at filter whose binding the watch has not shown yet."""
ELASTIC_QUOTAS_PATH = ELASTIC_QUOTAS.path()


@dataclass(frozen=True, slots=True)
class PodUsage:
    """A pod that counts against its namespace's quota, and what it holds."""

    uid: str
    namespace: str
    name: str
    node: str
    """``spec.nodeName``, else ``status.nominatedNodeName``."""
    priority: int
    never_preempts: bool
    """``preemptionPolicy: Never`` (copied from its PriorityClass): an online service."""
    created: str
    terminating: bool
    request: ResourceList
    bound: bool = True
    """``spec.nodeName`` is set; else the pod is only nominated or assumed there, holds no
    room on the node yet and cannot be a victim."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def of(
        cls, pod: Pod, *, node: str | None = None, request: ResourceList | None = None
    ) -> PodUsage | None:
        """The usage of ``pod``, or ``None`` if it does not count; ``node`` and ``request``
        when already known (an assumed placement, a request computed by the caller)."""
        placed = node or pod.spec.nodeName or pod.status.nominatedNodeName
        if not placed or pod.is_terminal:
            return None
        meta = pod.metadata
        return cls(
            uid=meta.uid,
            namespace=meta.namespace,
            name=meta.name,
            node=placed,
            priority=pod.priority,
            never_preempts=pod.spec.preemptionPolicy == "Never",
            created=meta.creationTimestamp or "",
            terminating=meta.deletionTimestamp is not None,
            request=pod.request() if request is None else request,
            bound=not node and bool(pod.spec.nodeName),
        )


class QuotaLedger:
    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        assume_seconds: float = 30.0,
        shared_admission: bool = False,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._clock = clock
        self._wall_clock = wall_clock
        self._assume_seconds = assume_seconds
        self.shared_admission = shared_admission
        """Count the reservations other replicas wrote on the ElasticQuota objects."""
        self.reservations: dict[str, dict[str, Reservation]] = {}
        """By namespace: the reservations on the quota in force there."""
        self._gone: dict[str, float] = {}
        """Pods seen deleted or finished (UID → wall-clock time): their reservations no
        longer count."""
        self.quotas: dict[str, ElasticQuota] = {}
        """The quota in force per namespace."""
        self.objects: dict[tuple[str, str], QuotaObject] = {}
        """Every ElasticQuota object by (namespace, name)."""
        self.invalid: dict[tuple[str, str], str] = {}
        """Objects that are ignored, with why."""
        self.used: dict[str, ResourceList] = {}
        self.pool_min: ResourceList = {}
        """Sum of ``min`` over the namespaces with a quota."""
        self.pool_used: ResourceList = {}
        """Sum of use over the namespaces with a quota."""
        self.pods: dict[str, PodUsage] = {}
        self.by_node: dict[str, dict[str, PodUsage]] = {}
        self.by_namespace: dict[str, dict[str, PodUsage]] = {}
        self._assumed: dict[str, float] = {}
        self._read: dict[tuple[str, str], tuple[Any, ElasticQuota | str]] = {}
        """Each object's spec as last read, and the quota made of it (or why none): an object
        whose spec did not change (a reservation written on it) is not read again."""
        self._reserved: dict[tuple[str, str], tuple[str | None, dict[str, Reservation]]] = {}
        """Each object's reservations annotation as last read, and its reservations."""
        self._reserved_from: dict[str, tuple[str, str]] = {}
        """The object each namespace's :attr:`reservations` were read from."""
        self.pod_store = _PodStore(self)
        self.quota_store = _QuotaStore(self)

    # -- accounting -------------------------------------------------------------------------

    def _count(self, usage: PodUsage, sign: int) -> None:
        ns_used = self.used.setdefault(usage.namespace, {})
        quota = self.quotas.get(usage.namespace)
        pool = self.pool_used
        for name, value in usage.request.items():
            delta = value if sign > 0 else -value
            ns_used[name] = ns_used.get(name, ZERO) + delta
            if quota is not None and quota.governs(name):
                pool[name] = pool.get(name, ZERO) + delta
        if sign > 0:
            self.pods[usage.uid] = usage
            self.by_node.setdefault(usage.node, {})[usage.uid] = usage
            self.by_namespace.setdefault(usage.namespace, {})[usage.uid] = usage
            return
        self.pods.pop(usage.uid, None)
        for index, key in ((self.by_node, usage.node), (self.by_namespace, usage.namespace)):
            members = index.get(key)
            if members is not None:
                members.pop(usage.uid, None)
                if not members:
                    del index[key]

    def put(self, usage: PodUsage | None, uid: str) -> None:
        """Record the current state of pod ``uid`` (``None``: it no longer counts)."""
        old = self.pods.get(uid)
        if old is not None:
            if old == usage:
                return
            self._count(old, -1)
            self._assumed.pop(uid, None)
        if usage is not None:
            self._count(usage, +1)

    def assume(self, pod: Pod, request: ResourceList, node: str = ASSUMED) -> None:
        """Count a pod the extender just admitted until the watch reports it (or time out)."""
        uid = pod.metadata.uid
        if not uid or uid in self.pods:
            return
        usage = PodUsage.of(pod, node=node, request=request)
        if usage is None:  # a terminal pod is never placed
            return
        self._count(usage, +1)
        self._assumed[uid] = self._clock() + self._assume_seconds

    def is_assumed(self, uid: str) -> bool:
        return uid in self._assumed

    @property
    def assumed(self) -> int:
        """Pods counted from their admission that the pod watch has not shown bound or gone."""
        return len(self._assumed)

    def expire_assumed(self) -> None:
        """Drop assumptions past their deadline. They share one lifetime, so insertion order
        is deadline order: stop at the first one still valid."""
        if not self._assumed:
            return
        now = self._clock()
        expired = []
        for uid, deadline in self._assumed.items():
            if deadline > now:
                break
            expired.append(uid)
        for uid in expired:
            del self._assumed[uid]
            usage = self.pods.get(uid)
            if usage is not None:
                self._count(usage, -1)

    def namespace_used(self, namespace: str) -> ResourceList:
        return {k: v for k, v in self.used.get(namespace, {}).items() if v}

    # -- decisions --------------------------------------------------------------------------

    def state(self, *, without: str = "", priority: int | None = None) -> QuotaState:
        """Quota use now, as if pod ``without`` (a UID) were not counted: the pod a decision
        is about is never counted against itself (it may be nominated, or assumed).
        ``priority``: that pod's, which promises of a lower priority do not hold against."""
        self.expire_assumed()
        used, pool_used = self.used, self.pool_used
        reserved = self.reserved(without=without, priority=priority) if self.reservations else {}
        if reserved:
            used = dict(used)
            pool: ResourceList = dict(pool_used)
            for namespace, request in reserved.items():
                used[namespace] = add(used.get(namespace, {}), request)
                pool = add(pool, self.quotas[namespace].governed(request))
            pool_used = pool
        state = QuotaState(self.quotas, used, Totals(min=self.pool_min, used=pool_used))
        own = self.pods.get(without) if without else None
        return state if own is None else state.without(own.namespace, own.request)

    def reserved(
        self, *, without: str = "", priority: int | None = None
    ) -> dict[str, ResourceList]:
        """Per namespace, what live reservations (other replicas' admissions, the reclaim
        controller's promises of at least ``priority``) hold that this ledger does not count
        itself (pods it has not seen placed, nor gone)."""
        now = self._wall_clock()
        found: dict[str, ResourceList] = {}
        for namespace, entries in self.reservations.items():
            if namespace not in self.quotas:
                continue
            held = [
                r.request
                for uid, r in entries.items()
                if r.until > now
                and uid != without
                and uid not in self.pods
                and uid not in self._gone
                and r.holds_against(priority)
            ]
            if held:
                found[namespace] = add(*held)
        return found

    def reservation_patch(
        self,
        pod: Pod,
        request: ResourceList,
        *,
        seconds: float | None = None,
        promise: bool = False,
    ) -> ReservationPatch | None:
        """The patch recording ``pod``'s admission (or, with ``promise``, the room reclaimed
        for it, at its priority) on its namespace's ElasticQuota for ``seconds`` (default:
        ``assume_seconds``), with the reservations still live; ``None`` without a quota
        object."""
        namespace = pod.metadata.namespace
        quota = self.quotas.get(namespace)
        if quota is None:
            return None
        key = next((k for k in sorted(self.objects) if k[0] == namespace), None)
        if key is None:
            return None
        obj = self.objects[key]
        now = self._wall_clock()
        live = {uid: r for uid, r in reservations_of(obj).items() if r.until > now}
        until = now + (self._assume_seconds if seconds is None else seconds)
        priority = pod.priority if promise else None
        live[pod.metadata.uid] = Reservation(until, quota.governed(request), priority)
        body = {
            "metadata": {
                "resourceVersion": obj.metadata.resourceVersion,
                "annotations": {ADMITTED_ANNOTATION: encode_reservations(live)},
            }
        }
        return ReservationPatch(namespace, key[1], body)

    def forget(self, uid: str) -> None:
        """Drop the assumption of a pod whose admission was not recorded after all."""
        if self._assumed.pop(uid, None) is not None:
            usage = self.pods.get(uid)
            if usage is not None:
                self._count(usage, -1)

    def gone(self, uid: str) -> None:
        """Pod ``uid`` was deleted or finished: its reservation no longer holds anything."""
        if not self.shared_admission:
            return
        now = self._wall_clock()
        self._gone[uid] = now
        if len(self._gone) > 1024:
            horizon = now - self._assume_seconds
            self._gone = {u: t for u, t in self._gone.items() if t > horizon}

    def admit(self, pod: Pod, request: ResourceList) -> Admission:
        """May ``pod`` be placed, given everything else counted (never the pod itself)?"""
        namespace = pod.metadata.namespace
        if namespace not in self.quotas:
            return Admission(True, rule="no-quota")
        state = self.state(without=pod.metadata.uid, priority=pod.priority)
        decision = state.decide(namespace, request)
        if decision.admitted:
            return decision
        return state.decide(
            namespace,
            request,
            lower_priority_used=self.lower_priority_used(namespace, pod.priority),
        )

    def lower_priority_used(self, namespace: str, priority: int) -> ResourceList:
        return add(
            *(
                u.request
                for u in self.by_namespace.get(namespace, {}).values()
                if u.priority < priority and u.bound and not u.terminating
            )
        )

    # -- quotas -----------------------------------------------------------------------------

    def _rebuild_quotas(self) -> None:
        """The quotas in force from :attr:`objects`. Only objects whose spec or reservations
        changed are read again, and the pool's sums are made again only when a quota did, so
        a reservation written on one quota costs in proportion to that quota, not to all."""
        quotas: dict[str, ElasticQuota] = {}
        invalid: dict[tuple[str, str], str] = {}
        read = self._read
        for key in read.keys() - self.objects.keys():
            del read[key]
            self._reserved.pop(key, None)
        for key in sorted(self.objects):
            namespace, name = key
            if namespace in quotas:
                invalid[key] = (
                    f"namespace {namespace} already has an ElasticQuota; only the first by "
                    "name is used"
                )
                continue
            spec = self.objects[key].spec
            known = read.get(key)
            if known is None or known[0] != spec:
                try:
                    quota: ElasticQuota | str = ElasticQuota.from_object(
                        {"metadata": {"namespace": namespace, "name": name}, "spec": spec}
                    )
                except ValueError as e:
                    quota = str(e)
                known = read[key] = (spec, quota)
            if isinstance(known[1], str):
                invalid[key] = known[1]
            else:
                quotas[namespace] = known[1]
        for key in invalid.keys() - self.invalid.keys():
            logger.warning("elasticquota/%s/%s: ignored: %s", *key, invalid[key])
        same = quotas.keys() == self.quotas.keys() and all(
            quotas[namespace] is self.quotas[namespace] for namespace in quotas
        )
        self.quotas = quotas
        self.invalid = invalid
        if self.shared_admission:
            # a namespace's reservations are on its first object by name, which
            # reservation_patch writes to (valid or not)
            self.reservations, self._reserved_from = {}, {}
            for key in sorted(self.objects):
                if key[0] in quotas and key[0] not in self.reservations:
                    self.reservations[key[0]] = self._reservations(key)
                    self._reserved_from[key[0]] = key
        if not same:
            self.pool_min = add(*(q.min for q in quotas.values()))
            self.pool_used = dict(Totals.of(quotas, self.used).used)

    def _reservations(self, key: tuple[str, str]) -> dict[str, Reservation]:
        obj = self.objects[key]
        text = (obj.metadata.annotations or {}).get(ADMITTED_ANNOTATION)
        known = self._reserved.get(key)
        if known is None or known[0] != text:
            known = self._reserved[key] = (text, reservations_of(obj))
        return known[1]

    def set_quota_objects(self, objects: Iterable[QuotaObject], *, replace: bool) -> None:
        if replace:
            self.objects = {}
        changed = []
        for obj in objects:
            key = (obj.metadata.namespace, obj.metadata.name)
            if not replace and is_older(obj, self.objects.get(key)):
                continue  # a watch event behind the version a reservation patch returned
            self.objects[key] = obj
            changed.append(key)
        if not replace and all(self._spec_kept(key) for key in changed):
            # only reservations changed (an admission written): no quota is read again
            if self.shared_admission:
                for key in changed:
                    if self._reserved_from.get(key[0]) == key:
                        self.reservations[key[0]] = self._reservations(key)
            return
        self._rebuild_quotas()

    def _spec_kept(self, key: tuple[str, str]) -> bool:
        """Whether the object at ``key`` was read before with the spec it has now."""
        known = self._read.get(key)
        return known is not None and known[0] == self.objects[key].spec

    def delete_quota_object(self, obj: QuotaObject) -> None:
        self.objects.pop((obj.metadata.namespace, obj.metadata.name), None)
        self._rebuild_quotas()


class _PodStore:
    """The pod watch's store: keeps the ledger's accounting."""

    def __init__(self, ledger: QuotaLedger) -> None:
        self._ledger = ledger

    def replace(self, items: Sequence[Pod]) -> None:
        ledger = self._ledger
        fresh = {pod.metadata.uid: pod for pod in items}
        for uid in [uid for uid in ledger.pods if uid not in fresh and not ledger.is_assumed(uid)]:
            ledger.put(None, uid)
        for uid, pod in fresh.items():
            usage = _usage(pod)
            if usage is None and ledger.is_assumed(uid) and not _gave_up(pod):
                continue
            ledger.put(usage, uid)

    def apply(self, event: str, item: Pod) -> None:
        uid = item.metadata.uid
        ledger = self._ledger
        if event == "DELETED" or item.is_terminal:
            ledger.gone(uid)
        if event == "DELETED":
            ledger.put(None, uid)
            return
        usage = _usage(item)
        if usage is None and ledger.is_assumed(uid) and not _gave_up(item):
            return  # still being scheduled: keep the assumption until bound or timed out
        ledger.put(usage, uid)


def _gave_up(pod: Pod) -> bool:
    return pod.is_terminal or pod.is_unschedulable or pod.metadata.deletionTimestamp is not None


def _usage(pod: Pod) -> PodUsage | None:
    try:
        return PodUsage.of(pod)
    except ValueError as e:  # the API server validates requests; be safe anyway
        logger.warning("pod/%s: not counted against quotas: %s", pod.key, e)
        return None


class _QuotaStore:
    def __init__(self, ledger: QuotaLedger) -> None:
        self._ledger = ledger

    def replace(self, items: Sequence[QuotaObject]) -> None:
        self._ledger.set_quota_objects(items, replace=True)

    def apply(self, event: str, item: QuotaObject) -> None:
        if event == "DELETED":
            self._ledger.delete_quota_object(item)
        else:
            self._ledger.set_quota_objects([item], replace=False)
