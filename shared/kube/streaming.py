"""A watch stream read straight off its connection: each line of the answer (one event) handed
to a callback as it arrives, from the connection's own ``data_received``.

Through httpx, every chunk of a watch went up through h11's parser, httpcore's and anyio's
streams (with a cancel scope per read) and httpx's iterators, and woke the reading task:
about three quarters of the extender's CPU per watch event, for a node or a pod bound, while
kube-scheduler waits on the same process for its filter answers. Here the connection is a
:class:`~shared.kube.direct.Route`'s, httptools undoes the chunked encoding, and the
callback runs with no task switch. The request asks for no compression.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from urllib.parse import quote, urlencode

import httpx

from shared.kube.direct import AnswerReader, Route
from shared.kube.status import raise_for_status

PLAIN = b"Accept-Encoding: identity\r\n"


def split_lines(pending: list[bytes], chunk: bytes) -> list[bytes]:
    """The non-empty lines ``chunk`` completes, split on ``\\n`` without decoding the text;
    ``pending`` holds the start of a line not yet complete, from earlier chunks, and is
    updated in place."""
    if b"\n" not in chunk:
        if chunk:
            pending.append(chunk)
        return []
    first, *lines, last = chunk.split(b"\n")
    if pending:
        pending.append(first)
        first = b"".join(pending)
        pending.clear()
    if last:
        pending.append(last)
    return [line for line in (first, *lines) if line]


class _WatchStream(AnswerReader):
    """One watch request's connection: its lines to ``on_line`` while the answer is 2xx; the
    whole answer gathered otherwise."""

    def __init__(self, on_line: Callable[[bytes], None]) -> None:
        super().__init__()
        self._on_line = on_line
        self._pending: list[bytes] = []
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def fail(self, error: Exception) -> None:
        self._end(error)

    def on_body(self, body: bytes) -> None:
        if self.done.done():
            return
        if not 200 <= self.status < 300:
            super().on_body(body)
            return
        try:
            for line in split_lines(self._pending, body):
                self._on_line(line)
        except Exception as e:  # noqa: BLE001 - ends the watch, raised by stream_lines
            self._end(e)

    def on_message_complete(self) -> None:
        # a line the answer ends without a newline is an event cut short: dropped, the watch
        # resumes from the last event handled and the server sends it again
        self._end(None)

    def _end(self, error: BaseException | None) -> None:
        if not self.done.done():
            if error is None:
                self.done.set_result(None)
            else:
                self.done.set_exception(error)
        if self.transport is not None:
            self.transport.close()


async def stream_lines(
    route: Route,
    path: str,
    params: Mapping[str, str],
    on_line: Callable[[bytes], None],
    *,
    connect_timeout: float | None,
) -> None:
    """GET ``path`` with ``params`` and hand each line of the answer to ``on_line`` until the
    server ends it. A non-2xx answer raises its :class:`~shared.errors.APIError`; a failed
    connection, httpx's transport error; what ``on_line`` raises ends the stream and is
    raised. Cancelling closes the connection."""
    target = quote(path).encode() + b"?" + urlencode(params).encode()
    request = route.head(b"GET", target, PLAIN)
    stream = await route.connect(lambda: _WatchStream(on_line), connect_timeout)
    try:
        assert stream.transport is not None
        stream.transport.write(request)
        await stream.done
    finally:
        if stream.transport is not None:
            stream.transport.close()
    if not 200 <= stream.status < 300:
        content = b"".join(stream.body)
        raise_for_status(httpx.Response(stream.status, headers=stream.headers, content=content))
