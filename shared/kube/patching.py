"""Patch an object or its ``status``, with the patch type named."""

from __future__ import annotations

import enum
from typing import Any

import httpx

from shared.kube.bodies import encode
from shared.kube.paths import Resource
from shared.kube.requesting import DEFAULT_RETRY, request
from shared.kube.retrying import RetryPolicy


class PatchType(enum.Enum):
    MERGE = "application/merge-patch+json"
    """RFC 7386: maps merge, ``null`` removes a key, lists are replaced whole."""
    STRATEGIC = "application/strategic-merge-patch+json"
    JSON = "application/json-patch+json"
    """RFC 6902 operations."""


_HEADERS = {kind: {"Content-Type": kind.value} for kind in PatchType}


async def patch(
    client: httpx.AsyncClient,
    resource: Resource,
    name: str,
    body: Any,
    *,
    namespace: str = "",
    subresource: str = "",
    patch_type: PatchType = PatchType.MERGE,
    what: str = "",
    retry: RetryPolicy = DEFAULT_RETRY,
    idempotent: bool = False,
    conflicts: bool = False,
) -> bytes:
    """Apply ``body`` (JSON-encodable, or bytes already encoded); the patched object's JSON.

    ``idempotent``: the patch sets fixed values, so it may be repeated like a read;
    ``conflicts``: it carries no ``resourceVersion`` and may be re-applied after a 409."""
    path = resource.path(name, namespace=namespace, subresource=subresource)
    response = await request(
        client,
        "PATCH",
        path,
        what=what or f"PATCH {path}",
        retry=retry,
        idempotent=idempotent,
        conflicts=conflicts,
        content=encode(body),
        headers=_HEADERS[patch_type],
    )
    return response.content
