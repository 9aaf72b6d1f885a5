"""``/v1/jobs``: dispatch a task as a Job, read, list, watch and delete dispatched Jobs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query, Response
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

from extender.dispatch.building import MAX_KEY_LENGTH, InvalidDispatch
from extender.dispatch.caches import D, DispatchedStore, Job
from extender.dispatch.dispatcher import Backpressure, Dispatcher
from extender.dispatch.routes.deps import (
    AUTHENTICATED,
    DispatcherDep,
    DispatchRoute,
    Posted,
    allowed,
    everywhere,
    upstream,
)
from shared.errors import APINotFoundError, LoadschedError

router = APIRouter(
    prefix="/v1/jobs",
    tags=["job dispatch"],
    dependencies=[AUTHENTICATED],
    route_class=DispatchRoute,
)
"""Every route here answers 401 without an accepted token (:data:`AUTHENTICATED`) and names
its action with :func:`allowed`."""


class DispatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    template: StrictStr = Field(min_length=1, max_length=63)
    key: StrictStr = Field(min_length=1, max_length=MAX_KEY_LENGTH)
    """Idempotency key: one key, at most one Job."""
    data: dict[StrictStr, StrictStr] = {}
    """Becomes the container's environment (keys the template allows)."""
    overrides: dict[StrictStr, StrictInt] = {}


class DispatchResponse(BaseModel):
    namespace: str
    name: str
    uid: str
    created: bool
    state: str | None = None
    """``active``, ``succeeded`` or ``failed``; ``deleted`` for a key remembered by the
    template's ``keyRetentionSeconds`` whose Job is gone without having been seen to finish."""


def posted_job(request: DispatchRequest, dispatcher: DispatcherDep) -> Posted[DispatchRequest]:
    return Posted(request, dispatcher.templates.get(request.template))


MayCreate = Annotated[Posted[DispatchRequest], allowed("create", "jobs", posted_job)]


def invalid(error: InvalidDispatch) -> HTTPException:
    loc = ["body", *error.field.split(".", 1)]
    return HTTPException(422, [{"loc": loc, "msg": error.message, "type": "value_error"}])


@router.post("", status_code=201, response_model=DispatchResponse)
async def dispatch(
    posted: MayCreate, dispatcher: DispatcherDep, response: Response
) -> DispatchResponse | JSONResponse:
    request, template = posted.body, posted.template
    if template is None:
        raise HTTPException(404, f"unknown template {request.template!r}")
    try:
        result = await dispatcher.dispatch(template, request.key, request.data, request.overrides)
    except InvalidDispatch as e:
        raise invalid(e) from e
    except Backpressure as e:
        return JSONResponse(
            {"detail": e.reason}, status_code=429, headers={"Retry-After": str(e.retry_after)}
        )
    except LoadschedError as e:
        raise upstream(e) from e
    if not result.created:
        response.status_code = 200
    meta = result.item.metadata
    return DispatchResponse(
        namespace=meta.namespace,
        name=meta.name,
        uid=meta.uid,
        created=result.created,
        state=result.state,
    )


def describe(job: Job, dispatcher: Dispatcher) -> dict[str, Any]:
    meta, status = job.metadata, job.status
    pods = dispatcher.pods.of_job(meta.namespace, meta.name)
    return {
        "namespace": meta.namespace,
        "name": meta.name,
        "uid": meta.uid,
        "template": job.template,
        "key": job.key,
        "state": job.state,
        "active": status.active,
        "succeeded": status.succeeded,
        "failed": status.failed,
        "completions": job.spec.completions,
        "parallelism": job.spec.parallelism,
        "created": meta.creationTimestamp,
        "started": status.startTime,
        "completed": status.completionTime,
        "conditions": [
            {"type": c.type, "status": c.status, "reason": c.reason, "message": c.message}
            for c in status.conditions or ()
        ],
        "pods": {p.metadata.name: p.status.phase for p in pods},
    }


@router.get("", dependencies=[allowed("list", "jobs", everywhere)])
async def list_jobs(
    dispatcher: DispatcherDep,
    template: str | None = None,
    job_state: Annotated[
        Literal["active", "succeeded", "failed"] | None, Query(alias="state")
    ] = None,
) -> dict[str, Any]:
    jobs = [
        describe(job, dispatcher)
        for job in dispatcher.jobs.objects.values()
        if (template is None or job.template == template)
        and (job_state is None or job.state == job_state)
    ]
    jobs.sort(key=lambda j: (j["namespace"], j["name"]))
    return {"items": jobs}


def find(store: DispatchedStore[D], kind: str, namespace: str, name: str) -> D:
    """The cached object, or a 404 naming it."""
    item = store.objects.get((namespace, name))
    if item is None:
        raise HTTPException(404, f"no dispatched {kind} {namespace}/{name}")
    return item


async def delete_dispatched(
    dispatcher: Dispatcher,
    store: DispatchedStore[D],
    kind: str,
    namespace: str,
    name: str,
) -> dict[str, Any]:
    """``DELETE`` of a dispatched Job or CronJob (``kind``), foreground propagation."""
    resource = f"{kind.lower()}s"
    find(store, kind, namespace, name)
    try:
        await dispatcher.delete(namespace, name, kind=resource)
    except APINotFoundError as e:
        raise HTTPException(404, f"no dispatched {kind} {namespace}/{name}") from e
    except LoadschedError as e:
        raise upstream(e) from e
    return {"namespace": namespace, "name": name, "deleted": True, "propagation": "Foreground"}


@router.get("/{namespace}/{name}", dependencies=[allowed("get", "jobs")])
async def read_job(namespace: str, name: str, dispatcher: DispatcherDep) -> dict[str, Any]:
    return describe(find(dispatcher.jobs, "Job", namespace, name), dispatcher)


@router.delete("/{namespace}/{name}", dependencies=[allowed("delete", "jobs")])
async def delete_job(namespace: str, name: str, dispatcher: DispatcherDep) -> dict[str, Any]:
    return await delete_dispatched(dispatcher, dispatcher.jobs, "Job", namespace, name)


@router.get("/{namespace}/{name}/watch", dependencies=[allowed("watch", "jobs")])
async def watch_job(namespace: str, name: str, dispatcher: DispatcherDep) -> StreamingResponse:
    """Server-Sent Events: the Job's state now, then on every change, until it is deleted."""
    job = find(dispatcher.jobs, "Job", namespace, name)
    key = (namespace, name)
    queue = dispatcher.jobs.subscribe(key)

    async def events() -> AsyncIterator[bytes]:
        try:
            yield _sse("job", describe(job, dispatcher))
            while True:
                try:
                    current = await asyncio.wait_for(queue.get(), timeout=15)
                except TimeoutError:
                    yield b": keep-alive\n\n"
                    continue
                if current is None:
                    yield _sse("deleted", {"namespace": namespace, "name": name})
                    return
                yield _sse("job", describe(current, dispatcher))
        finally:
            dispatcher.jobs.unsubscribe(key, queue)

    return StreamingResponse(events(), media_type="text/event-stream")


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()
