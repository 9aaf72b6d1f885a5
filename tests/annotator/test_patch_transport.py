"""PatchTransport against a real HTTP/1.1 server on 127.0.0.1 (a socket, not a mock)."""

import asyncio
import gzip
import json

import httpx
import pytest

from annotator.patching import NodePatcher, PatchTransport, kube_client
from shared.errors import APIServerError, APIUnauthorizedError, APIUnreachableError
from shared.kube import direct
from shared.kube.config import KEEPALIVE_EXPIRY, KubeEndpoint
from shared.kube.retrying import RetryPolicy
from tests.fakes.raw_server import OK, PoolClock, Received, Serve

pytestmark = pytest.mark.anyio


async def test_patch_is_sent_whole_and_its_answer_returned_over_one_kept_connection(
    serve: Serve,
) -> None:
    started = await serve(lambda r: OK)
    async with kube_client(started.endpoint, max_connections=4) as client:
        for name in ("n1", "n2", "n3"):
            response = await client.patch(
                f"/api/v1/nodes/{name}",
                content=b'{"metadata":{"annotations":{"a":"1"}}}',
                headers={"Content-Type": "application/merge-patch+json"},
            )
            assert response.status_code == 200
            assert response.json() == {"ok": True}
            assert response.headers["content-type"] == "application/json"
    heads = [r.head for r in started.server.received]
    assert [h.split(b"\r\n", 1)[0] for h in heads] == [
        b"PATCH /api/v1/nodes/n1 HTTP/1.1",
        b"PATCH /api/v1/nodes/n2 HTTP/1.1",
        b"PATCH /api/v1/nodes/n3 HTTP/1.1",
    ]
    assert b"content-type: application/merge-patch+json" in heads[0].lower()
    assert b"user-agent: loadsched" in heads[0].lower()
    assert {r.body for r in started.server.received} == {b'{"metadata":{"annotations":{"a":"1"}}}'}
    assert started.server.connections == 1


async def test_concurrent_patches_each_take_their_own_connection(serve: Serve) -> None:
    started = await serve(lambda r: OK)
    async with kube_client(started.endpoint, max_connections=4) as client:
        answers = await asyncio.gather(
            *(client.patch(f"/api/v1/nodes/n{i}", content=b"{}") for i in range(4))
        )
        assert [a.status_code for a in answers] == [200] * 4
        await asyncio.gather(
            *(client.patch(f"/api/v1/nodes/n{i}", content=b"{}") for i in range(4))
        )
    assert started.server.connections == 4
    assert len(started.server.received) == 8


