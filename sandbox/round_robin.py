"""An HTTP round-robin balancer on loopback: every request goes to the next backend, as an
L7 Service (a mesh, an ingress) or a kube-proxy Service whose client reconnects would spread
kube-scheduler's calls over two extender replicas. A backend that refuses the connection is
skipped, as an endpoint that failed its readiness probe.

One request per connection (the answer says ``Connection: close``), so a keep-alive client
cannot pin itself to one backend.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import Counter
from collections.abc import Sequence
from types import TracebackType

HEAD_LIMIT = 64 * 1024


class RoundRobin:
    """``with RoundRobin([port_a, port_b]) as balancer``: send requests to ``balancer.url``."""

    def __init__(self, backends: Sequence[int], host: str = "127.0.0.1") -> None:
        self.backends = list(backends)
        self._host = host
        self._next = 0
        self.port = 0
        self.served: Counter[int] = Counter()
        """Requests answered (the backend's answer begun), per backend port."""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()
        """Connections not closed yet (both sides): closed, and waited for, on exit."""

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self.port}"

    def __enter__(self) -> RoundRobin:
        self._thread.start()
        start = asyncio.start_server(self._serve, self._host, 0)
        self._server = asyncio.run_coroutine_threadsafe(start, self._loop).result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            await _cancel_others()
            for writer in list(self._open):
                await _closed(writer)

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        # a connection accepted while stopping has a task too: end it on this thread
        self._loop.run_until_complete(_cancel_others())
        self._loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._open.add(writer)
        try:
            request = await _read_request(reader)
            if request is not None:
                await self._forward(request, writer)
        except (OSError, asyncio.IncompleteReadError, ValueError):
            pass
        except asyncio.CancelledError:
            pass  # the balancer is closing
        finally:
            await self._close(writer)

    async def _close(self, writer: asyncio.StreamWriter) -> None:
        self._open.discard(writer)
        await _closed(writer)

    async def _forward(self, request: bytes, client: asyncio.StreamWriter) -> None:
        for _ in range(len(self.backends)):
            port = self.backends[self._next % len(self.backends)]
            self._next += 1
            try:
                reader, writer = await asyncio.open_connection(self._host, port)
            except OSError:
                continue  # not ready: the next endpoint
            self._open.add(writer)
            try:
                writer.write(request)
                await writer.drain()
                answered = False
                while chunk := await reader.read(64 * 1024):
                    if not answered:
                        # counted before the client can see any of the answer: once it has
                        # all of it, the balancer may be closed before the backend's EOF
                        self.served[port] += 1
                        answered = True
                    client.write(chunk)
                    await client.drain()
            finally:
                await self._close(writer)
            return
        client.write(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
        await client.drain()


async def _closed(writer: asyncio.StreamWriter) -> None:
    """Close ``writer`` and wait until its transport is (a transport left closing when the
    loop stops is reported unclosed when collected)."""
    writer.close()
    with contextlib.suppress(OSError, RuntimeError):
        await writer.wait_closed()


async def _cancel_others() -> None:
    while tasks := [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _read_request(reader: asyncio.StreamReader) -> bytes | None:
    """One request, its ``Connection`` header replaced by ``close``; ``None`` at EOF."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    if len(head) > HEAD_LIMIT:
        raise ValueError("request head too long")
    lines = head[:-4].split(b"\r\n")
    kept = [lines[0]]
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        lowered = name.strip().lower()
        if lowered == b"connection":
            continue
        if lowered == b"content-length":
            length = int(value.strip())
        kept.append(line)
    kept.append(b"Connection: close")
    body = await reader.readexactly(length) if length else b""
    return b"\r\n".join(kept) + b"\r\n\r\n" + body
