"""A TCP relay on loopback that delays every byte the server sends by a fixed lag.

Put between a watcher and kube-apiserver, it makes that watcher see every change ``lag``
seconds after everybody else (TLS passes through untouched): the end-to-end tests use it to
make the extender's node watch lag behind kube-scheduler's, deterministically.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from types import TracebackType

CHUNK = 64 * 1024


class LaggingRelay:
    """``with LaggingRelay(target_port, lag) as relay``: connect to ``relay.port`` instead."""

    def __init__(self, target_port: int, lag: float, host: str = "127.0.0.1") -> None:
        self._target = (host, target_port)
        self._host = host
        self.lag = lag
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None

    def __enter__(self) -> LaggingRelay:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(10)
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
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _serve(self) -> asyncio.Server:
        return await asyncio.start_server(self._relay, self._host, 0)

    async def _relay(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await asyncio.open_connection(*self._target)
        except OSError:
            client_w.close()
            return
        up = asyncio.create_task(_pump(client_r, server_w, 0.0))
        down = asyncio.create_task(_pump(server_r, client_w, self.lag))
        try:
            await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            pass  # the relay is closing
        finally:
            for task in (up, down):
                task.cancel()
            for writer in (client_w, server_w):
                writer.close()


async def _pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter, lag: float) -> None:
    """Copy ``source`` to ``sink``, each chunk ``lag`` seconds after it arrived, in order."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def deliver() -> None:
        while True:
            due, data = await queue.get()
            delay = due - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            if not data:
                return
            sink.write(data)
            await sink.drain()

    delivering = asyncio.create_task(deliver())
    try:
        while True:
            data = await source.read(CHUNK)
            queue.put_nowait((loop.time() + lag, data))
            if not data:
                break
        await delivering
    finally:
        delivering.cancel()
        with contextlib.suppress(asyncio.CancelledError, OSError):
            await delivering
