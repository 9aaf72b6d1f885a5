"""``/v1/cronjobs``: a task on a cron schedule, as a ``batch/v1`` CronJob of a template."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr

from extender.dispatch.building import MAX_KEY_LENGTH, InvalidDispatch
from extender.dispatch.caches import CronJob
from extender.dispatch.routes.deps import (
    AUTHENTICATED,
    DispatcherDep,
    DispatchRoute,
    Posted,
    allowed,
    everywhere,
    upstream,
)
from extender.dispatch.routes.jobs import delete_dispatched, find, invalid
from shared.errors import LoadschedError

router = APIRouter(
    prefix="/v1/cronjobs",
    tags=["job dispatch"],
    dependencies=[AUTHENTICATED],
    route_class=DispatchRoute,
)
"""Every route here answers 401 without an accepted token (:data:`AUTHENTICATED`) and names
its action with :func:`allowed`."""

Count = Annotated[int, Field(ge=0, le=100, strict=True)]


class CronRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    template: StrictStr = Field(min_length=1, max_length=63)
    key: StrictStr = Field(min_length=1, max_length=MAX_KEY_LENGTH)
    schedule: StrictStr = Field(min_length=1, max_length=200)
    time_zone: StrictStr | None = Field(default=None, alias="timeZone")
    concurrency_policy: Literal["Allow", "Forbid", "Replace"] = Field(
        default="Forbid", alias="concurrencyPolicy"
    )
    successful_jobs_history_limit: Count = Field(default=3, alias="successfulJobsHistoryLimit")
    failed_jobs_history_limit: Count = Field(default=1, alias="failedJobsHistoryLimit")
    starting_deadline_seconds: int | None = Field(
        default=None, ge=1, strict=True, alias="startingDeadlineSeconds"
    )
    suspend: StrictBool = False
    data: dict[StrictStr, StrictStr] = {}


class CronResponse(BaseModel):
    namespace: str
    name: str
    uid: str
    created: bool


def posted_cronjob(request: CronRequest, dispatcher: DispatcherDep) -> Posted[CronRequest]:
    return Posted(request, dispatcher.templates.get(request.template))


MayCreate = Annotated[Posted[CronRequest], allowed("create", "cronjobs", posted_cronjob)]


@router.post("", status_code=201, response_model=CronResponse)
async def apply_cronjob(
    posted: MayCreate, dispatcher: DispatcherDep, response: Response
) -> CronResponse:
    request, template = posted.body, posted.template
    if template is None:
        raise HTTPException(404, f"unknown template {request.template!r}")
    spec = {
        "schedule": request.schedule,
        "timeZone": request.time_zone,
        "concurrencyPolicy": request.concurrency_policy,
        "successfulJobsHistoryLimit": request.successful_jobs_history_limit,
        "failedJobsHistoryLimit": request.failed_jobs_history_limit,
        "startingDeadlineSeconds": request.starting_deadline_seconds,
        "suspend": request.suspend,
    }
    try:
        result = await dispatcher.apply_cronjob(template, request.key, request.data, spec)
    except InvalidDispatch as e:
        raise invalid(e) from e
    except LoadschedError as e:
        raise upstream(e) from e
    if not result.created:
        response.status_code = 200
    meta = result.item.metadata
    return CronResponse(
        namespace=meta.namespace, name=meta.name, uid=meta.uid, created=result.created
    )


def describe(cron: CronJob) -> dict[str, Any]:
    meta, spec, status = cron.metadata, cron.spec, cron.status
    return {
        "namespace": meta.namespace,
        "name": meta.name,
        "uid": meta.uid,
        "template": cron.template,
        "schedule": spec.schedule,
        "timeZone": spec.timeZone,
        "concurrencyPolicy": spec.concurrencyPolicy,
        "suspend": spec.suspend,
        "active": [ref.name for ref in status.active or ()],
        "lastScheduleTime": status.lastScheduleTime,
        "lastSuccessfulTime": status.lastSuccessfulTime,
    }


@router.get("", dependencies=[allowed("list", "cronjobs", everywhere)])
async def list_cronjobs(dispatcher: DispatcherDep, template: str | None = None) -> dict[str, Any]:
    items = [
        describe(c)
        for c in dispatcher.cronjobs.objects.values()
        if template is None or c.template == template
    ]
    items.sort(key=lambda c: (c["namespace"], c["name"]))
    return {"items": items}


@router.get("/{namespace}/{name}", dependencies=[allowed("get", "cronjobs")])
async def read_cronjob(namespace: str, name: str, dispatcher: DispatcherDep) -> dict[str, Any]:
    return describe(find(dispatcher.cronjobs, "CronJob", namespace, name))


@router.delete("/{namespace}/{name}", dependencies=[allowed("delete", "cronjobs")])
async def delete_cronjob(namespace: str, name: str, dispatcher: DispatcherDep) -> dict[str, Any]:
    return await delete_dispatched(dispatcher, dispatcher.cronjobs, "CronJob", namespace, name)
