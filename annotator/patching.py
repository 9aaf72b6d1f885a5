"""Write node annotations: one JSON merge patch of ``metadata.annotations`` per node, retried
by the service's :class:`~shared.kube.retrying.RetryPolicy` on connect errors, timeouts, 5xx,
429 (after its ``Retry-After``) and conflicts; a deleted node is skipped.

The patch sets fixed values and carries no ``resourceVersion``, so sending it twice equals
sending it once: it is retried like a read, and re-applied after a 409.

A round patches every node, so the client's own work per PATCH counts: :class:`PatchTransport`
sends PATCH requests over kept-alive HTTP/1.1 connections of its own, each request in one
write and its answer parsed by ``httptools``, and hands every other request (watches, lists,
the lease) to httpx's own transport. :func:`kube_client` builds the annotator's client with it.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections import deque
from collections.abc import Mapping
from functools import partial
from urllib.parse import quote

import httpx
import msgspec

from shared.errors import APINotFoundError
from shared.kube import direct, patching
from shared.kube.config import KubeEndpoint
from shared.kube.direct import AnswerReader, Route, header
from shared.kube.paths import NODES
from shared.kube.requesting import DEFAULT_RETRY, retried
from shared.kube.retrying import RetryPolicy
from shared.kube.status import raise_for_status, unreachable

logger = logging.getLogger(__name__)

KEEPALIVE_EXPIRY = 5.0
"""Seconds an idle connection is kept (httpx's default): the API server closes idle ones."""


class NodePatcher:
    def __init__(self, client: httpx.AsyncClient, *, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        self._client = client
        self._retry = retry
        self._direct = _DirectPatch.of(client, retry.http_timeout)

    async def patch_annotations(self, node: str, annotations: Mapping[str, str | None]) -> bool:
        """Merge ``annotations`` into the node's (``None`` removes a key). False if the node is
        gone; raises the last error once retries are exhausted."""
        body = msgspec.json.encode({"metadata": {"annotations": dict(annotations)}})
        what = f"node/{node}: patch"
        try:
            if self._direct is None:
                await patching.patch(
                    self._client,
                    NODES,
                    node,
                    body,
                    what=what,
                    retry=self._retry,
                    idempotent=True,
                    conflicts=True,
                )
            else:
                await retried(
                    partial(self._direct.patch, node, body, what),
                    method="PATCH",
                    what=what,
                    retry=self._retry,
                    idempotent=True,
                    conflicts=True,
                )
        except APINotFoundError:
            logger.info("node/%s: deleted meanwhile; skipped", node)
            return False
        return True


_DIRECT: weakref.WeakKeyDictionary[httpx.AsyncClient, PatchTransport] = weakref.WeakKeyDictionary()
"""The :class:`PatchTransport` of each client :func:`kube_client` built."""


def kube_client(
    endpoint: KubeEndpoint,
    *,
    max_connections: int,
    transport: httpx.AsyncBaseTransport | None = None,
) -> httpx.AsyncClient:
    """The annotator's API client: ``transport`` when given (tests), else a
    :class:`PatchTransport` keeping up to ``max_connections`` connections of each kind, which
    :class:`NodePatcher` then writes to directly."""
    patch_transport = None
    if transport is None:
        transport = patch_transport = PatchTransport(endpoint, max_connections=max_connections)
    client = endpoint.client(transport=transport, max_connections=max_connections)
    # httpx offers no switch for cookies; its own Cookies wraps every answer in urllib's
    # request and response types before the jar sees it
    client._cookies = _NoCookies()  # noqa: SLF001
    if patch_transport is not None:
        _DIRECT[client] = patch_transport
        direct.register(client, endpoint, own_transport=True)  # httpx uses no proxy
    return client


class _DirectPatch:
    """A node's merge patch written as bytes to the client's :class:`PatchTransport`, without
    httpx's request and response objects (building them, and the URL, cost more CPU than the
    rest of a patch). The request is the one httpx would send (the client's
    :class:`~shared.kube.direct.Route`: address, path prefix, ``Accept``, ``User-Agent`` and
    token, asked for on every request so a rotated one is used); a 2xx answer's body is
    dropped unread, any other becomes the same :class:`~shared.errors.APIError` as through
    httpx."""

    def __init__(self, transport: PatchTransport, route: Route, timeout: httpx.Timeout) -> None:
        self._transport = transport
        self._route = route
        self._timeout = timeout
        self._prefix = NODES.path().encode() + b"/"
        self._type = header("Content-Type", patching.PatchType.MERGE.value)

    @classmethod
    def of(cls, client: httpx.AsyncClient, timeout: httpx.Timeout) -> _DirectPatch | None:
        """The direct path of a client :func:`kube_client` built with its own transport and
        token (or none: client certificates); None for any other client."""
        transport = _DIRECT.get(client)
        route = direct.route(client)
        if transport is None or route is None:
            return None
        return cls(transport, route, timeout)

    async def patch(self, node: str, body: bytes, what: str) -> None:
        """One attempt; raises the error of a non-2xx answer or of the connection."""
        target = self._prefix + quote(node, safe="").encode()
        length = b"Content-Length: %d\r\n" % len(body)
        request = self._route.head(b"PATCH", target, self._type + length) + body
        try:
            status, headers, content = await self._transport.send(
                self._route.origin, request, self._timeout.connect, self._timeout.read
            )
        except httpx.HTTPError as e:
            raise unreachable(e, what) from e
        if not 200 <= status < 300:
            raise_for_status(httpx.Response(status, headers=headers, content=content))


class _NoCookies(httpx.Cookies):
    """The API server sets no cookies: reading every answer for them (httpx first wraps it
    and its request in urllib's types, parsing the URL again) cost a third of the client's
    CPU per patch."""

    def extract_cookies(self, response: httpx.Response) -> None:  # noqa: ARG002
        return None


class _Connection(AnswerReader):
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


class PatchTransport(httpx.AsyncBaseTransport):
    """PATCH over kept-alive HTTP/1.1 connections, each request written in one piece; any other
    request, or a PATCH whose body streams, goes to ``fallback`` (httpx's own transport)."""

    def __init__(
        self,
        endpoint: KubeEndpoint,
        *,
        max_connections: int,
        fallback: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        url = httpx.URL(endpoint.host)
        self._tls = direct.ssl_context(endpoint) if url.scheme == "https" else None
        self._fallback = fallback or httpx.AsyncHTTPTransport(
            verify=self._tls or True,
            limits=httpx.Limits(
                max_connections=max_connections, max_keepalive_connections=max_connections
            ),
        )
        self._max_idle = max_connections
        self._idle: dict[tuple[str, str, int], deque[_Connection]] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method != "PATCH" or not isinstance(request.stream, httpx.ByteStream):
            return await self._fallback.handle_async_request(request)
        timeouts = request.extensions.get("timeout", {})
        origin = (
            request.url.scheme,
            request.url.host,
            request.url.port or direct.PORTS[request.url.scheme],
        )
        status, headers, body = await self.send(
            origin, _serialize(request), timeouts.get("connect"), timeouts.get("read")
        )
        return httpx.Response(
            status,
            headers=headers,
            stream=httpx.ByteStream(body),
            extensions={"http_version": b"HTTP/1.1"},
        )

    async def send(
        self,
        origin: tuple[str, str, int],
        data: bytes,
        connect_timeout: float | None,
        read_timeout: float | None,
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """Write ``data`` (one whole HTTP/1.1 request) on a kept-alive connection to
        ``origin``, or a new one; the answer's status, headers and body. Raises httpx's
        transport errors."""
        connection = self._idle_connection(origin) or await self._connect(origin, connect_timeout)
        try:
            await connection.exchange(data, read_timeout)
        except BaseException:
            connection.close()
            raise
        answer = (connection.status, connection.headers, b"".join(connection.body))
        self._release(origin, connection)
        return answer

    def _idle_connection(self, origin: tuple[str, str, int]) -> _Connection | None:
        pool = self._idle.get(origin)
        expired = time.monotonic() - KEEPALIVE_EXPIRY
        while pool:
            connection = pool.pop()
            if not connection.closed and connection.idle_since >= expired:
                return connection
            connection.close()
        return None

    def _release(self, origin: tuple[str, str, int], connection: _Connection) -> None:
        pool = self._idle.setdefault(origin, deque())
        if connection.closed or not connection.keep_alive or len(pool) >= self._max_idle:
            connection.close()
            return
        connection.idle_since = time.monotonic()
        pool.append(connection)

    async def _connect(self, origin: tuple[str, str, int], timeout: float | None) -> _Connection:
        return await direct.open_connection(_Connection, origin, self._tls, timeout)

    async def aclose(self) -> None:
        for pool in self._idle.values():
            for connection in pool:
                connection.close()
        self._idle.clear()
        await self._fallback.aclose()


def _serialize(request: httpx.Request) -> bytes:
    """The request line, headers and body as the bytes sent."""
    head = [request.method.encode(), b" ", request.url.raw_path, b" HTTP/1.1\r\n"]
    for name, value in request.headers.raw:
        if b"\r" in value or b"\n" in value or b"\r" in name or b"\n" in name:
            raise httpx.LocalProtocolError(f"header {name!r}: line breaks are not allowed")
        head += (name, b": ", value, b"\r\n")
    head += (b"\r\n", request.content)
    return b"".join(head)
