"""Liveness, readiness and metrics."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from extender.deps import StateDep
from extender.state import Room

router = APIRouter(tags=["health"])


@router.get("/healthz", response_class=PlainTextResponse)
async def healthz() -> str:
    return "ok"


@router.get("/readyz", response_class=PlainTextResponse)
async def readyz(state: StateDep, response: Response) -> str:
    """Every room this process serves can answer."""
    ready, message = state.readiness()
    if not ready:
        response.status_code = 503
    return message


@router.get("/readyz/{room}", response_class=PlainTextResponse)
async def room_readyz(room: Room, state: StateDep, response: Response) -> str:
    """One room: ``scheduling`` once the node view (and, with elastic quotas, pods and
    quotas) is listed; ``dispatch`` once its pods, Jobs and CronJobs are. 503 for a room this
    process does not serve."""
    ready, message = state.readiness(room)
    if not ready:
        response.status_code = 503
    return message


@router.get("/metrics")
async def metrics(state: StateDep) -> Response:
    if state.node_cache is not None:
        state.metrics.cached_nodes.set(len(state.node_cache))
    if state.node_reflector is not None:
        state.metrics.cache_synced.set(1 if state.node_reflector.synced.is_set() else 0)
    return Response(generate_latest(state.metrics.registry), media_type=CONTENT_TYPE_LATEST)
