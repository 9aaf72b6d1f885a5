import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import httpx
import msgspec
import pytest

from shared.kube.config import WATCH_GRACE, KubeEndpoint, watch_timeout
from shared.kube.watching import Backoff, Reflector, event_lines, split_lines
from tests.fakes.kube import FakeCollection, event, gone, obj, served

pytestmark = pytest.mark.anyio


class Item(msgspec.Struct):
    class Meta(msgspec.Struct):
        name: str
        resourceVersion: str = ""

    metadata: Meta


class DictStore:
    def __init__(self) -> None:
        self.items: dict[str, str] = {}
        self.replaced = 0

    def replace(self, items: Sequence[Item]) -> None:
        self.items = {i.metadata.name: i.metadata.resourceVersion for i in items}
        self.replaced += 1

    def apply(self, kind: str, item: Item) -> None:
        if kind == "DELETED":
            self.items.pop(item.metadata.name, None)
        else:
            self.items[item.metadata.name] = item.metadata.resourceVersion


@pytest.fixture(params=["mock", "socket"])
def over(request: pytest.FixtureRequest) -> str:
    """Each reflector test runs twice: behind httpx's mock transport and behind a real socket
    (chunked answers, connections dropped mid-answer)."""
    return str(request.param)


@contextlib.asynccontextmanager
async def client_of(fake: FakeCollection, over: str) -> AsyncIterator[httpx.AsyncClient]:
    if over == "mock":
        async with httpx.AsyncClient(base_url="https://api", transport=fake.transport()) as c:
            yield c
        return
    async with served(fake.handler) as url, KubeEndpoint(host=url).client() as client:
        yield client


async def run_until(
    fake: FakeCollection,
    store: DictStore,
    done: Callable[[], bool],
    over: str,
    page_size: int = 2,
    **options: Any,
) -> Reflector[Item]:
    decoder = msgspec.json.Decoder(Item)
    async with client_of(fake, over) as client:
        reflector = Reflector[Item](
            client=client,
            path="/api/v1/nodes",
            decode=decoder.decode,
            store=store,
            name="nodes",
            page_size=page_size,
            backoff=Backoff(base=0.0, cap=0.0),
            **options,
        )
        task = asyncio.create_task(reflector.run())
        deadline = asyncio.get_running_loop().time() + 10
        while not done() and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.002)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    return reflector


async def test_lists_in_pages_then_watches_from_the_list_version(over: str) -> None:
    fake = FakeCollection(
        lists=[(10, [obj("n1", 1), obj("n2", 2), obj("n3", 3)])],
        watches=[
            [
                event("ADDED", obj("n4", 11)),
                event("MODIFIED", obj("n1", 12)),
                event("DELETED", obj("n2", 13)),
            ]
        ],
    )
    store = DictStore()
    reflector = await run_until(fake, store, lambda: len(fake.watch_versions()) >= 2, over)
    assert store.items == {"n1": "12", "n3": "3", "n4": "11"}
    assert reflector.synced.is_set()
    # two pages (limit 2), continue token passed on
    lists = [r for r in fake.requests if not r.url.params.get("watch")]
    assert [r.url.params.get("continue") for r in lists] == [None, "2"]
    # the watch resumes from the last event's version, not from the list's
    assert fake.watch_versions() == ["10", "13"]
    assert all(
        r.url.params["allowWatchBookmarks"] == "true"
        for r in fake.requests
        if r.url.params.get("watch")
    )


