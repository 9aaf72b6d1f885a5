"""List+watch caches: list once, then watch from the list's resourceVersion, resume the watch
from the last seen resourceVersion after a disconnect, and re-list on ``410 Gone``. A watch
silent past its ``timeoutSeconds`` (plus :data:`~shared.kube.config.WATCH_GRACE`) is on a dead
connection: it is dropped and resumed like a disconnect.

Failures never stop the loop: each failed attempt is logged and retried with backoff (a
server's ``Retry-After`` honoured). Each list page is one call through
:func:`shared.kube.requesting.request`, so it is also retried by the service's
:class:`~shared.kube.retrying.RetryPolicy`; the watch is a stream and is resumed here.

Kept as our own code rather than a client library's watch: lightkube's async watch re-watches
from "now" after ``410 Gone`` instead of re-listing (the store would miss deletions made
meanwhile) and asks for no bookmarks; kubernetes-asyncio's ``Watch`` leaves both to the caller.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import httpx
import msgspec

from shared.errors import APIError, APIGoneError, APIUnreachableError
from shared.kube.config import watch_timeout
from shared.kube.requesting import DEFAULT_RETRY, request
from shared.kube.retrying import RetryPolicy
from shared.kube.status import Status, raise_for_status, status_error, unreachable

logger = logging.getLogger(__name__)

T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)


class Store(Protocol[T_contra]):
    """Where a reflector puts what it lists and watches."""

    def replace(self, items: Sequence[T_contra]) -> None:
        """Swap the whole content for a fresh list (atomically for readers)."""

    def apply(self, event: str, item: T_contra) -> None:
        """Apply one ``ADDED``, ``MODIFIED`` or ``DELETED`` event."""


class FanOut(Generic[T]):
    """One watch feeding several stores."""

    def __init__(self, *stores: Store[T]) -> None:
        self._stores = stores

    def replace(self, items: Sequence[T]) -> None:
        for store in self._stores:
            store.replace(items)

    def apply(self, event: str, item: T) -> None:
        for store in self._stores:
            store.apply(event, item)


class _ListMeta(msgspec.Struct):
    resourceVersion: str = ""
    # `continue` is a Python keyword.
    continue_: str = msgspec.field(default="", name="continue")


class _ObjectMeta(msgspec.Struct):
    resourceVersion: str = ""


class _Versioned(msgspec.Struct):
    metadata: _ObjectMeta = msgspec.field(default_factory=_ObjectMeta)


class _ListPage(msgspec.Struct):
    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)
    items: list[msgspec.Raw] | None = None


class _WatchEvent(msgspec.Struct):
    type: str
    object: msgspec.Raw


_PAGE = msgspec.json.Decoder(_ListPage)
_EVENT = msgspec.json.Decoder(_WatchEvent)
_VERSIONED = msgspec.json.Decoder(_Versioned)
_STATUS = msgspec.json.Decoder(Status)


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with full jitter: ``min(cap, base * 2**attempt)``; a server's
    ``Retry-After`` (capped) instead when it sent one."""

    base: float = 0.5
    cap: float = 30.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        if retry_after is not None:
            return min(self.cap, retry_after)
        return random.uniform(0, min(self.cap, self.base * 2 ** min(attempt, 16)))


