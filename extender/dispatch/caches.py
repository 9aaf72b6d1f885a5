"""Watch-fed caches for job dispatch: the dispatched Jobs and their pods (both selected by the
template label), so backpressure and reads cost no LIST per request."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Generic, TypeVar

import msgspec

from extender.dispatch.building import KEY_ANNOTATION, TEMPLATE_LABEL
from shared.pods import Pod

FINISHED = ("Complete", "Failed")
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"


class ObjectMeta(msgspec.Struct, gc=False):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    creationTimestamp: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


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

    def put(self, item: D) -> None:
        self.objects[item.ref] = item
        self._changed(item.ref, item)

    def replace(self, items: Sequence[D]) -> None:
        gone = set(self.objects) - {item.ref for item in items}
        self.objects = {}
        for item in items:
            self.put(item)
        for key in gone:
            self._changed(key, None)

    def apply(self, event: str, item: D) -> None:
        if event == "DELETED":
            self.objects.pop(item.ref, None)
            self._changed(item.ref, None)
        else:
            self.put(item)

    def _changed(self, key: tuple[str, str], item: D | None) -> None:
        """``item`` is the new state of ``key``, ``None`` once it is gone."""


class JobStore(DispatchedStore[Job]):
    """DispatchedObject Jobs; subscribers get every change of one Job."""

    def __init__(self) -> None:
        super().__init__()
        self._watchers: dict[tuple[str, str], set[asyncio.Queue[Job | None]]] = {}

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
    """Pods of dispatched Jobs (those with the template label), by UID; fed by the pod watch."""

    def __init__(self) -> None:
        self.pods: dict[str, Pod] = {}

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

    def replace(self, items: Sequence[Pod]) -> None:
        self.pods = {p.metadata.uid: p for p in items if TEMPLATE_LABEL in _labels(p)}

    def apply(self, event: str, item: Pod) -> None:
        if event == "DELETED" or TEMPLATE_LABEL not in _labels(item):
            self.pods.pop(item.metadata.uid, None)
        else:
            self.pods[item.metadata.uid] = item


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
