"""A fault-injecting HTTP proxy in front of the real Prometheus, switchable at runtime.

``with PrometheusFaults(prometheus.url, slow_seconds=3) as proxy``: point the annotator at
``proxy.url``, then ``proxy.set(Fault.NAN)`` ... ``proxy.set(Fault.HEALTHY)``. Every request
goes to Prometheus and its answer comes back, or, for an instant query
(``/api/v1/query``), what the fault makes of it:

- ``down``: the port refuses connections (the listener is closed until another fault is set);
- ``slow``: Prometheus's answer, ``slow_seconds`` late (set it above the annotator's
  ``--prometheus-timeout``);
- ``http-500``: ``500`` with a text body; ``status-error``: ``422`` with Prometheus's error
  body (``status: error``, ``errorType: execution``);
- garbage, each a ``200``: ``not-json`` (an HTML page), ``wrong-type`` (the vector as a
  ``matrix``), ``nan`` / ``inf`` / ``negative`` (every value ``NaN``, ``+Inf``, ``-42``),
  ``duplicate`` (every series twice for its instance, the copy with another value and a
  ``job`` label of its own), ``empty`` (no series).

``proxy.answered[fault]`` counts the instant queries answered under each fault.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections import Counter
from enum import StrEnum
from types import TracebackType
from typing import Any

import httpx


class Fault(StrEnum):
    HEALTHY = "healthy"
    DOWN = "down"
    SLOW = "slow"
    HTTP_500 = "http-500"
    STATUS_ERROR = "status-error"
    NOT_JSON = "not-json"
    WRONG_TYPE = "wrong-type"
    NAN = "nan"
    INF = "inf"
    NEGATIVE = "negative"
    DUPLICATE = "duplicate"
    EMPTY = "empty"


QUERY_PATH = "/api/v1/query"
_MAX_HEAD = 64 * 1024


class PrometheusFaults:
    """The proxy, on ``127.0.0.1`` in a thread of its own (``port`` 0: any free port)."""

    def __init__(self, upstream: str, *, slow_seconds: float = 5.0, port: int = 0) -> None:
        self.upstream = upstream.rstrip("/")
        self.slow_seconds = slow_seconds
        self.port = port
        self.fault = Fault.HEALTHY
        self.answered: Counter[Fault] = Counter()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._client: httpx.AsyncClient | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> PrometheusFaults:
        self._thread.start()
        self._call(self._open())
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._call(self._close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def set(self, fault: Fault) -> None:
        """Answer every following query under ``fault`` (``down`` closes the port at once)."""
        self._call(self._switch(Fault(fault)))

    def _call(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(30)

    async def _open(self) -> None:
        self._client = httpx.AsyncClient(base_url=self.upstream, timeout=30)
        await self._listen()

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(
            self._serve, "127.0.0.1", self.port, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def _switch(self, fault: Fault) -> None:
        if fault is Fault.DOWN and self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        elif fault is not Fault.DOWN and self._server is None:
            await self._listen()
        self.fault = fault

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._client is not None:
            await self._client.aclose()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            if len(head) > _MAX_HEAD:
                return
            method, target, headers = _parse_head(head)
            body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
            status, content_type, payload = await self._answer(method, target, headers, body)
            writer.write(_response(status, content_type, payload))
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, OSError):
            pass  # a client that went away or sent no HTTP: nothing to answer
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def _answer(
        self, method: str, target: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, str, bytes]:
        fault = self.fault
        is_query = target.split("?", 1)[0] == QUERY_PATH
        if is_query and fault is Fault.HTTP_500:
            return self._count(fault, (500, "text/plain", b"Internal Server Error\n"))
        if is_query and fault is Fault.NOT_JSON:
            page = b"<html><body><h1>502 Bad Gateway</h1></body></html>\n"
            return self._count(fault, (200, "text/html", page))
        if is_query and fault is Fault.STATUS_ERROR:
            error = {"status": "error", "errorType": "execution", "error": "injected fault"}
            return self._count(fault, (422, "application/json", json.dumps(error).encode()))
        assert self._client is not None
        forwarded = {k: v for k, v in headers.items() if k in ("authorization", "content-type")}
        try:
            upstream = await self._client.request(method, target, headers=forwarded, content=body)
        except httpx.HTTPError as e:
            return 502, "text/plain", f"upstream: {e!r}\n".encode()
        status = upstream.status_code
        content_type = upstream.headers.get("content-type", "application/json")
        payload = upstream.content
        if not is_query:
            return status, content_type, payload
        if fault is Fault.HEALTHY or status != 200:
            return self._count(fault, (status, content_type, payload))
        if fault is Fault.SLOW:
            await asyncio.sleep(self.slow_seconds)
            return self._count(fault, (status, content_type, payload))
        return self._count(fault, (200, "application/json", garbage(fault, payload)))

    def _count(self, fault: Fault, answer: tuple[int, str, bytes]) -> tuple[int, str, bytes]:
        self.answered[fault] += 1
        return answer


def garbage(fault: Fault, payload: bytes) -> bytes:
    """Prometheus's answer ``payload`` (an instant vector) made into ``fault``'s garbage."""
    answer = json.loads(payload)
    data = answer.get("data") or {"resultType": "vector", "result": []}
    result: list[dict[str, Any]] = data.get("result") or []
    if fault is Fault.EMPTY:
        data["result"] = []
    elif fault is Fault.WRONG_TYPE:
        data["resultType"] = "matrix"
        data["result"] = [{"metric": s["metric"], "values": [s["value"]]} for s in result]
    elif fault in (Fault.NAN, Fault.INF, Fault.NEGATIVE):
        text = {Fault.NAN: "NaN", Fault.INF: "+Inf", Fault.NEGATIVE: "-42"}[fault]
        data["result"] = [{**s, "value": [s["value"][0], text]} for s in result]
    elif fault is Fault.DUPLICATE:
        copies = [
            {
                "metric": {**s["metric"], "job": "duplicate"},
                "value": [s["value"][0], str(float(s["value"][1]) + 37.5)],
            }
            for s in result
        ]
        data["result"] = [x for pair in zip(result, copies, strict=True) for x in pair]
    answer["data"] = data
    return json.dumps(answer).encode()


def _parse_head(head: bytes) -> tuple[str, str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return method, target, headers


def _response(status: int, content_type: str, payload: bytes) -> bytes:
    head = (
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}\r\n"
        f"Content-Type: {content_type}\r\nContent-Length: {len(payload)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode() + payload


_REASONS = {
    200: "OK",
    400: "Bad Request",
    422: "Unprocessable Entity",
    500: "Internal Server Error",
}
_REASONS |= {502: "Bad Gateway", 503: "Service Unavailable"}
