"""The bind verb's Binding, against a real HTTP/1.1 server on 127.0.0.1: the request sent, at
most BINDS_AT_ONCE at a time, errors returned to kube-scheduler, names from the request
quoted."""

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import httpx
import pytest

from extender.scheduling.binding import BINDS_AT_ONCE, Binder
from extender.scheduling.metrics import ExtenderMetrics
from extender.scheduling.placements import PlacementIndex
from extender.scheduling.wire import BindingArgs
from shared.kube.config import KEEPALIVE_EXPIRY, KubeEndpoint
from shared.kube.retrying import RetryPolicy
from shared.load_model import LoadRules
from shared.pods import POD_DECODER, Pod
from tests import payloads
from tests.fakes.clock import NOW
from tests.fakes.estimation_cluster import the_policy
from tests.fakes.raw_server import OK, PoolClock, Received, Serve, Started

pytestmark = pytest.mark.anyio

STATUS = b'{"kind":"Status","status":"Failure","message":"pod p1 is already assigned","code":409}'
CONFLICT = (
    b"HTTP/1.1 409 Conflict\r\nContent-Type: application/json\r\n"
    b"Content-Length: %d\r\n\r\n%s" % (len(STATUS), STATUS)
)


def args(name: str = "p1") -> BindingArgs:
    return BindingArgs(PodName=name, PodNamespace="ns", PodUID=f"uid-{name}", Node="n1")


async def until(condition: Callable[[], bool]) -> None:
    """Waits for ``condition``: a loaded machine may take long to connect (never a failure)."""
    async with asyncio.timeout(30):
        while not condition():
            await asyncio.sleep(0.01)


@asynccontextmanager
async def attached(started: Started, attempts: int = 1) -> AsyncIterator[Binder]:
    """A binder attached to a client of ``started``'s server, detached at the end."""
    binder = Binder(None)
    async with started.endpoint.client(max_connections=BINDS_AT_ONCE) as client:
        binder.attach(client, RetryPolicy(attempts=attempts))
        try:
            yield binder
        finally:
            binder.detach()


async def test_a_binding_is_written_whole_to_the_api_server(serve: Serve) -> None:
    started = await serve(lambda r: OK)
    async with attached(started) as binder:
        result = await binder.bind(args())
    assert result.Error == ""
    [sent] = started.server.received
    lines = sent.head.split(b"\r\n")
    assert lines[0] == b"POST /api/v1/namespaces/ns/pods/p1/binding HTTP/1.1"
    assert b"Content-Type: application/json" in lines
    assert json.loads(sent.body) == {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p1", "namespace": "ns", "uid": "uid-p1"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"},
    }


async def test_a_burst_of_bindings_is_written_a_few_at_a_time_over_kept_connections(
    serve: Serve,
) -> None:
    """Three times BINDS_AT_ONCE bindings at once, none answered: only BINDS_AT_ONCE are sent,
    over as many connections; the others wait their turn."""
    in_flight, most = 0, 0

    def answer(received: Received) -> bytes | None:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        return None  # never answered: the writers after these wait their turn

    started = await serve(answer)
    async with attached(started) as binder:
        binds = [asyncio.create_task(binder.bind(args(f"p{i}"))) for i in range(3 * BINDS_AT_ONCE)]
        await until(lambda: len(started.server.received) >= BINDS_AT_ONCE)
        await asyncio.sleep(0.2)  # time for any writer past the limit to be sent
        assert most == BINDS_AT_ONCE and len(started.server.received) == BINDS_AT_ONCE
        for task in binds:
            task.cancel()
        await asyncio.gather(*binds, return_exceptions=True)
    assert started.server.connections == BINDS_AT_ONCE


async def test_bindings_reuse_the_connections_kept(serve: Serve) -> None:
    started = await serve(lambda r: OK)
    async with attached(started) as binder:
        for round_ in range(3):
            results = await asyncio.gather(
                *(binder.bind(args(f"p{round_}-{i}")) for i in range(BINDS_AT_ONCE))
            )
            assert all(r.Error == "" for r in results)
    assert len(started.server.received) == 3 * BINDS_AT_ONCE
    assert started.server.connections == BINDS_AT_ONCE


