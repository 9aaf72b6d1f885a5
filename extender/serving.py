"""How the extender is served: uvicorn's configuration from the settings, and the HTTP
protocol that guards every connection: limits, slow clients, client certificates
(:class:`GuardedHttpProtocol`). Every request, the scheduler verbs too, is answered by the
ASGI app."""

from __future__ import annotations

import asyncio
import logging
import resource
import ssl
from typing import Any

import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from extender.scheduling.routes import PATHS as VERB_PATHS
from extender.settings import ExtenderSettings

logger = logging.getLogger("extender")


def server_config(app: ASGIApp, settings: ExtenderSettings, **extra: Any) -> uvicorn.Config:
    """How uvicorn serves ``app``: every connection limit of :class:`ExtenderSettings`, and
    TLS with, when ``--tls-client-ca-file`` is set, client certificates verified by the
    handshake and required by the scheduler verbs."""
    verify = settings.tls_client_ca_file is not None
    return uvicorn.Config(
        ClientCertificateRequired(app, VERB_PATHS) if verify else app,
        host=settings.host,
        port=settings.port,
        loop="uvloop",
        http=guarded_protocol(settings),
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=5,
        timeout_keep_alive=settings.http_keep_alive_seconds,
        limit_concurrency=settings.http_max_connections,
        ssl_certfile=settings.tls_cert_file,
        ssl_keyfile=settings.tls_key_file,
        # CERT_OPTIONAL: a certificate that is presented must verify, or the handshake fails;
        # the probes and /metrics need none, the verbs check for one (ClientCertificateRequired).
        ssl_cert_reqs=ssl.CERT_OPTIONAL if verify else ssl.CERT_NONE,
        ssl_ca_certs=str(settings.tls_client_ca_file) if verify else None,
        **extra,
    )


def raise_open_files_limit(connections: int) -> None:
    """Each connection is a file descriptor: raise the soft limit to the hard one (as Go
    programs do at start-up), and warn when even that is below ``connections``."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as e:
            logger.warning("cannot raise the open-files limit from %d: %s", soft, e)
    if soft != resource.RLIM_INFINITY and soft < connections + 64:
        logger.warning(
            "open-files limit %d is below --http-max-connections %d: connections beyond it "
            "are refused before the 503",
            soft,
            connections,
        )


class ClientCertificateRequired:
    """Answers 403 on ``paths`` for a connection that presented no client certificate (one
    that presented a certificate the CA did not sign never got past the handshake)."""

    def __init__(self, app: ASGIApp, paths: frozenset[str]) -> None:
        self.app = app
        self.paths = paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] in self.paths:
            tls = scope.get("extensions", {}).get("tls", {})
            if not tls.get("client_cert_chain"):
                host, port = scope.get("client") or ("?", "?")
                client = f"{host}:{port}"
                logger.warning("%s %s: refused, no client certificate", client, scope["path"])
                body = b'{"detail":"a client certificate signed by the extender\'s client CA '
                body += b'(--tls-client-ca-file) is required"}'
                await send(
                    {
                        "type": "http.response.start",
                        "status": 403,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def guarded_protocol(settings: ExtenderSettings) -> type[asyncio.Protocol]:
    """uvicorn's httptools protocol with the limits of ``settings``."""

    class Protocol(GuardedHttpProtocol):
        request_seconds = settings.http_request_seconds
        max_header_bytes = settings.http_max_header_bytes

    return Protocol


class GuardedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, with what it leaves out:

    - a connection that sends nothing is closed after the keep-alive timeout (uvicorn arms
      that timer only after a first answer);
    - a request must arrive whole within :attr:`request_seconds` of its first byte (headers
      one byte at a time, or a body trickled in, would otherwise hold the connection and a
      task for ever); then the connection is closed;
    - request line and headers over :attr:`max_header_bytes` get 431 (httptools has no
      limit of its own);
    - the client certificate of a TLS connection, in the ASGI TLS extension
      (``scope["extensions"]["tls"]["client_cert_chain"]``, PEM).

    It overrides uvicorn's parser callbacks and reads ``cycle``, ``scope`` and
    ``timeout_keep_alive_task``, which uvicorn does not promise to keep: pyproject bounds
    uvicorn to the releases ``tests/extender/test_slow_clients.py``,
    ``test_served_verbs.py`` and ``test_client_certificates.py`` ran against.
    """

    request_seconds: float = 60.0
    max_header_bytes: int = 64 * 1024

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._header_bytes = 0
        self._request_timer: asyncio.TimerHandle | None = None
        self._tls = _tls_extension(transport)
        self.timeout_keep_alive_task = self.loop.call_later(
            self.timeout_keep_alive, self.timeout_keep_alive_handler
        )

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_request_timer()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._header_bytes = 0
        if self._tls is not None:
            self.scope["extensions"] = {"tls": dict(self._tls)}  # type: ignore[dict-item]
        self._stop_request_timer()
        self._request_timer = self.loop.call_later(self.request_seconds, self._request_too_slow)

    def on_url(self, url: bytes) -> None:
        self._count_header_bytes(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count_header_bytes(len(name) + len(value) + 4)
        super().on_header(name, value)

    def on_message_complete(self) -> None:
        self._stop_request_timer()
        super().on_message_complete()

    def send_400_response(self, msg: str) -> None:
        if self._header_bytes > self.max_header_bytes:
            self._refuse(431, f"request headers over {self.max_header_bytes} bytes")
        else:
            super().send_400_response(msg)

    def _count_header_bytes(self, size: int) -> None:
        self._header_bytes += size
        if self._header_bytes > self.max_header_bytes:
            raise HeadersTooLarge  # httptools turns it into a parser error: send_400_response

    def _stop_request_timer(self) -> None:
        if self._request_timer is not None:
            self._request_timer.cancel()
            self._request_timer = None

    def _request_too_slow(self) -> None:
        self._request_timer = None
        prefix = f"{self.client[0]}:{self.client[1]}: " if self.client else ""
        self.logger.warning(
            "%srequest not received whole within %ss: connection closed",
            prefix,
            self.request_seconds,
        )
        if self.cycle is None or self.cycle.response_complete:
            self._refuse(408, f"request not received whole within {self.request_seconds}s")
        else:
            # the app is reading the body: it sees the disconnect and answers no one
            self.cycle.disconnected = True
            self.cycle.message_event.set()
            self.transport.close()

    def _refuse(self, status: int, message: str) -> None:
        if self.transport.is_closing():
            return
        reason = {408: b"Request Timeout", 431: b"Request Header Fields Too Large"}[status]
        body = message.encode()
        self.transport.write(
            b"HTTP/1.1 %d %s\r\ncontent-type: text/plain; charset=utf-8\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (status, reason, len(body), body)
        )
        self.transport.close()


class HeadersTooLarge(Exception):
    """Raised inside httptools' callbacks to stop parsing an oversized request."""


def _tls_extension(transport: asyncio.Transport) -> dict[str, Any] | None:
    """The ASGI TLS extension's client certificate fields, for a TLS connection."""
    ssl_object = transport.get_extra_info("ssl_object")
    if ssl_object is None:
        return None
    der = ssl_object.getpeercert(binary_form=True)
    if not der:
        return {"client_cert_chain": [], "client_cert_name": None}
    subject = dict(part[0] for part in ssl_object.getpeercert().get("subject", ()))
    return {
        "client_cert_chain": [ssl.DER_cert_to_PEM_cert(der)],
        "client_cert_name": subject.get("commonName"),
    }
