"""A real HTTP/1.1 server on 127.0.0.1 (a socket, not a mock) for the clients that write to
the API server's socket directly (:mod:`shared.kube.kept_alive`): each request is recorded and
answered with bytes the test gives. ``serve`` (a fixture of ``tests/conftest.py``) starts one."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import httpcore._async.http11
import pytest

from shared.kube import kept_alive
from shared.kube.config import KubeEndpoint

OK = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{"ok":true}'


@dataclass
class Received:
    connection: int
    head: bytes
    body: bytes


@dataclass
class Server:
    """Answers each request with ``answer(received)``: bytes to send, ``b""`` to close the
    connection without answering, ``None`` to never answer."""

    answer: Callable[[Received], bytes | None]
    received: list[Received] = field(default_factory=list)
    connections: int = 0

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = self.connections
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":", 1)[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                received = Received(number, head, await reader.readexactly(length))
                self.received.append(received)
                answer = self.answer(received)
                if answer is None:
                    await asyncio.Event().wait()
                if not answer:
                    break
                writer.write(answer)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@dataclass
class Started:
    server: Server
    endpoint: KubeEndpoint


class Servers:
    """The servers a test started, closed when it ends."""

    def __init__(self) -> None:
        self._listening: list[asyncio.Server] = []

    async def start(self, answer: Callable[[Received], bytes | None]) -> Started:
        server = Server(answer)
        listening = await asyncio.start_server(server._serve, "127.0.0.1", 0)
        self._listening.append(listening)
        port = listening.sockets[0].getsockname()[1]
        return Started(server, KubeEndpoint(host=f"http://127.0.0.1:{port}"))

    def close(self) -> None:
        for listening in self._listening:
            listening.close()


Serve = Callable[[Callable[[Received], bytes | None]], Awaitable[Started]]
"""The ``serve`` fixture: starts a server answering with the function given."""


class PoolClock:
    """``time`` as the connection pools read it (httpcore's, :mod:`shared.kube.kept_alive`'s),
    moved ahead by :meth:`idle`: a quiet spell passes without waiting for it, and nothing
    else's clock moves (the event loop's timers keep real time)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.ahead = 0.0
        monkeypatch.setattr(httpcore._async.http11, "time", self)
        monkeypatch.setattr(kept_alive, "time", self)

    def idle(self, seconds: float) -> None:
        self.ahead += seconds

    def monotonic(self) -> float:
        return time.monotonic() + self.ahead