async def test_bindings_after_a_quiet_spell_reuse_the_connections_kept(
    serve: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A burst a minute after the last is written over the connections that one left, not
    over new ones (a TLS handshake each); past KEEPALIVE_EXPIRY they are closed, before the
    API server closes them (90 s idle), and new ones opened."""
    clock = PoolClock(monkeypatch)
    started = await serve(lambda r: OK)
    async with attached(started) as binder:

        async def burst(tag: str) -> None:
            results = await asyncio.gather(*(binder.bind(args(f"{tag}{i}")) for i in range(4)))
            assert all(r.Error == "" for r in results)

        await burst("a")
        clock.idle(KEEPALIVE_EXPIRY - 1)
        await burst("b")
        assert started.server.connections == 4
        clock.idle(KEEPALIVE_EXPIRY + 1)
        await burst("c")
    assert started.server.connections == 8
    assert len(started.server.received) == 12


async def test_a_refused_binding_is_returned_to_kube_scheduler(serve: Serve) -> None:
    started = await serve(lambda r: CONFLICT)
    async with attached(started, attempts=3) as binder:
        result = await binder.bind(args())
    assert result.Error.startswith("binding pod/ns/p1 to n1: ")
    assert "already assigned" in result.Error
    assert len(started.server.received) == 1  # a POST the server ran is not sent again


async def test_names_from_the_request_are_quoted_into_the_path(serve: Serve) -> None:
    """A name with a line break cannot add a header to the request."""
    started = await serve(lambda r: OK)
    async with attached(started) as binder:
        await binder.bind(args("p1 HTTP/1.1\r\nX-Injected: yes\r\n"))
    [sent] = started.server.received
    assert b"X-Injected" not in sent.head.split(b"\r\n\r\n")[0].split(b"\r\n")[1:]
    assert sent.head.startswith(
        b"POST /api/v1/namespaces/ns/pods/p1%20HTTP%2F1.1%0D%0AX-Injected%3A%20yes%0D%0A/binding "
    )


async def test_after_detach_a_binding_is_refused_unsent(serve: Serve) -> None:
    started = await serve(lambda r: OK)
    async with attached(started) as binder:
        binder.detach()
        result = await binder.bind(args())
    assert result.Error == "loadsched extender has no cluster to bind in"
    assert started.server.received == []


async def test_a_binding_waiting_its_turn_when_the_service_stops_ends_where_it_started() -> None:
    """Detached while BINDS_AT_ONCE bindings are under way and one more waits its turn: each
    is written to the cluster it started on (through httpx: a fake transport)."""
    release = asyncio.Event()
    seen: list[str] = []

    async def api(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        await release.wait()
        return httpx.Response(201, json={"kind": "Status", "status": "Success"})

    binder = Binder(None)
    endpoint = KubeEndpoint(host="https://api.test")
    async with endpoint.client(transport=httpx.MockTransport(api)) as client:
        binder.attach(client, RetryPolicy(attempts=1))
        binds = [asyncio.create_task(binder.bind(args(f"p{i}"))) for i in range(BINDS_AT_ONCE + 1)]
        await until(lambda: len(seen) >= BINDS_AT_ONCE)
        await asyncio.sleep(0.05)  # time for the one past the limit to be sent, if it could be
        assert len(seen) == BINDS_AT_ONCE  # one waits its turn
        binder.detach()
        release.set()
        results = await asyncio.gather(*binds)
    assert [r.Error for r in results] == [""] * (BINDS_AT_ONCE + 1)
    assert len(seen) == BINDS_AT_ONCE + 1


async def test_each_binding_counts_the_pods_decided_before_it_arrived(serve: Serve) -> None:
    """a, b and c are filtered, then a is asked to prioritize (no decision) and bound: b and c
    were decided without a counted. b is bound next (c after it), then d is filtered, and c,
    bound last, was overtaken by d alone."""
    rules = LoadRules.from_policy(the_policy(estimation={"enabled": True}))
    metrics = ExtenderMetrics()
    binder = Binder(
        PlacementIndex(rules, clock=lambda: NOW, on_change=lambda node: None),
        metrics.filters_before_binding,
    )
    pods = {n: POD_DECODER.decode(payloads.encode(payloads.pod(n))) for n in "abcd"}
    started = await serve(lambda r: OK)
    async with started.endpoint.client(max_connections=BINDS_AT_ONCE) as client:
        binder.attach(client, RetryPolicy(attempts=1))
        for name in "abc":
            binder.remember(pods[name], filtered=True)
        binder.remember(pods["a"])
        for name in "ab":
            await binder.bind(bind_args(pods[name]))
        binder.remember(pods["d"], filtered=True)
        await binder.bind(bind_args(pods["c"]))
        binder.detach()

    def at_most(n: int) -> float | None:
        return metrics.registry.get_sample_value(
            "loadsched_extender_filters_before_binding_bucket", {"le": f"{float(n)}"}
        )

    assert [at_most(n) for n in (0, 1, 2)] == [0.0, 2.0, 3.0]  # a: 2, b: 1, c: 1


def bind_args(pod: Pod) -> BindingArgs:
    meta = pod.metadata
    return BindingArgs(PodName=meta.name, PodNamespace=meta.namespace, PodUID=meta.uid, Node="n1")
