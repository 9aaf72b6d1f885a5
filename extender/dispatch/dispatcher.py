"""Job dispatch: idempotent, backpressured creation of Jobs from templates, answered from
watch caches (no LIST per request).

Backpressure refuses a new key while the template has ``maxPending`` Pending pods, or
``maxActive`` active Jobs, or while no node can take one of its pods: its requests (against
allocatable minus what bound pods request), ``nodeSelector`` and tolerations, checked by
:mod:`shared.node_fit` on the nodes :class:`shared.capacity.Capacity` gives (those the load
model does not refuse). A key seen before is answered with its existing Job whatever the
pressure: retrying is always safe.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Any, Generic, TypeVar

import httpx

from extender.dispatch.admission import AdmissionRecords, needs_record, starting_pods
from extender.dispatch.authorizing import Authorizer
from extender.dispatch.building import (
    KEY_ANNOTATION,
    TEMPLATE_LABEL,
    build_cronjob,
    build_job,
    job_name,
)
from extender.dispatch.caches import (
    CRONJOB_DECODER,
    JOB_DECODER,
    CronJob,
    CronJobStore,
    Job,
    JobStore,
    TemplatePodStore,
)
from extender.dispatch.templates import JobTemplate
from shared.capacity import Capacity, nowhere_fits
from shared.errors import APIConflictError, LoadschedError
from shared.kube.meta import ObjectMeta
from shared.kube.paths import CRONJOBS, JOBS
from shared.kube.requesting import DEFAULT_RETRY, request
from shared.kube.retrying import RetryPolicy
from shared.node_fit import PodNeeds, Toleration
from shared.quantity import parse_resources

logger = logging.getLogger(__name__)


class Backpressure(LoadschedError):
    def __init__(self, reason: str, retry_after: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


T = TypeVar("T")


@dataclass(frozen=True)
class Dispatched(Generic[T]):
    item: T
    created: bool
    state: str | None = None
    """A Job's state: ``active``, ``succeeded``, ``failed``, or ``deleted`` for a retained key
    whose Job is gone without having been seen to finish."""


def over_limits(template: JobTemplate, active: int, pending: int) -> str | None:
    """Why ``maxPending`` or ``maxActive`` refuses a new Job, or ``None``."""
    if template.max_pending is not None and pending >= template.max_pending:
        limit = template.max_pending
        return f"template {template.name} has {pending} Pending pods (maxPending {limit})"
    if template.max_active is not None and active >= template.max_active:
        limit = template.max_active
        return f"template {template.name} has {active} active Jobs (maxActive {limit})"
    return None


def retained_job(template: JobTemplate, name: str, key: str, uid: str) -> Job:
    """What the admission record knows of a finished key's Job once it is gone."""
    meta = ObjectMeta(
        name=name,
        namespace=template.namespace,
        uid=uid,
        labels={TEMPLATE_LABEL: template.name},
        annotations={KEY_ANNOTATION: key},
    )
    return Job(metadata=meta)


def pod_needs(template: JobTemplate) -> PodNeeds:
    """What node fit reads of the pods ``template`` makes."""
    return PodNeeds(
        requests=parse_resources(template.resources.get("requests"), where="requests"),
        node_selector=template.node_selector,
        tolerations=tuple(
            Toleration(t.key, t.operator, t.value, t.effect, t.toleration_seconds)
            for t in template.tolerations
        ),
    )


