"""``POST /filter``, ``/prioritize``, ``/preempt``: the kube-scheduler extender verbs.

kube-scheduler calls filter and prioritize once each for every pod, one pod after the other,
so every microsecond here is added to its scheduling cycle. The verbs are therefore served as
one plain ASGI app that :class:`extender.app.ExtenderApp` hands these three paths to before
FastAPI's middleware and routing (which cost about as much as the decision itself). Bodies
are read with a size limit and decoded with msgspec straight into the slim wire types;
answers are encoded the same way. Every answer carries a ``Server-Timing`` header with the
time spent in the extender.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

import msgspec
from starlette.types import Receive, Scope, Send

from extender.scheduling.metrics import ExtenderMetrics
from extender.scheduling.quota_gate import InvalidPod
from extender.scheduling.verbs import InvalidNode, LoadAwareExtender, NamesOnlyUnavailable
from extender.scheduling.wire import (
    ARGS_DECODER,
    BINDING_DECODER,
    ENCODER,
    PREEMPTION_DECODER,
    ExtenderArgs,
    FilterResult,
    InvalidNodeNames,
    encode_filter_result,
)
from shared.errors import LoadschedError

logger = logging.getLogger(__name__)

PATHS = frozenset({"/filter", "/prioritize", "/preempt", "/bind"})
"""The paths :class:`SchedulerVerbs` answers (any method: only POST is allowed)."""

JSON = b"application/json"


class BadRequest(LoadschedError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Disconnected(LoadschedError):
    """The client went away before the body was complete: there is no one to answer."""


async def _read_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    for name, value in scope["headers"]:
        if name == b"content-length":
            if value.isdigit() and int(value) > limit:
                raise BadRequest(
                    413, f"request body of {value.decode()} bytes is over the limit of {limit}"
                )
            break
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise Disconnected
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BadRequest(413, f"request body is over the limit of {limit} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _args(body: bytes) -> ExtenderArgs:
    try:
        args = ARGS_DECODER.decode(body)
    except msgspec.DecodeError as e:
        raise BadRequest(400, f"invalid request body: {e}") from e
    if args.Pod is None:
        raise BadRequest(400, "invalid request body: Pod is required - at `$.Pod`")
    if args.Nodes is None and not args.names_only:
        raise BadRequest(400, "invalid request body: one of Nodes or NodeNames is required")
    if args.Nodes is not None and args.names_only:
        raise BadRequest(400, "invalid request body: send Nodes or NodeNames, not both")
    return args


class BodyLimit(Protocol):
    @property
    def max_body_bytes(self) -> int: ...


class VerbsState(Protocol):
    """What the verbs read of the process's state (:class:`extender.state.ExtenderState`),
    named here so that this room does not import the state of both."""

    @property
    def settings(self) -> BodyLimit: ...
    @property
    def metrics(self) -> ExtenderMetrics: ...
    @property
    def extender(self) -> LoadAwareExtender: ...


FILTER_ERRORS = (InvalidNode, InvalidNodeNames, InvalidPod, NamesOnlyUnavailable)


def _filter_failed(error: Exception) -> tuple[int, Any]:
    if isinstance(error, NamesOnlyUnavailable):
        # kube-scheduler logs the Error field of a filter answer.
        return 200, FilterResult(NodeNames=None, Error=str(error))
    raise BadRequest(400, f"invalid request body: {error}") from error


class SchedulerVerbs:
    """The verbs of one extender (filter, prioritize, preempt, bind), as an ASGI app served
    ahead of FastAPI: body limits, 400/405/413, metrics and Server-Timing."""

    def __init__(self, state: VerbsState) -> None:
        self._state = state
        self._decide: dict[str, Callable[[bytes], tuple[int, Any]]] = {
            "prioritize": self._prioritize,
            "preempt": self._preempt,
        }
        if state.extender.quota is None:
            # with elastic quotas, a filter answer waits on writing the pod's admission
            self._decide["filter"] = self._filter_now

    @property
    def max_body_bytes(self) -> int:
        return self._state.settings.max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        verb = scope["path"][1:]
        if scope["method"] != "POST":
            await _send(send, 405, b'{"detail":"Method Not Allowed"}', [(b"allow", b"POST")])
            return
        started = time.perf_counter()
        try:
            body = await _read_body(scope, receive, self.max_body_bytes)
            decide = self._decide.get(verb)
            if decide is not None:
                status, payload = decide(body)
            elif verb == "filter":
                status, payload = await self._filter(body)
            else:
                status, payload = await self._bind(body)
        except Disconnected:
            return
        except Exception as e:  # noqa: BLE001 - every failure is an answer (_failed logs it)
            status, payload = self._failed(verb, e)
        status, encoded, timing = self._answered(verb, started, status, payload)
        await _send(send, status, encoded, [(b"server-timing", timing)])

    def _failed(self, verb: str, error: Exception) -> tuple[int, Any]:
        if isinstance(error, BadRequest):
            self._state.metrics.decode_errors.labels(verb).inc()
            logger.warning("%s: %s %s", verb, error.status, error.message[:300])
            return error.status, {"detail": error.message}
        logger.error("%s: internal error", verb, exc_info=error)
        return 500, {"detail": f"internal error in {verb}: see the extender's log"}

    def _answered(
        self, verb: str, started: float, status: int, payload: Any
    ) -> tuple[int, bytes, bytes]:
        try:
            encoded = (
                encode_filter_result(payload)
                if isinstance(payload, FilterResult)
                else ENCODER.encode(payload)
            )
        except Exception as e:  # noqa: BLE001 - an answer that cannot be encoded: our fault
            status, payload = self._failed(verb, e)
            encoded = ENCODER.encode(payload)
        elapsed = time.perf_counter() - started
        self._state.metrics.answered(verb, status, elapsed)
        return status, encoded, f"extender;dur={elapsed * 1000:.3f}".encode()

    def _filter_now(self, body: bytes) -> tuple[int, Any]:
        args = _args(body)
        assert args.Pod is not None
        try:
            return 200, self._state.extender.filter(args.Pod, args)
        except FILTER_ERRORS as e:
            return _filter_failed(e)

    async def _filter(self, body: bytes) -> tuple[int, Any]:
        args = _args(body)
        assert args.Pod is not None
        try:
            return 200, await self._state.extender.filter_recorded(args.Pod, args)
        except FILTER_ERRORS as e:
            return _filter_failed(e)

    async def _bind(self, body: bytes) -> tuple[int, Any]:
        try:
            args = BINDING_DECODER.decode(body)
        except msgspec.DecodeError as e:
            raise BadRequest(400, f"invalid request body: {e}") from e
        for field in ("PodName", "PodNamespace", "Node"):
            if not getattr(args, field):
                raise BadRequest(400, f"invalid request body: {field} is required - at `$.{field}`")
        return 200, await self._state.extender.binder.bind(args)

    def _prioritize(self, body: bytes) -> tuple[int, Any]:
        args = _args(body)
        assert args.Pod is not None
        try:
            return 200, self._state.extender.prioritize(args.Pod, args)
        except (InvalidNode, InvalidNodeNames) as e:
            raise BadRequest(400, f"invalid request body: {e}") from e
        except NamesOnlyUnavailable as e:
            # kube-scheduler drops prioritize errors silently: say it here.
            logger.error("prioritize: %s", e)
            return 503, {"detail": str(e)}

    def _preempt(self, body: bytes) -> tuple[int, Any]:
        try:
            args = PREEMPTION_DECODER.decode(body)
        except msgspec.DecodeError as e:
            raise BadRequest(400, f"invalid request body: {e}") from e
        if args.Pod is None:
            raise BadRequest(400, "invalid request body: Pod is required - at `$.Pod`")
        try:
            return 200, self._state.extender.preempt(args)
        except InvalidPod as e:
            raise BadRequest(400, f"invalid request body: {e}") from e


async def _send(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", JSON),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
