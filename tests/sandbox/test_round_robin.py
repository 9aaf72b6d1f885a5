"""sandbox/round_robin.py: requests alternate between backends, a refusing backend is skipped,
and closing the balancer with a request in flight ends cleanly (pytest turns an unclosed
transport's ResourceWarning into a failure)."""

from __future__ import annotations

import gc
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from sandbox.round_robin import RoundRobin


class _Answer(BaseHTTPRequestHandler):
    delay = 0.0

    def do_GET(self) -> None:
        time.sleep(self.delay)
        body = str(self.server.server_port).encode()  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def backends() -> Iterator[list[int]]:
    servers = [ThreadingHTTPServer(("127.0.0.1", 0), _Answer) for _ in range(2)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    yield [s.server_address[1] for s in servers]
    for server in servers:
        server.shutdown()
        server.server_close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_requests_alternate_and_a_refusing_backend_is_skipped(backends: list[int]) -> None:
    with RoundRobin([*backends, free_port()]) as balancer:
        answers = [httpx.get(balancer.url).text for _ in range(4)]
    assert sorted(set(answers)) == sorted(str(p) for p in backends)
    assert balancer.served == {backends[0]: 2, backends[1]: 2}


def test_closing_with_a_request_in_flight_ends_cleanly(
    backends: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_Answer, "delay", 0.5)
    with (
        RoundRobin(backends) as balancer,
        socket.create_connection(("127.0.0.1", balancer.port)) as c,
    ):
        c.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        time.sleep(0.1)  # the balancer is waiting on the backend
    gc.collect()
