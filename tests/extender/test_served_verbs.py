"""The scheduler verbs as the real server answers them (uvicorn, the guarded protocol of
:mod:`extender.serving`, the ASGI app): good and bad bodies, what each kube-scheduler release
sends, pipelined requests in order, a body in pieces, a client that does not read, a failed
encoding, the body limit, ``Connection: close``, a bind ahead of a filter, and the metrics."""

from __future__ import annotations

import json
import socket
import threading
import time
from contextlib import ExitStack
from typing import Any

import httpx
import pytest

from extender.scheduling.binding import Binder
from extender.scheduling.routes import SchedulerVerbs
from extender.scheduling.verbs import LoadAwareExtender
from sandbox.capture import fixture_dir, read_fixtures
from tests.fakes.captured import VERSIONS
from tests.fakes.uvicorn_server import filter_body, real_server

PREEMPT = b'{"Pod":{"metadata":{"name":"p","namespace":"d","uid":"u"}},"NodeNameToVictims":{}}'


@pytest.fixture
def through_app(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths the ASGI app's verbs were called for, in order."""
    calls: list[str] = []
    served = SchedulerVerbs.__call__

    async def counted(self: SchedulerVerbs, scope: Any, receive: Any, send: Any) -> None:
        calls.append(scope["path"])
        await served(self, scope, receive, send)

    monkeypatch.setattr(SchedulerVerbs, "__call__", counted)
    return calls


def requests() -> list[tuple[str, bytes]]:
    """Good and bad calls of each verb (made once: the nodes' annotations carry the time)."""
    body, _ = filter_body()
    return [
        ("/filter", body),
        ("/prioritize", body),
        ("/preempt", PREEMPT),
        ("/filter", b'{"Pod":'),  # not JSON
        ("/prioritize", b'{"Nodes":{"items":[]}}'),  # no Pod
        ("/filter", b'{"Pod":{},"Nodes":{"items":[{"metadata":7}]}}'),  # a bad node
        ("/filter", b'{"Pod":{},"NodeNames":["n1"]}'),  # names-only without a node cache
        ("/preempt", b'{"NodeNameToVictims":{}}'),
    ]


def answers(calls: list[tuple[str, bytes]]) -> list[tuple[int, bytes, dict[str, str]]]:
    found = []
    with real_server() as (host, port):
        with httpx.Client(base_url=f"http://{host}:{port}") as client:
            for path, body in calls:
                response = client.post(path, content=body)
                headers = {
                    k: v for k, v in response.headers.items() if k not in ("date", "server-timing")
                }
                assert response.headers["server-timing"].startswith("extender;dur=")
                found.append((response.status_code, response.content, headers))
    return found


def test_good_and_bad_bodies(through_app: list[str]) -> None:
    calls = requests()
    found = answers(calls)
    assert through_app == [path for path, _ in calls]
    assert [status for status, _, _ in found] == [200, 200, 200, 400, 400, 400, 200, 400]
    assert all(headers["content-type"] == "application/json" for _, _, headers in found)
    assert b'"NodeNames":null' in found[6][1] and b"node cache" in found[6][1]


def captured() -> list[tuple[str, str, bytes]]:
    """Every body captured from each release's kube-scheduler: its name (verb-mode), the
    verb's path and the body."""
    calls = []
    for version in VERSIONS:
        for name, body in read_fixtures(fixture_dir(version)).items():
            calls.append((name, f"/{name.split('-')[0]}", json.dumps(body).encode()))
    return calls


def test_the_bodies_of_each_kube_scheduler_release_are_answered() -> None:
    """What each release's kube-scheduler sends, in both node-cache modes (this server keeps
    no node cache: names-only prioritize gets 503, names-only filter an Error field)."""
    bodies = captured()
    assert len(bodies) >= 4 * 6
    found = answers([(path, body) for _, path, body in bodies])
    for (name, _, _), (status, _, _) in zip(bodies, found, strict=True):
        assert status == (503 if name == "prioritize-names" else 200), name


def raw_exchange(address: tuple[str, int], data: bytes, answers: int) -> list[bytes]:
    """Send ``data`` in one write; read ``answers`` HTTP answers."""
    with socket.create_connection(address, timeout=10) as conn:
        conn.sendall(data)
        return read_answers(conn, answers)


def read_answers(conn: socket.socket, answers: int) -> list[bytes]:
    """The next ``answers`` HTTP answers on ``conn`` (Content-Length framed)."""
    received, found = b"", list[bytes]()
    while len(found) < answers:
        head_end = received.find(b"\r\n\r\n")
        if head_end >= 0 and received.startswith(b"HTTP/1.1 1"):  # 100 Continue
            received = received[head_end + 4 :]
            continue
        if head_end >= 0:
            head = received[:head_end].lower()
            length = int(head.split(b"content-length: ")[1].split(b"\r\n")[0])
            end = head_end + 4 + length
            if len(received) >= end:
                found.append(received[:end])
                received = received[end:]
                continue
        chunk = conn.recv(65536)
        assert chunk, f"closed after {len(found)} answers"
        received += chunk
    return found


def post(path: bytes, body: bytes, *headers: bytes) -> bytes:
    return b"POST %s HTTP/1.1\r\nhost: x\r\ncontent-length: %d\r\n%s\r\n%s" % (
        path,
        len(body),
        b"".join(h + b"\r\n" for h in headers),
        body,
    )


def test_pipelined_requests_are_answered_in_order(through_app: list[str]) -> None:
    body, _ = filter_body()
    verbs = post(b"/preempt", PREEMPT) + post(b"/prioritize", body) + post(b"/preempt", b"{")
    with real_server() as address:
        health, preempt, prioritize, bad = raw_exchange(
            address, b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n" + verbs, 4
        )
    assert health.startswith(b"HTTP/1.1 200") and health.endswith(b"ok")
    assert through_app == ["/preempt", "/prioritize", "/preempt"]
    assert preempt.startswith(b"HTTP/1.1 200") and b'"NodeNameToMetaVictims"' in preempt
    assert prioritize.startswith(b"HTTP/1.1 200") and b'"Host"' in prioritize
    assert bad.startswith(b"HTTP/1.1 400")


def test_a_body_in_pieces_is_answered_once_whole(through_app: list[str]) -> None:
    body, _ = filter_body(count=400)
    request = post(b"/filter", body)
    cut = len(request) - len(body) // 2
    with real_server() as (host, port):
        with socket.create_connection((host, port), timeout=10) as conn:
            conn.sendall(request[:cut])
            time.sleep(0.2)  # the first piece is parsed on its own
            conn.sendall(request[cut:])
            (answer,) = read_answers(conn, 1)
        expected = httpx.post(f"http://{host}:{port}/filter", content=body)
    assert answer.startswith(b"HTTP/1.1 200")
    assert answer.split(b"\r\n\r\n", 1)[1] == expected.content
    assert through_app == ["/filter", "/filter"]


def test_a_client_that_does_not_read_its_answers_is_not_read_either() -> None:
    """Pipelined calls whose answers are never read: once the answers fill the connection,
    the server stops reading the requests (the app waits to write, uvicorn pauses reading),
    rather than piling answers up in memory: the client's sends come to block."""
    body, _ = filter_body(count=100)  # about 1 MB each way
    request = memoryview(post(b"/filter", body))
    total = 100 * len(request)  # more than the kernel's socket buffers can hold
    with real_server() as address:
        with socket.socket() as conn:
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 16)
            conn.connect(address)
            conn.setblocking(False)
            sent, blocked_since = 0, None
            while sent < total:
                try:
                    at = sent % len(request)
                    sent += conn.send(request[at : at + (1 << 16)])
                    blocked_since = None
                except BlockingIOError:
                    now = time.monotonic()
                    blocked_since = blocked_since or now
                    if now - blocked_since > 3:  # the server has stopped reading
                        break
                    time.sleep(0.01)
    assert sent < total, "the server read every request while answers piled up"


