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

import logging
from collections.abc import Mapping
from functools import partial
from urllib.parse import quote

import httpx
import msgspec

from shared.errors import APINotFoundError
from shared.kube import direct as direct_module
from shared.kube import patching
from shared.kube.config import KubeEndpoint, pool_limits
from shared.kube.kept_alive import ConnectionPool, DirectWrite
from shared.kube.paths import NODES
from shared.kube.requesting import DEFAULT_RETRY, retried
from shared.kube.retrying import RetryPolicy

logger = logging.getLogger(__name__)


class NodePatcher:
    def __init__(self, client: httpx.AsyncClient, *, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        self._client = client
        self._retry = retry
        self._direct = _direct_write(client, retry.http_timeout)

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
                target = _NODES + quote(node, safe="").encode()
                await retried(
                    partial(self._direct.send, b"PATCH", target, body, _MERGE, what),
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


def kube_client(
    endpoint: KubeEndpoint,
    *,
    max_connections: int,
    transport: httpx.AsyncBaseTransport | None = None,
    direct: bool = True,
) -> httpx.AsyncClient:
    """The annotator's API client: with ``transport`` (the tests' fake API server), every
    request through it; else, with ``direct``, a :class:`PatchTransport` keeping up to
    ``max_connections`` connections of each kind, which :class:`NodePatcher` then writes to
    directly; without, or when a proxy named in the environment applies to the API server,
    httpx's own transport for everything."""
    patch_transport = None
    # through a proxy named in the environment, everything goes through httpx, which honours it
    if transport is None and direct and not direct_module.proxied(httpx.URL(endpoint.host)):
        transport = patch_transport = PatchTransport(endpoint, max_connections=max_connections)
    client = endpoint.client(
        transport=transport, max_connections=max_connections, direct=patch_transport is not None
    )
    # httpx offers no switch for cookies; its own Cookies wraps every answer in urllib's
    # request and response types before the jar sees it
    client._cookies = _NoCookies()
    if patch_transport is not None:
        assert isinstance(client, direct_module.DirectClient)
        client.pool = patch_transport.pool
    return client


_NODES = NODES.path().encode() + b"/"
_MERGE = patching.PatchType.MERGE.value


def _direct_write(client: httpx.AsyncClient, timeout: httpx.Timeout) -> DirectWrite | None:
    """The direct path of a client :func:`kube_client` built with its own transport and token
    (or none: client certificates), over that transport's connections; None for any other
    client."""
    if not isinstance(client, direct_module.DirectClient):
        return None
    if client.route is None or client.pool is None:
        return None
    return DirectWrite(client.pool, client.route, timeout)


class _NoCookies(httpx.Cookies):
    """The API server sets no cookies: reading every answer for them (httpx first wraps it
    and its request in urllib's types, parsing the URL again) cost a third of the client's
    CPU per patch."""

    def extract_cookies(self, response: httpx.Response) -> None:  # noqa: ARG002
        return None


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
        tls = direct_module.ssl_context(endpoint) if url.scheme == "https" else None
        self._fallback = fallback or httpx.AsyncHTTPTransport(
            verify=tls or True,
            limits=pool_limits(max_connections),
        )
        self.pool = ConnectionPool(tls, max_connections)
        """The PATCH requests' connections (also written to directly: :class:`NodePatcher`)."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method != "PATCH" or not isinstance(request.stream, httpx.ByteStream):
            return await self._fallback.handle_async_request(request)
        timeouts = request.extensions.get("timeout", {})
        origin = (
            request.url.scheme,
            request.url.host,
            request.url.port or direct_module.PORTS[request.url.scheme],
        )
        status, headers, body = await self.pool.send(
            origin, _serialize(request), timeouts.get("connect"), timeouts.get("read")
        )
        return httpx.Response(
            status,
            headers=headers,
            stream=httpx.ByteStream(body),
            extensions={"http_version": b"HTTP/1.1"},
        )

    async def aclose(self) -> None:
        self.pool.close()
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
