"""``POST /filter``, ``/prioritize``, ``/preempt``: the kube-scheduler extender verbs.

Bodies are read with a size limit and decoded with msgspec straight into the slim wire types;
answers are encoded the same way. Every answer carries a ``Server-Timing`` header with the
time spent in the extender.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import msgspec
from fastapi import APIRouter, Request, Response

from extender.api.deps import StateDep
from extender.elastic_quota import InvalidPod
from extender.scheduling import InvalidNode, NamesOnlyUnavailable
from extender.state import ExtenderState
from extender.wire import (
    ARGS_DECODER,
    ENCODER,
    PREEMPTION_DECODER,
    ExtenderArgs,
    FilterResult,
    PodInfo,
    encode_filter_result,
)

logger = logging.getLogger(__name__)
router = APIRouter(tags=["scheduler extender"])

JSON = "application/json"


class BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BadRequest(413, f"request body of {declared} bytes is over the limit of {limit}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BadRequest(413, f"request body is over the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _decode_error(error: msgspec.DecodeError) -> BadRequest:
    return BadRequest(400, f"invalid request body: {error}")


def _args(body: bytes) -> ExtenderArgs:
    try:
        args = ARGS_DECODER.decode(body)
    except msgspec.DecodeError as e:
        raise _decode_error(e) from e
    if args.Pod is None:
        raise BadRequest(400, "invalid request body: Pod is required - at `$.Pod`")
    if args.Nodes is None and args.NodeNames is None:
        raise BadRequest(400, "invalid request body: one of Nodes or NodeNames is required")
    if args.Nodes is not None and args.NodeNames is not None:
        raise BadRequest(400, "invalid request body: send Nodes or NodeNames, not both")
    return args


def _respond(
    state: ExtenderState, verb: str, started: float, status: int, payload: Any
) -> Response:
    if isinstance(payload, FilterResult):
        body = encode_filter_result(payload)
    else:
        body = ENCODER.encode(payload)
    elapsed = time.perf_counter() - started
    state.metrics.request_seconds.labels(verb).observe(elapsed)
    state.metrics.responses.labels(verb, str(status)).inc()
    return Response(
        body,
        status_code=status,
        media_type=JSON,
        headers={"Server-Timing": f"extender;dur={elapsed * 1000:.3f}"},
    )


def _refuse(state: ExtenderState, verb: str, started: float, error: BadRequest) -> Response:
    state.metrics.decode_errors.labels(verb).inc()
    logger.warning("%s: %s %s", verb, error.status, error.message[:300])
    return _respond(state, verb, started, error.status, {"detail": error.message})


async def _decide(
    request: Request,
    state: ExtenderState,
    verb: str,
    decide: Callable[[PodInfo, ExtenderArgs], Any],
    unavailable: Callable[[NamesOnlyUnavailable], tuple[int, Any]],
) -> Response:
    """Read, decode and answer one filter or prioritize call."""
    started = time.perf_counter()
    try:
        args = _args(await _read_body(request, state.settings.max_body_bytes))
        assert args.Pod is not None
        try:
            return _respond(state, verb, started, 200, decide(args.Pod, args))
        except (InvalidNode, InvalidPod) as e:
            raise BadRequest(400, f"invalid request body: {e}") from e
        except NamesOnlyUnavailable as e:
            status, payload = unavailable(e)
            return _respond(state, verb, started, status, payload)
    except BadRequest as e:
        return _refuse(state, verb, started, e)


def _filter_unavailable(error: NamesOnlyUnavailable) -> tuple[int, Any]:
    # kube-scheduler logs the Error field of a filter answer.
    return 200, FilterResult(NodeNames=None, Error=str(error))


def _prioritize_unavailable(error: NamesOnlyUnavailable) -> tuple[int, Any]:
    # kube-scheduler drops prioritize errors silently: say it here.
    logger.error("prioritize: %s", error)
    return 503, {"detail": str(error)}


@router.post("/filter")
async def filter_nodes(request: Request, state: StateDep) -> Response:
    return await _decide(request, state, "filter", state.extender.filter, _filter_unavailable)


@router.post("/prioritize")
async def prioritize_nodes(request: Request, state: StateDep) -> Response:
    return await _decide(
        request, state, "prioritize", state.extender.prioritize, _prioritize_unavailable
    )


@router.post("/preempt")
async def preempt(request: Request, state: StateDep) -> Response:
    started = time.perf_counter()
    try:
        body = await _read_body(request, state.settings.max_body_bytes)
        try:
            args = PREEMPTION_DECODER.decode(body)
        except msgspec.DecodeError as e:
            raise _decode_error(e) from e
        if args.Pod is None:
            raise BadRequest(400, "invalid request body: Pod is required - at `$.Pod`")
        try:
            return _respond(state, "preempt", started, 200, state.extender.preempt(args))
        except InvalidPod as e:
            raise BadRequest(400, f"invalid request body: {e}") from e
    except BadRequest as e:
        return _refuse(state, "preempt", started, e)