def test_an_answer_that_cannot_be_encoded_is_a_500_and_logged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(LoadAwareExtender, "preempt", lambda self, args: object())
    with real_server() as address:
        (answer,) = raw_exchange(address, post(b"/preempt", PREEMPT), 1)
    assert answer.startswith(b"HTTP/1.1 500")
    assert answer.endswith(b"""{"detail":"internal error in preempt: see the extender's log"}""")
    (record,) = [r for r in caplog.records if "internal error" in r.getMessage()]
    assert record.exc_info is not None  # with the traceback


def test_a_bind_received_before_a_filter_on_another_connection_is_handled_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """kube-scheduler binds a pod (bindVerb) while it goes on to filter the next one, on
    another connection. The bind counts its pod on its node first thing; a filter call
    received after it must be decided after that, as when both went through the app."""
    events: list[str] = []
    bind, decide, preempt = Binder.bind, LoadAwareExtender.filter, LoadAwareExtender.preempt

    async def binding(self: Binder, args: Any) -> Any:
        events.append("bind")
        return await bind(self, args)

    def filtering(self: LoadAwareExtender, pod: Any, args: Any) -> Any:
        events.append("filter")
        return decide(self, pod, args)

    held_up = threading.Event()

    def holding(self: LoadAwareExtender, args: Any) -> Any:
        held_up.set()
        time.sleep(0.5)  # holds the event loop while the other two calls arrive
        return preempt(self, args)

    monkeypatch.setattr(Binder, "bind", binding)
    monkeypatch.setattr(LoadAwareExtender, "filter", filtering)
    monkeypatch.setattr(LoadAwareExtender, "preempt", holding)
    body, _ = filter_body()
    binding_body = b'{"PodName":"p","PodNamespace":"d","PodUID":"u","Node":"node-00000"}'
    with real_server() as address, ExitStack() as stack:
        held, binder, scheduler = (
            stack.enter_context(socket.create_connection(address, timeout=10)) for _ in range(3)
        )
        time.sleep(0.2)  # all three accepted
        held.sendall(post(b"/preempt", PREEMPT))
        assert held_up.wait(timeout=10)
        binder.sendall(post(b"/bind", binding_body))
        time.sleep(0.05)
        scheduler.sendall(post(b"/filter", body))
        answers = [read_answers(conn, 1)[0] for conn in (held, binder, scheduler)]
    assert all(answer.startswith(b"HTTP/1.1 200") for answer in answers)
    assert events == ["bind", "filter"]


