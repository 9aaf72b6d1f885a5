"""Requests written straight to the API server's socket, where httpx's own work per request
would be most of the client's CPU: the annotator's node patches (a round patches every node)
and watch streams (every event of every watched object, :mod:`shared.kube.streaming`).

A :class:`Route` is how one client reaches the API server without httpx: the address, the TLS
context httpx would use, the base path and the headers httpx would send, and the token, asked
for on every request so a rotated one is used. A client built by
:meth:`shared.kube.config.KubeEndpoint.client` without a transport of its own is registered
here with its endpoint (:func:`register`); :func:`route` gives its route, or None for any
other client (a test's fake transport, an auth scheme other than a token or client
certificates), which then keeps going through httpx.

The connection is an :class:`asyncio.Protocol` on the running loop (uvloop's TLS, in C) and
the answer is parsed by ``httptools``; failures are raised as httpx's transport errors, so
:func:`shared.kube.status.unreachable` translates them like any other.
"""

from __future__ import annotations

import asyncio
import ssl
import urllib.request
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar, cast

import httptools
import httpx

if TYPE_CHECKING:
    from shared.kube.config import KubeEndpoint

PORTS = {"http": 80, "https": 443}

P = TypeVar("P", bound=asyncio.Protocol)
Origin = tuple[str, str, int]
"""Scheme, host, port."""


class TokenSource(Protocol):
    def authorization(self) -> str | None: ...


@dataclass(frozen=True)
class Route:
    origin: Origin
    tls: ssl.SSLContext | None
    prefix: bytes
    """The client's base path, without a trailing slash."""
    headers: bytes
    """``Host``, ``Accept`` and ``User-Agent`` as httpx sends them, one line each."""
    auth: TokenSource | None

    def head(self, method: bytes, target: bytes, extra: bytes = b"") -> bytes:
        """The request line and headers of ``method`` on ``target`` (a path under the base
        path, with its query), ending with the blank line; ``extra`` are more header lines."""
        token = self.auth.authorization() if self.auth is not None else None
        parts = [method, b" ", self.prefix, target, b" HTTP/1.1\r\n", self.headers, extra]
        if token:
            parts.append(header("Authorization", token))
        parts.append(b"\r\n")
        return b"".join(parts)

    async def connect(self, factory: Callable[[], P], timeout: float | None) -> P:
        return await open_connection(factory, self.origin, self.tls, timeout)


class AnswerReader(asyncio.Protocol):
    """A client connection whose answers httptools parses: each answer's status, headers and
    body gathered (a subclass may take the body as it comes instead); whatever ends it
    early, handed to :meth:`fail` as httpx's transport error."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._received = False
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self.body: list[bytes] = []

    def fail(self, error: Exception) -> None:
        raise NotImplementedError

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses

    def data_received(self, data: bytes) -> None:
        self._received = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self.fail(httpx.RemoteProtocolError("the server switched protocols"))
        except httptools.HttpParserError as e:
            self.fail(httpx.RemoteProtocolError(f"malformed answer: {e}"))

    def connection_lost(self, exc: Exception | None) -> None:
        if self._received:
            self.fail(httpx.ReadError(f"connection lost during the answer: {exc}"))
        else:
            self.fail(httpx.RemoteProtocolError("server closed the connection without an answer"))

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        self.status = self._parser.get_status_code()

    def on_body(self, body: bytes) -> None:
        self.body.append(body)


def header(name: str, value: str) -> bytes:
    """One header line; a value with a line break is refused unsent."""
    if "\r" in value or "\n" in value:
        raise httpx.LocalProtocolError(f"header {name}: line breaks are not allowed")
    return f"{name}: {value}\r\n".encode()


def ssl_context(endpoint: KubeEndpoint) -> ssl.SSLContext:
    """The endpoint's TLS settings as one context, as httpx would build it."""
    if isinstance(endpoint.verify, ssl.SSLContext):
        context = endpoint.verify
    elif endpoint.verify:
        context = ssl.create_default_context()
    else:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if endpoint.cert:
        context.load_cert_chain(*endpoint.cert)
    return context


async def open_connection(
    factory: Callable[[], P], origin: Origin, tls: ssl.SSLContext | None, timeout: float | None
) -> P:
    """A new connection to ``origin`` (TLS when ``tls``), its protocol made by ``factory``."""
    scheme, host, port = origin
    loop = asyncio.get_running_loop()
    tls = tls if scheme == "https" else None
    try:
        async with asyncio.timeout(timeout):
            _, protocol = await loop.create_connection(
                factory, host, port, ssl=tls, server_hostname=host if tls else None
            )
    except TimeoutError:
        raise httpx.ConnectTimeout(f"connect to {host}:{port}: timed out") from None
    except (OSError, ssl.SSLError) as e:
        raise httpx.ConnectError(f"connect to {host}:{port}: {e}") from e
    return protocol


_ENDPOINTS: weakref.WeakKeyDictionary[httpx.AsyncClient, KubeEndpoint] = weakref.WeakKeyDictionary()
_ROUTES: weakref.WeakKeyDictionary[httpx.AsyncClient, Route | None] = weakref.WeakKeyDictionary()
_OWN_TRANSPORT: weakref.WeakSet[httpx.AsyncClient] = weakref.WeakSet()


def register(
    client: httpx.AsyncClient, endpoint: KubeEndpoint, *, own_transport: bool = False
) -> None:
    """``client`` talks to ``endpoint`` as httpx's own transport would: requests may be
    written to it directly. ``own_transport``: the client was given a transport of its own,
    which httpx sends through whatever proxy the environment names."""
    _ENDPOINTS[client] = endpoint
    if own_transport:
        _OWN_TRANSPORT.add(client)


def route(client: httpx.AsyncClient) -> Route | None:
    """How to write ``client``'s requests directly, if it is registered and authenticates by
    token or client certificate (built once per client)."""
    if client in _ROUTES:
        return _ROUTES[client]
    endpoint = _ENDPOINTS.get(client)
    auth = client.auth
    found = None
    if endpoint is not None and (auth is None or hasattr(auth, "authorization")):
        base = client.base_url
        if base.scheme in PORTS and (client in _OWN_TRANSPORT or not _proxied(base)):
            lines = {
                "Host": base.netloc.decode("ascii"),
                "Accept": client.headers.get("Accept", "application/json"),
                "User-Agent": client.headers.get("User-Agent", "loadsched"),
            }
            found = Route(
                origin=(base.scheme, base.host, base.port or PORTS[base.scheme]),
                tls=ssl_context(endpoint) if base.scheme == "https" else None,
                prefix=base.raw_path.rstrip(b"/"),
                headers=b"".join(header(k, v) for k, v in lines.items()),
                auth=auth,  # has authorization(), checked above
            )
    _ROUTES[client] = found
    return found


def _proxied(url: httpx.URL) -> bool:
    """Whether requests to ``url`` would go through a proxy named in the environment
    (``HTTPS_PROXY`` and the like, less ``NO_PROXY``, as urllib reads them; httpx's own
    reading may differ at the edges): those keep going through httpx."""
    proxy = urllib.request.getproxies().get(url.scheme) or urllib.request.getproxies().get("all")
    return bool(proxy) and not urllib.request.proxy_bypass(url.host)
