"""A scripted fake of the API server's list and watch for one collection, behind an
``httpx.MockTransport``: unit tests use it instead of patching. :func:`served` puts any such
handler behind a real HTTP/1.1 socket, for the paths that write to the connection directly
(:mod:`shared.kube.direct`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx


def obj(name: str, rv: int, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "resourceVersion": str(rv)}
    if annotations is not None:
        meta["annotations"] = annotations
    return {"metadata": meta}


def event(kind: str, item: dict[str, Any]) -> dict[str, Any]:
    return {"type": kind, "object": item}


def gone() -> dict[str, Any]:
    return {
        "type": "ERROR",
        "object": {
            "kind": "Status",
            "status": "Failure",
            "reason": "Expired",
            "code": 410,
            "message": "too old resource version",
        },
    }


@dataclass
class FakeCollection:
    """Answers LIST with ``lists`` (popped in order; the last one repeats) and WATCH with
    ``watches`` (popped in order; once exhausted a watch hangs until ``release``). A step of a
    watch that is an :class:`asyncio.Event` keeps the answer silent until it is set."""

    lists: list[tuple[int, list[dict[str, Any]]]]
    watches: list[list[dict[str, Any] | Exception | asyncio.Event]] = field(default_factory=list)
    page_size_seen: list[str] = field(default_factory=list)
    requests: list[httpx.Request] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    list_status: list[int] = field(default_factory=list)

    def watch_versions(self) -> list[str]:
        return [r.url.params["resourceVersion"] for r in self.requests if r.url.params.get("watch")]

    def list_count(self) -> int:
        return sum(1 for r in self.requests if not r.url.params.get("watch"))

    async def handler(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.url.params.get("watch"):
            return httpx.Response(200, content=self._stream())
        if self.list_status:
            code = self.list_status.pop(0)
            return httpx.Response(
                code, json={"kind": "Status", "code": code, "message": "scripted"}
            )
        rv, items = self.lists[0] if len(self.lists) == 1 else self.lists.pop(0)
        limit = int(request.url.params.get("limit", "0") or 0)
        start = int(request.url.params.get("continue", "0") or 0)
        end = start + limit if limit else len(items)
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if end < len(items):
            meta["continue"] = str(end)
        return httpx.Response(
            200, json={"kind": "List", "metadata": meta, "items": items[start:end]}
        )

    async def _stream(self) -> AsyncIterator[bytes]:
        script = self.watches.pop(0) if self.watches else None
        if script is None:
            await self.release.wait()
            return
        for step in script:
            if isinstance(step, Exception):
                raise step
            if isinstance(step, asyncio.Event):  # silent, the connection open, until it is set
                await step.wait()
                continue
            yield (json.dumps(step) + "\n").encode()

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handler)


@dataclass
class FakeCluster:
    """Several collections behind one transport, chosen by the request's path."""

    collections: dict[str, FakeCollection]

    async def handler(self, request: httpx.Request) -> httpx.Response:
        collection = self.collections.get(request.url.path)
        if collection is None:
            return httpx.Response(404, json={"kind": "Status", "code": 404, "message": "no"})
        return await collection.handler(request)

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handler)


@dataclass
class FakeConfigMaps:
    """ConfigMaps as the API server keeps them: GET, POST (409 AlreadyExists), and PUT with a
    ``resourceVersion`` precondition (409 Conflict when it is not the current one).
    ``before_write`` runs before each write is applied (a concurrent writer in race tests)."""

    objects: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    version: int = 0
    writes: list[str] = field(default_factory=list)
    before_write: list[Any] = field(default_factory=list)

    def handles(self, request: httpx.Request) -> bool:
        parts = request.url.path.strip("/").split("/")
        return parts[:3] == ["api", "v1", "namespaces"] and parts[4:5] == ["configmaps"]

    def put(self, namespace: str, name: str, data: dict[str, str]) -> None:
        """Write as another client would (a new resourceVersion)."""
        self.version += 1
        meta = {"name": name, "namespace": namespace, "resourceVersion": str(self.version)}
        self.objects[(namespace, name)] = {"metadata": meta, "data": data}

    async def handler(self, request: httpx.Request) -> httpx.Response:
        parts = request.url.path.strip("/").split("/")
        namespace, name = parts[3], parts[5] if len(parts) > 5 else None
        if request.method == "GET" and name is not None:
            found = self.objects.get((namespace, name))
            if found is None:
                return _status(404, "NotFound")
            return httpx.Response(200, json=found)
        body = json.loads(request.content)
        name = body["metadata"]["name"]
        while self.before_write:
            self.before_write.pop(0)()
        current = self.objects.get((namespace, name))
        if request.method == "POST" and current is not None:
            return _status(409, "AlreadyExists")
        if request.method == "PUT" and (
            current is None
            or current["metadata"]["resourceVersion"] != body["metadata"].get("resourceVersion")
        ):
            return _status(409, "Conflict")
        self.writes.append(request.method)
        self.put(namespace, name, body["data"])
        return httpx.Response(200 if current else 201, json=self.objects[(namespace, name)])


def _status(code: int, reason: str) -> httpx.Response:
    return httpx.Response(code, json={"kind": "Status", "code": code, "reason": reason})


Handler = Callable[[httpx.Request], Awaitable[httpx.Response]]


@contextlib.asynccontextmanager
async def served(handler: Handler) -> AsyncIterator[str]:
    """``handler`` answering HTTP/1.1 on 127.0.0.1 (kept-alive connections), at the URL
    yielded. Every answer is sent chunked, each piece of its stream as it comes; a stream that
    raises ends the connection in the middle of the answer, as a dropped connection does."""
    tasks: set[asyncio.Task[None]] = set()

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request_line, *lines = (await reader.readuntil(b"\r\n\r\n")).decode().split("\r\n")
                method, target, _ = request_line.split(" ")
                headers = [(k, v) for k, _, v in (line.partition(": ") for line in lines if line)]
                length = next((int(v) for k, v in headers if k.lower() == "content-length"), 0)
                request = httpx.Request(
                    method,
                    f"http://served{target}",
                    headers=headers,
                    content=await reader.readexactly(length),
                )
                response = await handler(request)
                head = [f"HTTP/1.1 {response.status_code} {response.reason_phrase}"]
                head += [
                    f"{k}: {v}"
                    for k, v in response.headers.items()
                    if k not in ("content-length", "transfer-encoding")
                ]
                writer.write(
                    ("\r\n".join(head) + "\r\nTransfer-Encoding: chunked\r\n\r\n").encode()
                )
                pieces = response.aiter_raw() if not response.is_stream_consumed else _one(response)
                async for chunk in pieces:
                    if chunk:
                        writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        await writer.drain()
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, httpx.HTTPError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    def start(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not server.is_serving():  # accepted just before the server closed: not answered
            writer.close()
            return
        task = asyncio.create_task(answer(reader, writer))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        # closed however the task ends: one cancelled before its first step never runs
        # answer's finally, and its connection would stay open past the test's event loop
        task.add_done_callback(lambda _: writer.close())

    server = await asyncio.start_server(start, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()
        await asyncio.sleep(0)  # a connection accepted just before is made (and closed)
        while tasks:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()


async def _one(response: httpx.Response) -> AsyncIterator[bytes]:
    yield response.content  # an answer built whole