async def test_a_connection_idle_under_the_keepalive_expiry_is_reused(
    serve: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A patch a minute after the last goes over the same connection, and so does any other
    request (httpx's transport, the fallback); past KEEPALIVE_EXPIRY each is closed and a new
    one opened."""
    clock = PoolClock(monkeypatch)
    started = await serve(lambda r: OK)
    async with kube_client(started.endpoint, max_connections=4) as client:
        for pause in (0.0, KEEPALIVE_EXPIRY - 1, KEEPALIVE_EXPIRY + 1):
            clock.idle(pause)
            patched = await client.patch("/api/v1/nodes/n1", content=b"{}")
            got = await client.get("/api/v1/nodes/n1")
            assert patched.status_code == got.status_code == 200
    methods = [(r.head.split(b" ", 1)[0], r.connection) for r in started.server.received]
    assert methods == [
        (b"PATCH", 1),
        (b"GET", 2),
        (b"PATCH", 1),
        (b"GET", 2),
        (b"PATCH", 3),
        (b"GET", 4),
    ]


async def test_other_methods_go_to_the_fallback(serve: Serve) -> None:
    started = await serve(lambda r: OK)
    seen: list[str] = []

    def fallback(request: httpx.Request) -> httpx.Response:
        seen.append(request.method)
        return httpx.Response(200, json={"items": []})

    transport = PatchTransport(
        started.endpoint, max_connections=2, fallback=httpx.MockTransport(fallback)
    )
    async with started.endpoint.client(transport=transport) as client:
        assert (await client.get("/api/v1/nodes")).json() == {"items": []}
        await client.put("/api/v1/nodes/n1", content=b"{}")
        await client.patch("/api/v1/nodes/n1", content=b"{}")
    assert seen == ["GET", "PUT"]
    assert len(started.server.received) == 1


async def test_chunked_and_gzipped_answers_are_decoded(serve: Serve) -> None:
    body = gzip.compress(json.dumps({"metadata": {"name": "n1"}}).encode())
    chunks = b"".join(
        b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:10], body[10:]) if part
    )
    answer = (
        b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n"
        + chunks
        + b"0\r\n\r\n"
    )
    started = await serve(lambda r: answer)
    async with kube_client(started.endpoint, max_connections=1) as client:
        for _ in range(2):
            response = await client.patch("/api/v1/nodes/n1", content=b"{}")
            assert response.json() == {"metadata": {"name": "n1"}}
    assert started.server.connections == 1


async def test_a_connection_the_server_closes_is_not_reused(serve: Serve) -> None:
    closing = OK.replace(b"Content-Length", b"Connection: close\r\nContent-Length")
    started = await serve(lambda r: closing)
    async with kube_client(started.endpoint, max_connections=1) as client:
        for _ in range(3):
            assert (await client.patch("/api/v1/nodes/n1", content=b"{}")).status_code == 200
    assert started.server.connections == 3


async def test_a_dropped_patch_is_retried_on_a_new_connection(serve: Serve) -> None:
    # the first request on every connection is dropped unanswered, the second answered
    def answer(received: Received) -> bytes:
        return b"" if received.connection == 1 else OK

    started = await serve(answer)
    async with kube_client(started.endpoint, max_connections=1) as client:
        patcher = NodePatcher(client, retry=RetryPolicy(attempts=3, backoff=0.001))
        assert await patcher.patch_annotations("n1", {"cpu": "0.10000,2025-01-01T00:00:00Z"})
    assert [r.connection for r in started.server.received] == [1, 2]
    assert started.server.received[1].body == (
        b'{"metadata":{"annotations":{"cpu":"0.10000,2025-01-01T00:00:00Z"}}}'
    )


async def test_node_patcher_answers_false_for_a_deleted_node(serve: Serve) -> None:
    gone = (
        b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
    )
    started = await serve(lambda r: gone)
    async with kube_client(started.endpoint, max_connections=1) as client:
        assert not await NodePatcher(client).patch_annotations("gone", {"cpu": None})
    assert started.server.received[0].body == b'{"metadata":{"annotations":{"cpu":null}}}'


async def test_no_answer_within_the_read_timeout(serve: Serve) -> None:
    started = await serve(lambda r: None)
    async with kube_client(started.endpoint, max_connections=1) as client:
        with pytest.raises(httpx.ReadTimeout):
            await client.patch("/api/v1/nodes/n1", content=b"{}", timeout=0.05)


async def test_a_malformed_answer_is_a_protocol_error(serve: Serve) -> None:
    started = await serve(lambda r: b"HTTP/1.1 2x0 what\r\n\r\n")
    async with kube_client(started.endpoint, max_connections=1) as client:
        with pytest.raises(httpx.RemoteProtocolError, match="malformed"):
            await client.patch("/api/v1/nodes/n1", content=b"{}")


async def test_unreachable_server_is_a_connect_error_before_sending() -> None:
    listening = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = listening.sockets[0].getsockname()[1]
    listening.close()
    await listening.wait_closed()
    endpoint = KubeEndpoint(host=f"http://127.0.0.1:{port}")
    async with kube_client(endpoint, max_connections=1) as client:
        with pytest.raises(httpx.ConnectError):
            await client.patch("/api/v1/nodes/n1", content=b"{}")
        patcher = NodePatcher(client, retry=RetryPolicy(attempts=1))
        with pytest.raises(APIUnreachableError) as caught:
            await patcher.patch_annotations("n1", {"cpu": None})
        assert not caught.value.sent


async def test_a_header_with_a_line_break_is_refused_unsent(serve: Serve) -> None:
    started = await serve(lambda r: OK)
    async with kube_client(started.endpoint, max_connections=1) as client:
        with pytest.raises(httpx.LocalProtocolError, match="line breaks"):
            await client.patch("/api/v1/nodes/n1", content=b"{}", headers={"X-A": "1\r\nX-B: 2"})
    assert started.server.received == []


async def test_cookies_the_server_sets_are_not_sent_back(serve: Serve) -> None:
    setting = OK.replace(b"Content-Length", b"Set-Cookie: session=abc; Path=/\r\nContent-Length")
    started = await serve(lambda r: setting)
    async with kube_client(started.endpoint, max_connections=1) as client:
        for _ in range(2):
            await client.patch("/api/v1/nodes/n1", content=b"{}")
        assert len(client.cookies) == 0  # the answers were not read for cookies at all
    assert all(b"cookie" not in r.head.lower() for r in started.server.received)


def _headers(head: bytes) -> dict[bytes, bytes]:
    lines = head.split(b"\r\n")[1:]
    pairs = (line.split(b":", 1) for line in lines if line)
    return {name.strip().lower(): value.strip() for name, value in pairs}


async def test_node_patcher_writes_the_request_httpx_would_with_the_current_token(
    serve: Serve,
) -> None:
    from kubernetes import client as k8s_client

    from shared.kube.config import BearerAuth

    started = await serve(lambda r: OK)
    configuration = k8s_client.Configuration()
    configuration.api_key = {"BearerToken": "first"}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    endpoint = KubeEndpoint(host=f"{started.endpoint.host}/prefix", auth=BearerAuth(configuration))
    body = b'{"metadata":{"annotations":{"cpu":"0.1"}}}'
    async with kube_client(endpoint, max_connections=1) as client:
        patcher = NodePatcher(client)
        assert await patcher.patch_annotations("n1.example", {"cpu": "0.1"})
        await client.patch(
            "/api/v1/nodes/n1.example",
            content=body,
            headers={"Content-Type": "application/merge-patch+json"},
        )
        configuration.api_key = {"BearerToken": "rotated"}
        assert await patcher.patch_annotations("n1.example", {"cpu": "0.1"})
    direct, through_httpx, rotated = started.server.received
    assert direct.head.split(b"\r\n", 1)[0] == b"PATCH /prefix/api/v1/nodes/n1.example HTTP/1.1"
    assert direct.head.split(b"\r\n", 1)[0] == through_httpx.head.split(b"\r\n", 1)[0]
    expected = _headers(through_httpx.head)
    # httpx offers compressed answers; the direct path reads none of a 2xx answer's body
    for name in (b"accept-encoding", b"connection"):
        expected.pop(name, None)
    assert _headers(direct.head) == expected
    assert expected[b"authorization"] == b"Bearer first"
    assert _headers(rotated.head)[b"authorization"] == b"Bearer rotated"
    assert direct.body == through_httpx.body == body
    assert started.server.connections == 1


def _status(code: int, reason: str, message: str) -> bytes:
    body = json.dumps({"kind": "Status", "code": code, "reason": reason, "message": message})
    return (
        f"HTTP/1.1 {code} {reason}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n{body}"
    ).encode()


async def test_node_patcher_retries_a_conflict_and_a_server_error(serve: Serve) -> None:
    answers = iter([_status(409, "Conflict", "changed"), _status(500, "InternalError", "x"), OK])
    started = await serve(lambda r: next(answers))
    async with kube_client(started.endpoint, max_connections=1) as client:
        patcher = NodePatcher(client, retry=RetryPolicy(attempts=3, backoff=0.001))
        assert await patcher.patch_annotations("n1", {"cpu": None})
    assert len(started.server.received) == 3


@pytest.mark.parametrize(
    ("answer", "error", "sent"),
    [
        (_status(401, "Unauthorized", "token expired"), APIUnauthorizedError, 1),  # not retried
        (_status(503, "ServiceUnavailable", "etcd is down"), APIServerError, 3),  # all attempts
    ],
)
async def test_node_patcher_raises_the_api_error_once_it_may_not_retry(
    serve: Serve, answer: bytes, error: type[Exception], sent: int
) -> None:
    started = await serve(lambda r: answer)
    async with kube_client(started.endpoint, max_connections=1) as client:
        patcher = NodePatcher(client, retry=RetryPolicy(attempts=3, backoff=0.001))
        with pytest.raises(error, match=json.loads(answer.split(b"\r\n\r\n")[1])["message"]):
            await patcher.patch_annotations("n1", {"cpu": None})
    assert len(started.server.received) == sent


async def test_through_a_proxy_every_request_goes_through_httpx(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A proxy named in the environment applies to the API server: no PatchTransport, so the
    patches, the watches and the lease all go through httpx, which honours it."""
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    endpoint = KubeEndpoint(host="https://api.example")
    async with kube_client(endpoint, max_connections=2) as client:
        assert direct.route(client) is None
        assert not isinstance(client._transport, PatchTransport)
    monkeypatch.setenv("NO_PROXY", "api.example")
    async with kube_client(endpoint, max_connections=2) as client:
        assert direct.route(client) is not None
