"""Watch streams read straight off the connection (shared.kube.streaming), against a real
HTTP/1.1 server on 127.0.0.1."""

import asyncio
import contextlib
import socket
import ssl
from collections.abc import AsyncIterator, Callable

import httpx
import pytest
from kubernetes import client as k8s_client

from shared.errors import APIForbiddenError, APIGoneError
from shared.kube import direct
from shared.kube.config import BearerAuth, KubeEndpoint
from shared.kube.streaming import split_lines, stream_lines
from tests.fakes.kube import served

pytestmark = pytest.mark.anyio

CONNECT = 5.0


def chunks(*pieces: bytes) -> Callable[[httpx.Request], object]:
    async def handler(request: httpx.Request) -> httpx.Response:
        async def stream() -> AsyncIterator[bytes]:
            for piece in pieces:
                yield piece

        return httpx.Response(200, content=stream())

    return handler


@contextlib.asynccontextmanager
async def routed(handler, auth: httpx.Auth | None = None) -> AsyncIterator[direct.Route]:  # type: ignore[no-untyped-def]
    async with (
        served(handler) as url,
        KubeEndpoint(host=url, auth=auth).client(direct=True) as client,
    ):
        route = direct.route(client)
        assert route is not None
        yield route


async def lines_of(route: direct.Route, path: str = "/api/v1/pods") -> list[bytes]:
    seen: list[bytes] = []
    await stream_lines(route, path, {"watch": "1"}, seen.append, connect_timeout=CONNECT)
    return seen


async def test_each_line_is_handed_on_whole_as_it_arrives_until_the_answer_ends() -> None:
    handler = chunks(b'{"a":1}\n{"b"', b":2}\n\n", b'{"c":3}\n{"cut":')
    async with routed(handler) as route:
        # the last line has no newline: an event cut short, dropped
        assert await lines_of(route) == [b'{"a":1}', b'{"b":2}', b'{"c":3}']


async def test_the_request_is_the_one_httpx_would_send_with_the_current_token() -> None:
    seen: list[httpx.Request] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, content=b"")

    def ignored(line: bytes) -> None:
        raise AssertionError(line)

    configuration = k8s_client.Configuration()
    configuration.api_key = {"BearerToken": "first"}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    async with served(handler) as url:
        endpoint = KubeEndpoint(host=f"{url}/prefix", auth=BearerAuth(configuration))
        async with endpoint.client(direct=True) as client:
            route = direct.route(client)
            assert route is not None
            params = {"watch": "1", "labelSelector": "batch=a b", "resourceVersion": "7"}
            await stream_lines(route, "/api/v1/pods", params, ignored, connect_timeout=CONNECT)
            configuration.api_key = {"BearerToken": "rotated"}
            await stream_lines(route, "/api/v1/pods", params, ignored, connect_timeout=CONNECT)
    first, rotated = seen
    assert first.method == "GET"
    assert first.url.path == "/prefix/api/v1/pods"
    assert dict(first.url.params) == params
    assert first.headers["authorization"] == "Bearer first"
    assert rotated.headers["authorization"] == "Bearer rotated"
    assert first.headers["accept"] == "application/json"
    assert first.headers["user-agent"] == "loadsched"
    assert first.headers["accept-encoding"] == "identity"  # lines are read as they come


@pytest.mark.parametrize(("code", "error"), [(410, APIGoneError), (403, APIForbiddenError)])
async def test_an_error_answer_is_raised_as_its_api_error(code: int, error: type) -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        body = {"kind": "Status", "code": code, "reason": "Scripted", "message": "no watch"}
        return httpx.Response(code, json=body)

    async with routed(handler) as route:
        with pytest.raises(error, match="no watch"):
            await lines_of(route)


