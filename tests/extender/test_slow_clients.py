"""Slow and idle clients against the real server (uvicorn, as ``loadsched-extender`` runs it:
:func:`extender.serving.server_config`): they must not stall kube-scheduler's calls, and what the
extender's settings bound (a request's time to arrive, its headers, idle connections, the
number of connections) is enforced.

Each test asserts what happened while the slow clients were still hanging on, never how long
anything took.
"""

from __future__ import annotations

import socket
import threading
import time
from contextlib import ExitStack

import httpx
import pytest

from tests.fakes.uvicorn_server import filter_body, real_server

IDLE_CONNECTIONS = 1000


def open_idle(address: tuple[str, int], count: int) -> list[socket.socket]:
    """``count`` keep-alive connections, each answered once (``/healthz``) and left idle."""
    sockets: list[socket.socket] = []
    for _ in range(count):
        conn = socket.create_connection(address)
        sockets.append(conn)
        conn.sendall(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        answer = b""
        while not answer.endswith(b"\r\n\r\nok"):  # /healthz answers "ok"
            chunk = conn.recv(4096)
            if not chunk:
                for opened in sockets:
                    opened.close()
                raise AssertionError(f"connection {len(sockets)} closed after {answer!r}")
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 200")
    return sockets


def start_trickle(address: tuple[str, int], body: bytes) -> tuple[socket.socket, threading.Event]:
    """A client that sends a filter request's headers, then its body one byte a second; the
    event stops it."""
    conn = socket.create_connection(address)
    conn.sendall(
        b"POST /filter HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n" % len(body)
    )
    stop = threading.Event()

    def trickle() -> None:
        for byte in body:
            if stop.wait(1.0):
                return
            try:
                conn.sendall(bytes([byte]))
            except OSError:
                return

    threading.Thread(target=trickle, daemon=True).start()
    return conn, stop


def still_open(conn: socket.socket) -> bool:
    """Nothing was answered and the server has not closed the connection."""
    conn.setblocking(False)
    try:
        return bool(conn.recv(1) is None)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        conn.setblocking(True)


def closed_by_server(conn: socket.socket, timeout: float) -> bytes:
    """What the server sent before closing ``conn`` (fails if it keeps it open)."""
    conn.settimeout(timeout)
    received = b""
    while chunk := conn.recv(4096):
        received += chunk
    return received


def test_verbs_answered_while_idle_and_trickling_clients_hang_on() -> None:
    body, names = filter_body()
    with ExitStack() as stack:
        address = stack.enter_context(real_server(http_keep_alive_seconds=300))
        idle = open_idle(address, IDLE_CONNECTIONS)
        for conn in idle:
            stack.callback(conn.close)
        trickler, stop = start_trickle(address, body)
        stack.callback(trickler.close)
        stack.callback(stop.set)
        with httpx.Client(base_url=f"http://{address[0]}:{address[1]}") as scheduler:
            for verb in ("filter", "prioritize", "filter", "prioritize") * 5:
                response = scheduler.post(f"/{verb}", content=body)
                assert response.status_code == 200, response.text
                if verb == "filter":
                    passed = {n["metadata"]["name"] for n in response.json()["Nodes"]["items"]}
                    failed = set(response.json()["FailedAndUnresolvableNodes"])
                    assert passed | failed == names and passed
                else:
                    assert {entry["Host"] for entry in response.json()} == names
        # the answers came while every slow client was still connected and unanswered
        assert still_open(trickler)
        assert all(still_open(conn) for conn in idle)


def test_a_trickled_body_is_cut_off_and_the_verbs_go_on() -> None:
    body, _ = filter_body()
    with ExitStack() as stack:
        address = stack.enter_context(real_server(http_request_seconds=1.5))
        trickler, stop = start_trickle(address, body)
        stack.callback(trickler.close)
        stack.callback(stop.set)
        answer = closed_by_server(trickler, timeout=30)
        # no answer: the app was reading the body when the connection was closed
        assert answer == b""
        response = httpx.post(f"http://{address[0]}:{address[1]}/filter", content=body)
        assert response.status_code == 200


def test_headers_sent_one_byte_at_a_time_get_408() -> None:
    with real_server(http_request_seconds=1.5) as address:
        conn = socket.create_connection(address)
        request = b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-slow: " + b"a" * 100
        stop = threading.Event()

        def trickle() -> None:
            for byte in request:
                if stop.wait(0.2):
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    return

        threading.Thread(target=trickle, daemon=True).start()
        try:
            answer = closed_by_server(conn, timeout=30)
        finally:
            stop.set()
            conn.close()
        assert answer.startswith(b"HTTP/1.1 408 ")
        assert b"not received whole within 1.5s" in answer


def test_a_connection_that_sends_nothing_is_closed() -> None:
    with real_server(http_keep_alive_seconds=1) as address:
        silent = socket.create_connection(address)
        try:
            assert closed_by_server(silent, timeout=30) == b""
        finally:
            silent.close()


def test_oversized_headers_get_431() -> None:
    with real_server(http_max_header_bytes=2048) as address:
        base = f"http://{address[0]}:{address[1]}"
        assert httpx.get(f"{base}/healthz", headers={"x-big": "a" * 1500}).status_code == 200
        response = httpx.get(f"{base}/healthz", headers={"x-big": "a" * 3000})
        assert response.status_code == 431
        assert "request headers over 2048 bytes" in response.text


def test_connections_beyond_the_limit_get_503_not_a_hang() -> None:
    """Idle connections count towards --http-max-connections: past it, requests are answered
    503 at once (uvicorn's limit_concurrency), and served again once connections close."""
    body, _ = filter_body()
    with ExitStack() as stack:
        address = stack.enter_context(
            real_server(http_max_connections=16, http_keep_alive_seconds=300)
        )
        base = f"http://{address[0]}:{address[1]}"
        idle = open_idle(address, 14)
        for conn in idle:
            stack.callback(conn.close)
        statuses = []
        for _ in range(4):  # the 16th connection and beyond are refused
            conn = socket.create_connection(address)
            stack.callback(conn.close)
            conn.sendall(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
            statuses.append(conn.recv(12))
        assert statuses[-1] == b"HTTP/1.1 503" and statuses.count(b"HTTP/1.1 200") <= 2
        assert httpx.post(f"{base}/filter", content=body).status_code == 503
        for conn in idle:
            conn.close()
        for _ in range(100):
            if httpx.post(f"{base}/filter", content=body).status_code == 200:
                break
            time.sleep(0.05)
        else:
            raise AssertionError("still refused after the idle connections closed")


def test_settings_are_named_when_out_of_range() -> None:
    from extender.settings import load_settings
    from shared.errors import ConfigError

    for field, value in (
        ("http_keep_alive_seconds", 0),
        ("http_request_seconds", -1),
        ("http_max_header_bytes", 10),
        ("http_max_connections", 1),
    ):
        with pytest.raises(ConfigError, match=f"--{field.replace('_', '-')}"):
            load_settings(**{field: value})