class Dispatcher:
    def __init__(
        self,
        *,
        templates: Mapping[str, JobTemplate],
        client: httpx.AsyncClient,
        jobs: JobStore,
        pods: TemplatePodStore,
        capacity: Capacity,
        clock: Callable[[], datetime],
        retry_after: int = 10,
        cronjobs: CronJobStore | None = None,
        authorizer: Authorizer | None = None,
        kube_retry: RetryPolicy = DEFAULT_RETRY,
    ) -> None:
        self.kube_retry = kube_retry
        self.cronjobs = cronjobs or CronJobStore()
        self.authorizer = authorizer or Authorizer("none")
        self.templates = templates
        self._client = client
        self.jobs = jobs
        self.pods = pods
        self._capacity = capacity
        self._clock = clock
        self._retry_after = retry_after

    def pressure(self, template: JobTemplate, counted: tuple[int, int] | None = None) -> str | None:
        """Why a new Job of ``template`` must wait now, or ``None``. ``counted``: (active
        Jobs, Pending pods) from the admission record; else from this replica's watches."""
        if counted is None:
            counted = (self.jobs.active(template.name), self.pods.pending(template.name))
        reason = over_limits(template, *counted)
        return reason if reason is not None else self.no_node_fits(template)

    @cached_property
    def admission(self) -> AdmissionRecords:
        """The admission records of templates with limits or a key retention."""
        return AdmissionRecords(client=self._client, clock=self._clock, retry=self.kube_retry)

    def no_node_fits(self, template: JobTemplate) -> str | None:
        """Why no node could take a pod of ``template`` now (its requests, ``nodeSelector``
        and tolerations against every node the load model does not refuse), or ``None``."""
        reason = nowhere_fits(pod_needs(template), self._capacity.fit_nodes(self._clock()))
        if reason is None:
            return None
        return (
            f"no schedulable node can fit a pod of template {template.name} "
            f"(requests {template.resources.get('requests', {})}): {reason}"
        )

    def fits_somewhere(self, template: JobTemplate) -> bool:
        return self.no_node_fits(template) is None

    async def dispatch(
        self, template: JobTemplate, key: str, data: Mapping[str, str], overrides: Mapping[str, int]
    ) -> Dispatched[Job]:
        body = build_job(template, key, data, overrides)  # validates first: 422 beats 200/429
        name = job_name(template, key)
        existing = self.jobs.objects.get((template.namespace, name))
        if existing is not None:
            return Dispatched(existing, created=False, state=existing.state)
        admitted = False
        if needs_record(template):
            ticket = await self.admission.reserve(
                template,
                name,
                starting_pods(body["spec"]),
                jobs=self.jobs,
                pods=self.pods,
                limits=lambda active, pending: self.pressure(template, (active, pending)),
            )
            if ticket.outcome == "retained":
                job = retained_job(template, name, key, ticket.uid)
                return Dispatched(job, created=False, state=ticket.state)
            if ticket.outcome == "refused":
                raise Backpressure(ticket.reason, self._retry_after)
            admitted = ticket.outcome == "admitted"
        else:
            reason = self.pressure(template)
            if reason is not None:
                raise Backpressure(reason, self._retry_after)
        path = JOBS.path(namespace=template.namespace)
        try:
            job = JOB_DECODER.decode(await self._send("POST", path, json=body))
        except APIConflictError:
            job = JOB_DECODER.decode(
                await self._send("GET", JOBS.path(name, namespace=template.namespace))
            )
            return Dispatched(job, created=False, state=job.state)
        except LoadschedError:
            if admitted:
                await self.admission.release(template, name)
            raise
        self.jobs.put(job)  # before the watch event: maxActive holds for the next request
        logger.info("job/%s/%s: created for template %s", template.namespace, name, template.name)
        return Dispatched(job, created=True, state=job.state)

    async def delete(self, namespace: str, name: str, *, kind: str = "jobs") -> None:
        """Delete with foreground propagation (the Job's pods, the CronJob's Jobs go first)."""
        await self._send(
            "DELETE",
            {"jobs": JOBS, "cronjobs": CRONJOBS}[kind].path(name, namespace=namespace),
            json={"propagationPolicy": "Foreground"},
        )

    async def apply_cronjob(
        self,
        template: JobTemplate,
        key: str,
        data: Mapping[str, str],
        schedule: Mapping[str, object],
    ) -> Dispatched[CronJob]:
        """Create the key's CronJob, or update its schedule and data (a merge patch)."""
        body = build_cronjob(template, key, data, schedule)
        path = CRONJOBS.path(namespace=template.namespace)
        try:
            item = CRONJOB_DECODER.decode(await self._send("POST", path, json=body))
            created = True
        except APIConflictError:
            patch = {"metadata": body["metadata"], "spec": body["spec"]}
            item = CRONJOB_DECODER.decode(
                await self._send(
                    "PATCH",
                    CRONJOBS.path(body["metadata"]["name"], namespace=template.namespace),
                    json=patch,
                    headers={"Content-Type": "application/merge-patch+json"},
                )
            )
            created = False
        self.cronjobs.put(item)
        return Dispatched(item, created)

    async def _send(
        self, method: str, path: str, *, json: Any = None, headers: dict[str, str] | None = None
    ) -> bytes:
        response = await request(
            self._client,
            method,
            path,
            what=f"{method} {path}",
            retry=self.kube_retry,
            json=json,
            headers=headers,
        )
        return response.content
