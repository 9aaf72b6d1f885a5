"""Watch-fed caches for job dispatch: the dispatched Jobs and their pods (both selected by the
template label), so backpressure and reads cost no LIST per request."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Sequence
from typing import Generic, TypeVar

import msgspec

from extender.dispatch.building import KEY_ANNOTATION, TEMPLATE_LABEL
from shared.annotation_keys import JOB_NAME_LABEL
from shared.kube.meta import ObjectMeta
from shared.pods import Pod

FINISHED = ("Complete", "Failed")
GONE_REMEMBERED = 100_000
"""How many deleted Jobs a :class:`JobStore` remembers (last state and UID), oldest forgotten
first: what the admission record needs to say how a key's Job ended after it is gone."""


class JobCondition(msgspec.Struct, gc=False):
    type: str = ""
    status: str = ""
    reason: str | None = None
    message: str | None = None
    lastTransitionTime: str | None = None


class JobSpec(msgspec.Struct, gc=False):
    completions: int | None = None
    parallelism: int | None = None
    backoffLimit: int | None = None


class JobStatus(msgspec.Struct, gc=False):
    active: int = 0
    succeeded: int = 0
    failed: int = 0
    ready: int | None = None
    startTime: str | None = None
    completionTime: str | None = None
    conditions: list[JobCondition] | None = None


class DispatchedObject(msgspec.Struct, gc=False):
    """What dispatched Jobs and CronJobs share: metadata, and the template they came from."""

    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)

    @property
    def template(self) -> str:
        return (self.metadata.labels or {}).get(TEMPLATE_LABEL, "")

    @property
    def ref(self) -> tuple[str, str]:
        return (self.metadata.namespace, self.metadata.name)


class Job(DispatchedObject, gc=False):
    spec: JobSpec = msgspec.field(default_factory=JobSpec)
    status: JobStatus = msgspec.field(default_factory=JobStatus)

    @property
    def key(self) -> str:
        return (self.metadata.annotations or {}).get(KEY_ANNOTATION, "")

    @property
    def state(self) -> str:
        """``succeeded``, ``failed`` (from the Job's conditions), else ``active``."""
        for condition in self.status.conditions or ():
            if condition.status == "True" and condition.type in FINISHED:
                return "succeeded" if condition.type == "Complete" else "failed"
        return "active"


JOB_DECODER = msgspec.json.Decoder(Job)


D = TypeVar("D", bound=DispatchedObject)