def test_over_the_body_limit_the_app_answers_413(through_app: list[str]) -> None:
    with real_server(max_body_bytes=len(PREEMPT) - 1) as address:
        (answer,) = raw_exchange(address, post(b"/preempt", PREEMPT), 1)
    assert answer.startswith(b"HTTP/1.1 413")
    assert through_app == ["/preempt"]


def test_connection_close_is_honoured(through_app: list[str]) -> None:
    with real_server() as address:
        with socket.create_connection(address, timeout=10) as conn:
            conn.sendall(post(b"/preempt", PREEMPT, b"connection: close"))
            received = b""
            while chunk := conn.recv(65536):  # until the server closes it
                received += chunk
    assert received.startswith(b"HTTP/1.1 200")
    assert b"\r\nconnection: close\r\n" in received.lower()
    assert through_app == ["/preempt"]


def test_the_metrics_count_every_answer() -> None:
    body, _ = filter_body()
    with real_server() as (host, port):
        with httpx.Client(base_url=f"http://{host}:{port}") as client:
            client.post("/filter", content=body)
            client.post("/filter", content=b"[")
            client.post("/prioritize", content=body)
            text = client.get("/metrics").text
    assert 'loadsched_extender_responses_total{code="200",verb="filter"} 1.0' in text
    assert 'loadsched_extender_responses_total{code="400",verb="filter"} 1.0' in text
    assert 'loadsched_extender_responses_total{code="200",verb="prioritize"} 1.0' in text
    assert 'loadsched_extender_decode_errors_total{verb="filter"} 1.0' in text
    assert 'loadsched_extender_request_duration_seconds_count{verb="filter"} 2.0' in text