@contextlib.asynccontextmanager
async def raw_server(
    answer: bytes, closed: asyncio.Event | None = None
) -> AsyncIterator[direct.Route]:
    """A server that answers a request with ``answer``; then, with ``closed``, keeps the
    connection open and sets ``closed`` once the client closes it."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(answer)
        await writer.drain()
        if closed is not None:
            await reader.read()  # until the client closes
            closed.set()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with KubeEndpoint(host=f"http://127.0.0.1:{port}").client(direct=True) as client:
        route = direct.route(client)
        assert route is not None
        yield route
    server.close()
    await server.wait_closed()


OPEN_ENDED = (
    b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1a\r\n{"a":1}\n{"bad":2}\n{"c":3}\n\r\n'
)
"""A watch answer the server has not ended."""


async def test_what_the_handler_raises_ends_the_stream_and_closes_the_connection() -> None:
    def handle(line: bytes) -> None:
        if b"bad" in line:
            raise ValueError("cannot decode")
        handled.append(line)

    handled: list[bytes] = []
    closed = asyncio.Event()
    async with raw_server(OPEN_ENDED, closed) as route:
        with pytest.raises(ValueError, match="cannot decode"):
            await stream_lines(route, "/api/v1/pods", {}, handle, connect_timeout=CONNECT)
        await asyncio.wait_for(closed.wait(), 5)
    assert handled == [b'{"a":1}']


async def test_cancelling_closes_the_connection() -> None:
    handled: list[bytes] = []
    closed = asyncio.Event()
    async with raw_server(OPEN_ENDED, closed) as route:
        task = asyncio.create_task(
            stream_lines(route, "/api/v1/pods", {}, handled.append, connect_timeout=CONNECT)
        )
        while len(handled) < 3:
            await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(closed.wait(), 5)


@pytest.mark.parametrize(
    ("answer", "error", "message"),
    [
        (b"", httpx.RemoteProtocolError, "without an answer"),
        (b"NOT HTTP\r\n\r\n", httpx.RemoteProtocolError, "malformed answer"),
        (
            b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n{"a":1}\n\r\n',
            httpx.ReadError,
            "connection lost during the answer",
        ),
    ],
)
async def test_a_broken_answer_is_an_httpx_transport_error(
    answer: bytes, error: type, message: str
) -> None:
    async with raw_server(answer) as route:
        with pytest.raises(error, match=message):
            await lines_of(route)


async def test_a_server_not_listening_is_a_connect_error() -> None:
    with contextlib.closing(socket.socket()) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with KubeEndpoint(host=f"http://127.0.0.1:{port}").client(direct=True) as client:
        route = direct.route(client)
        assert route is not None
        with pytest.raises(httpx.ConnectError):
            await lines_of(route)


async def test_only_direct_clients_with_a_token_or_none_have_a_route() -> None:
    context = ssl.create_default_context()
    endpoint = KubeEndpoint(host="https://api.example:6443/base", verify=context)
    async with endpoint.client(direct=True) as client:
        route = direct.route(client)
        assert route is not None
        assert route.origin == ("https", "api.example", 6443)
        assert route.tls is context
        assert route.prefix == b"/base"
    async with endpoint.client() as client:
        assert direct.route(client) is None  # not asked for: every request through httpx
    basic = KubeEndpoint(host="https://api.example", auth=httpx.BasicAuth("a", "b"))
    async with basic.client(direct=True) as client:
        assert direct.route(client) is None
    async with httpx.AsyncClient(base_url="https://api.example") as client:
        assert direct.route(client) is None


async def test_a_client_whose_requests_go_through_a_proxy_has_no_route(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "bypassed.example")
    async with KubeEndpoint(host="https://api.example").client(direct=True) as client:
        assert direct.route(client) is None
    async with KubeEndpoint(host="https://bypassed.example").client(direct=True) as client:
        assert direct.route(client) is not None
    # a client given its own transport: httpx sends it through no proxy either
    own = KubeEndpoint(host="https://api.example")
    async with own.client(transport=httpx.AsyncHTTPTransport(), direct=True) as client:
        assert direct.route(client) is not None


@pytest.mark.parametrize(
    ("chunks_in", "lines"),
    [
        ([b'{"a":1}\n{"b":2}\n'], [[b'{"a":1}', b'{"b":2}']]),
        ([b'{"a"', b":1}\n"], [[], [b'{"a":1}']]),
        ([b"\n\n", b"x", b"", b"y\nz"], [[], [], [], [b"xy"]]),
    ],
)
def test_split_lines_keeps_a_line_not_yet_complete(
    chunks_in: list[bytes], lines: list[list[bytes]]
) -> None:
    pending: list[bytes] = []
    assert [split_lines(pending, chunk) for chunk in chunks_in] == lines
    assert b"".join(pending) == (b"z" if chunks_in[-1].endswith(b"z") else b"")
