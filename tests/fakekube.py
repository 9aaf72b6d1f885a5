"""A scripted fake of the API server's list and watch for one collection, behind an
``httpx.MockTransport``: unit tests use it instead of patching."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
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
    ``watches`` (popped in order; once exhausted a watch hangs until ``release``)."""

    lists: list[tuple[int, list[dict[str, Any]]]]
    watches: list[list[dict[str, Any] | Exception]] = field(default_factory=list)
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