class DispatchedStore(Generic[D]):
    """Dispatched objects by (namespace, name), fed by a watch (and by the dispatcher right
    after it creates one)."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], D] = {}
        self.listed = False
        """True once a LIST has filled the store (the watch is synced)."""

    def put(self, item: D) -> None:
        self.objects[item.ref] = item
        self._changed(item.ref, item)

    def replace(self, items: Sequence[D]) -> None:
        previous = self.objects
        gone = set(previous) - {item.ref for item in items}
        self.objects = {}
        for item in items:
            self.put(item)
        for key in gone:
            self._deleted(previous[key])
            self._changed(key, None)
        self.listed = True

    def apply(self, event: str, item: D) -> None:
        if event == "DELETED":
            self.objects.pop(item.ref, None)
            self._deleted(item)
            self._changed(item.ref, None)
        else:
            self.put(item)

    def _deleted(self, item: D) -> None:
        """``item`` (its last known state) was deleted."""

    def _changed(self, key: tuple[str, str], item: D | None) -> None:
        """``item`` is the new state of ``key``, ``None`` once it is gone."""


class JobStore(DispatchedStore[Job]):
    """DispatchedObject Jobs; subscribers get every change of one Job. Deleted Jobs are
    remembered (``gone``: their last state and UID) up to :data:`GONE_REMEMBERED`."""

    def __init__(self) -> None:
        super().__init__()
        self._watchers: dict[tuple[str, str], set[asyncio.Queue[Job | None]]] = {}
        self.gone: OrderedDict[tuple[str, str], tuple[str, str]] = OrderedDict()

    def put(self, item: Job) -> None:
        self.gone.pop(item.ref, None)
        super().put(item)

    def _deleted(self, item: Job) -> None:
        self.gone[item.ref] = (item.state, item.metadata.uid)
        self.gone.move_to_end(item.ref)
        while len(self.gone) > GONE_REMEMBERED:
            self.gone.popitem(last=False)

    def active(self, template: str) -> int:
        return sum(
            1 for j in self.objects.values() if j.template == template and j.state == "active"
        )

    def subscribe(self, key: tuple[str, str]) -> asyncio.Queue[Job | None]:
        queue: asyncio.Queue[Job | None] = asyncio.Queue(maxsize=100)
        self._watchers.setdefault(key, set()).add(queue)
        return queue

    def unsubscribe(self, key: tuple[str, str], queue: asyncio.Queue[Job | None]) -> None:
        watchers = self._watchers.get(key)
        if watchers is not None:
            watchers.discard(queue)
            if not watchers:
                del self._watchers[key]

    def _changed(self, key: tuple[str, str], item: Job | None) -> None:
        for queue in self._watchers.get(key, ()):
            if queue.full():
                queue.get_nowait()  # a slow reader sees the latest states
            queue.put_nowait(item)


def _labels(pod: Pod) -> dict[str, str]:
    return pod.metadata.labels or {}


class TemplatePodStore:
    """Pods of dispatched Jobs (those with the template label), by UID; fed by the pod watch.
    ``count_of_job`` is answered from an index (no scan)."""

    def __init__(self) -> None:
        self.pods: dict[str, Pod] = {}
        self._by_job: dict[tuple[str, str], set[str]] = {}

    def pending(self, template: str) -> int:
        return sum(
            1
            for p in self.pods.values()
            if _labels(p).get(TEMPLATE_LABEL) == template and p.status.phase == "Pending"
        )

    def of_job(self, namespace: str, job: str) -> list[Pod]:
        return [
            p
            for p in self.pods.values()
            if p.metadata.namespace == namespace and _labels(p).get(JOB_NAME_LABEL) == job
        ]

    def count_of_job(self, namespace: str, job: str) -> int:
        """How many pods of the Job the watch has seen (in any phase)."""
        return len(self._by_job.get((namespace, job), ()))

    def replace(self, items: Sequence[Pod]) -> None:
        self.pods = {}
        self._by_job = {}
        for pod in items:
            self.apply("ADDED", pod)

    def apply(self, event: str, item: Pod) -> None:
        uid = item.metadata.uid
        old = self.pods.pop(uid, None)
        if old is not None:
            self._unindex(old)
        if event != "DELETED" and TEMPLATE_LABEL in _labels(item):
            self.pods[uid] = item
            job = (item.metadata.namespace, _labels(item).get(JOB_NAME_LABEL, ""))
            self._by_job.setdefault(job, set()).add(uid)

    def _unindex(self, pod: Pod) -> None:
        job = (pod.metadata.namespace, _labels(pod).get(JOB_NAME_LABEL, ""))
        uids = self._by_job.get(job)
        if uids is not None:
            uids.discard(pod.metadata.uid)
            if not uids:
                del self._by_job[job]


class ObjectRef(msgspec.Struct, gc=False):
    name: str = ""


class CronJobSpec(msgspec.Struct, gc=False):
    schedule: str = ""
    timeZone: str | None = None
    concurrencyPolicy: str | None = None
    suspend: bool | None = None
    successfulJobsHistoryLimit: int | None = None
    failedJobsHistoryLimit: int | None = None
    startingDeadlineSeconds: int | None = None


class CronJobStatus(msgspec.Struct, gc=False):
    active: list[ObjectRef] | None = None
    lastScheduleTime: str | None = None
    lastSuccessfulTime: str | None = None


class CronJob(DispatchedObject, gc=False):
    spec: CronJobSpec = msgspec.field(default_factory=CronJobSpec)
    status: CronJobStatus = msgspec.field(default_factory=CronJobStatus)


CRONJOB_DECODER = msgspec.json.Decoder(CronJob)


class CronJobStore(DispatchedStore[CronJob]):
    """DispatchedObject CronJobs."""