async def test_bookmark_advances_the_version_without_touching_the_store(over: str) -> None:
    fake = FakeCollection(
        lists=[(10, [obj("n1", 1)])],
        watches=[[{"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "50"}}}]],
    )
    store = DictStore()
    await run_until(fake, store, lambda: len(fake.watch_versions()) >= 2, over)
    assert store.items == {"n1": "1"}
    assert fake.watch_versions() == ["10", "50"]


async def test_gone_relists_and_replaces(over: str) -> None:
    fake = FakeCollection(
        lists=[(10, [obj("n1", 1), obj("n2", 2)]), (30, [obj("n1", 25)])],
        watches=[[event("ADDED", obj("n3", 11)), gone()]],
    )
    store = DictStore()
    reflector = await run_until(fake, store, lambda: len(fake.watch_versions()) >= 2, over)
    assert store.items == {"n1": "25"}
    assert store.replaced == 2
    assert reflector.relists == 1
    assert fake.watch_versions() == ["10", "30"]


async def test_disconnect_resumes_the_watch_without_relisting(over: str) -> None:
    fake = FakeCollection(
        lists=[(10, [obj("n1", 1)])],
        watches=[[event("ADDED", obj("n2", 11)), httpx.ReadError("connection reset")]],
    )
    store = DictStore()
    await run_until(fake, store, lambda: len(fake.watch_versions()) >= 2, over)
    assert store.items == {"n1": "1", "n2": "11"}
    assert fake.list_count() == 1
    assert fake.watch_versions() == ["10", "11"]


async def test_a_watch_silent_past_its_timeout_is_dropped_and_resumed() -> None:
    """A connection that died without closing: not a byte after the first event. A read
    silent past the watch's read timeout (0.1 s here) fails it, and it is resumed from the
    last event, without a list. (Over a socket: the read timeout is the connection's.)"""
    dead = asyncio.Event()  # never set
    fake = FakeCollection(
        lists=[(10, [obj("n1", 1)])],
        watches=[[event("ADDED", obj("n2", 11)), dead], [event("ADDED", obj("n3", 12))]],
    )
    store = DictStore()
    await run_until(
        fake,
        store,
        lambda: "n3" in store.items,
        "socket",
        watch_seconds=1,
        watch_timeouts=httpx.Timeout(None, connect=5.0, read=0.1),
    )
    assert store.items == {"n1": "1", "n2": "11", "n3": "12"}
    assert fake.list_count() == 1
    assert fake.watch_versions()[:2] == ["10", "11"]
    watches = [r for r in fake.requests if r.url.params.get("watch")]
    assert {r.url.params["timeoutSeconds"] for r in watches} == {"1"}


@pytest.mark.parametrize(
    ("timeout_seconds", "grace", "read"), [(300, WATCH_GRACE, 330.0), (60, 5.0, 65.0)]
)
def test_a_watch_may_stay_silent_until_the_server_must_have_ended_it(
    timeout_seconds: int, grace: float, read: float
) -> None:
    timeouts = watch_timeout(timeout_seconds, grace)
    assert (timeouts.read, timeouts.connect, timeouts.pool, timeouts.write) == (
        read,
        5.0,
        None,
        None,
    )


def test_a_watch_asks_for_a_timeout_the_server_honours() -> None:
    with pytest.raises(ValueError, match="watch_seconds must be at least 1, not 0"):
        Reflector[Item](
            client=httpx.AsyncClient(),
            path="/api/v1/nodes",
            decode=msgspec.json.Decoder(Item).decode,
            store=DictStore(),
            name="nodes",
            watch_seconds=0,
        )


async def test_failed_list_is_retried_not_dropped(over: str) -> None:
    fake = FakeCollection(lists=[(10, [obj("n1", 1)])], list_status=[500, 429, 403])
    store = DictStore()
    reflector = await run_until(fake, store, lambda: store.replaced >= 1, over)
    assert store.items == {"n1": "1"}
    assert reflector.synced.is_set()
    assert fake.list_count() == 4


async def _lines(chunks: list[bytes]) -> list[bytes]:
    async def stream() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    return [line async for line in event_lines(stream())]


@pytest.mark.parametrize(
    "chunks",
    [
        [b'{"a":1}\n{"b":2}\n'],
        [b'{"a"', b":1}\n", b'{"b":2}\n'],
        [b'{"a":1}\n{"b', b'":', b"2}\n"],
        [b'{"a":1}', b"\n\n", b'{"b":2}\n\n'],
        [b"", b'{"a":1}\n{"b":2}\n', b""],
    ],
)
async def test_event_lines_joins_events_split_across_chunks(chunks: list[bytes]) -> None:
    assert await _lines(chunks) == [b'{"a":1}', b'{"b":2}']


async def test_event_lines_drops_an_event_the_stream_cut_short() -> None:
    assert await _lines([b'{"a":1}\n{"b":', b"2"]) == [b'{"a":1}']


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
