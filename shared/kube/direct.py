"""Requests written straight to the API server's socket, where httpx's own work per request
would be most of the client's CPU: the annotator's node patches (a round patches every node;
:mod:`annotator.patching`).

A :class:`Route` is how one client reaches the API server without httpx: the address, the TLS
context httpx would use, the base path and the headers httpx would send, and the token, asked
for on every request so a rotated one is used. It is chosen when the client is built:
:meth:`shared.kube.config.KubeEndpoint.client` with ``direct=True`` (the annotator's
``--kube-direct``, on by default) builds a :class:`DirectClient` carrying its route; :func:`route`
gives it, or None for any other client (one built without ``direct``, a proxy named in the
environment, an auth scheme other than a token or client certificates), which then keeps going
through httpx. A route names the endpoint's host: a caller that gives the client a transport of
its own (a test's fake) does not ask for ``direct``.

The connection is an :class:`asyncio.Protocol` on the running loop (uvloop's TLS, in C) and
the answer is parsed by ``httptools``; failures are raised as httpx's transport errors, so
:func:`shared.kube.status.unreachable` translates them like any other. pyproject bounds
``httptools`` to the releases these modules' tests ran against.
"""

from __future__ import annotations

import asyncio
import ssl
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar, cast

import httptools
import httpx

if TYPE_CHECKING:
    from shared.kube.config import KubeEndpoint
    from shared.kube.kept_alive import ConnectionPool

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


class DirectClient(httpx.AsyncClient):
    """An httpx client that also has a :class:`Route`: the requests its owner makes thousands
    of times (the annotator's node patches) are written straight to the connection
    (:attr:`route` None: everything goes through httpx)."""

    route: Route | None = None
    pool: ConnectionPool | None = None
    """Kept-alive connections the client's own transport shares with its direct writes (the
    annotator's PatchTransport), when it has them."""


def route(client: httpx.AsyncClient) -> Route | None:
    """The route ``client`` was built with, if it is a :class:`DirectClient` that has one."""
    return client.route if isinstance(client, DirectClient) else None


def route_for(client: httpx.AsyncClient, endpoint: KubeEndpoint) -> Route | None:
    """How to write ``client``'s requests to ``endpoint`` directly, as httpx's own transport
    would send them; None when it authenticates by anything but a token or a client
    certificate, or when its requests would go through a proxy named in the environment."""
    auth = client.auth
    base = client.base_url
    if auth is not None and not hasattr(auth, "authorization"):
        return None
    if base.scheme not in PORTS or proxied(base):
        return None
    lines = {
        "Host": base.netloc.decode("ascii"),
        "Accept": client.headers.get("Accept", "application/json"),
        "User-Agent": client.headers.get("User-Agent", "loadsched"),
    }
    return Route(
        origin=(base.scheme, base.host, base.port or PORTS[base.scheme]),
        tls=ssl_context(endpoint) if base.scheme == "https" else None,
        prefix=base.raw_path.rstrip(b"/"),
        headers=b"".join(header(k, v) for k, v in lines.items()),
        auth=cast(TokenSource | None, auth),  # has authorization(), checked above
    )


def proxied(url: httpx.URL) -> bool:
    """Whether requests to ``url`` would go through a proxy named in the environment
    (``HTTPS_PROXY`` and the like, less ``NO_PROXY``, as urllib reads them; httpx's own
    reading may differ at the edges): those keep going through httpx."""
    proxy = urllib.request.getproxies().get(url.scheme) or urllib.request.getproxies().get("all")
    return bool(proxy) and not urllib.request.proxy_bypass(url.host)
