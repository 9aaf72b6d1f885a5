"""Writes sent as bytes over kept-alive HTTP/1.1 connections of their own, without httpx's
request and response objects or httpcore's pool (building them, and checking every pooled
connection on every request, cost more CPU than the rest of a write; with many writes waiting,
httpcore's pool costs more the more wait). Used where one kind of write is made many times:
the annotator's node patches (a round patches every node).

The request is the one httpx would send for the client (its
:class:`~shared.kube.direct.Route`: address, path prefix, ``Accept``, ``User-Agent`` and token,
asked for on every request so a rotated one is used); a 2xx answer's body is returned, any
other becomes the same :class:`~shared.errors.APIError` as through httpx, and a failed
connection the same :class:`~shared.errors.APIUnreachableError`.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import deque

import httpx

from shared.kube import direct
from shared.kube.config import KEEPALIVE_EXPIRY
from shared.kube.direct import AnswerReader, Origin, Route, header
from shared.kube.status import raise_for_status, unreachable


class Connection(AnswerReader):
    """One HTTP/1.1 connection: one request at a time, its answer gathered by httptools."""

    def __init__(self) -> None:
        super().__init__()
        self.closed = False
        self.idle_since = 0.0
        self._waiter: asyncio.Future[None] | None = None
        self.keep_alive = False

    def fail(self, error: Exception) -> None:
        self._fail(error)
        self.close()

    def on_message_complete(self) -> None:
        self.keep_alive = self._parser.should_keep_alive()
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _fail(self, error: Exception) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(error)

    async def exchange(self, data: bytes, timeout: float | None) -> None:
        """Write ``data`` (one whole request) and wait for its whole answer."""
        assert self.transport is not None
        self.headers, self.body, self._received = [], [], False
        self._waiter = asyncio.get_running_loop().create_future()
        self.transport.write(data)
        try:
            async with asyncio.timeout(timeout):
                await self._waiter
        except TimeoutError:
            raise httpx.ReadTimeout(f"no answer within {timeout}s") from None
        finally:
            self._waiter = None

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


Answer = tuple[int, list[tuple[bytes, bytes]], bytes]
"""An answer's status, headers and body."""


class ConnectionPool:
    """Kept-alive connections by origin: a request takes an idle one or opens a new one, and
    gives it back when its answer is whole; up to ``max_idle`` are kept per origin."""

    def __init__(self, tls: ssl.SSLContext | None, max_idle: int) -> None:
        self._tls = tls
        self._max_idle = max_idle
        self._idle: dict[Origin, deque[Connection]] = {}

    async def send(
        self,
        origin: Origin,
        data: bytes,
        connect_timeout: float | None,
        read_timeout: float | None,
    ) -> Answer:
        """Write ``data`` (one whole HTTP/1.1 request) on a kept-alive connection to
        ``origin``, or a new one; the answer. Raises httpx's transport errors."""
        connection = self._idle_connection(origin) or await self._connect(origin, connect_timeout)
        try:
            await connection.exchange(data, read_timeout)
        except BaseException:
            connection.close()
            raise
        answer = (connection.status, connection.headers, b"".join(connection.body))
        self._release(origin, connection)
        return answer

    def _idle_connection(self, origin: Origin) -> Connection | None:
        pool = self._idle.get(origin)
        expired = time.monotonic() - KEEPALIVE_EXPIRY
        while pool:
            connection = pool.pop()
            if not connection.closed and connection.idle_since >= expired:
                return connection
            connection.close()
        return None

    def _release(self, origin: Origin, connection: Connection) -> None:
        pool = self._idle.setdefault(origin, deque())
        if connection.closed or not connection.keep_alive or len(pool) >= self._max_idle:
            connection.close()
            return
        connection.idle_since = time.monotonic()
        pool.append(connection)

    async def _connect(self, origin: Origin, timeout: float | None) -> Connection:
        return await direct.open_connection(Connection, origin, self._tls, timeout)

    def close(self) -> None:
        for pool in self._idle.values():
            for connection in pool:
                connection.close()
        self._idle.clear()


class DirectWrite:
    """Writes of one client's requests straight to ``pool`` (see the module's text)."""

    def __init__(self, pool: ConnectionPool, route: Route, timeout: httpx.Timeout) -> None:
        self._pool = pool
        self._route = route
        self._timeout = timeout

    async def send(
        self, method: bytes, target: bytes, body: bytes, content_type: str, what: str
    ) -> bytes:
        """One attempt of ``method`` on ``target`` (a path under the client's base path) with
        ``body``; the answer's body. Raises the error of a non-2xx answer or of the
        connection (``what`` names the object in its message)."""
        length = b"Content-Length: %d\r\n" % len(body)
        request = self._route.head(method, target, header("Content-Type", content_type) + length)
        request += body
        try:
            status, headers, content = await self._pool.send(
                self._route.origin, request, self._timeout.connect, self._timeout.read
            )
        except httpx.HTTPError as e:
            raise unreachable(e, what) from e
        if not 200 <= status < 300:
            raise_for_status(httpx.Response(status, headers=headers, content=content))
        return content