class Reflector(Generic[T]):
    """Keeps a :class:`Store` in step with one collection of the API server.

    ``path`` is the collection URL (``/api/v1/nodes``); ``decode`` turns one object's JSON
    into whatever the store keeps, reading only the fields it needs. Each watch asks the server
    to end it after ``watch_seconds``; ``watch_timeouts`` (default
    :func:`~shared.kube.config.watch_timeout` of it) bounds how long a read may wait.
    """

    def __init__(
        self,
        *,
        client: httpx.AsyncClient,
        path: str,
        decode: Callable[[bytes], T],
        store: Store[T],
        name: str,
        page_size: int = 500,
        watch_seconds: int = 300,
        watch_timeouts: httpx.Timeout | None = None,
        backoff: Backoff = Backoff(),
        retry: RetryPolicy = DEFAULT_RETRY,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> None:
        self._client = client
        self._path = path
        self._decode = decode
        self._store = store
        self.name = name
        self._page_size = page_size
        if watch_seconds < 1:  # the API server reads 0 as "not set" and picks 30-60 min
            raise ValueError(f"watch_seconds must be at least 1, not {watch_seconds}")
        self._watch_seconds = watch_seconds
        self._watch_timeouts = watch_timeouts or watch_timeout(watch_seconds)
        self._backoff = backoff
        self._retry = retry
        self._selector = label_selector
        self._field_selector = field_selector
        self.synced = asyncio.Event()
        """Set after the first complete list has been stored."""
        self.resource_version = ""
        self.relists = 0

    async def run(self) -> None:
        """List and watch until cancelled."""
        attempt = 0
        need_list = True
        while True:
            try:
                if need_list:
                    await self._list()
                    need_list = False
                    attempt = 0
                await self._watch()
                attempt = 0
            except APIGoneError:
                logger.info(
                    "%s: resourceVersion %s expired; re-listing", self.name, self.resource_version
                )
                need_list = True
                self.relists += 1
            except (APIError, APIUnreachableError, msgspec.DecodeError) as e:
                attempt += 1
                delay = self._backoff.delay(
                    attempt, e.retry_after if isinstance(e, APIError) else None
                )
                logger.warning(
                    "%s: attempt #%d failed (%s); will retry in %.1fs",
                    self.name,
                    attempt,
                    e,
                    delay,
                )
                await asyncio.sleep(delay)

    def _params(self) -> dict[str, str]:
        params: dict[str, str] = {}
        if self._selector:
            params["labelSelector"] = self._selector
        if self._field_selector:
            params["fieldSelector"] = self._field_selector
        return params

    async def list_once(self) -> None:
        """One complete list into the store (for one-shot runs), without watching."""
        await self._list()

    async def _list(self) -> None:
        items: list[T] = []
        token = ""
        while True:
            params = self._params() | {"limit": str(self._page_size)}
            if token:
                params["continue"] = token
            response = await request(
                self._client,
                "GET",
                self._path,
                what=f"{self.name}: list {self._path}",
                params=params,
                retry=self._retry,
            )
            page = _PAGE.decode(response.content)
            items.extend(self._decode(raw) for raw in page.items or ())
            token = page.metadata.continue_
            if not token:
                self.resource_version = page.metadata.resourceVersion
                break
        self._store.replace(items)
        self.synced.set()
        logger.info(
            "%s: listed %d objects at resourceVersion %s",
            self.name,
            len(items),
            self.resource_version,
        )

    async def _watch(self) -> None:
        params = self._params() | {
            "watch": "1",
            "resourceVersion": self.resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(self._watch_seconds),
        }
        try:
            async with self._client.stream(
                "GET", self._path, params=params, timeout=self._watch_timeouts
            ) as response:
                if not response.is_success:
                    await response.aread()
                    raise_for_status(response)
                async for line in event_lines(response.aiter_bytes()):
                    self._handle(line)
        except httpx.HTTPError as e:
            raise unreachable(e, f"watch {self._path}") from e

    def _handle(self, line: bytes) -> None:
        event = _EVENT.decode(line)
        if event.type == "ERROR":
            raise status_error(_STATUS.decode(event.object))
        version = _VERSIONED.decode(event.object).metadata.resourceVersion
        if event.type != "BOOKMARK":
            self._store.apply(event.type, self._decode(event.object))
        if version:
            self.resource_version = version


async def event_lines(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The non-empty lines of a watch stream (one JSON event each), as bytes: split on ``\\n``
    without decoding the text, an event split across chunks joined once. A tail the stream
    ends without a newline is an event cut short: it is dropped (the watch resumes from the
    last event applied, so the server sends it again)."""
    pending: list[bytes] = []
    async for chunk in chunks:
        for line in split_lines(pending, chunk):
            yield line


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
