"""Create an object (``POST``), or ask a subresource (an Eviction, a review).

A create is retried only when the API server surely did not run it (see
:mod:`shared.kube.retrying`), unless the caller says repeating it is harmless (reviews store
nothing: ``idempotent=True``)."""

from __future__ import annotations

from typing import Any

import httpx

from shared.kube.bodies import JSON, encode
from shared.kube.paths import Resource
from shared.kube.requesting import DEFAULT_RETRY, request
from shared.kube.retrying import RetryPolicy


async def create(
    client: httpx.AsyncClient,
    resource: Resource,
    body: Any,
    *,
    namespace: str = "",
    name: str = "",
    subresource: str = "",
    what: str = "",
    retry: RetryPolicy = DEFAULT_RETRY,
    idempotent: bool = False,
) -> bytes:
    """POST ``body`` to the collection (or to ``name``'s ``subresource``); the answer's JSON."""
    path = resource.path(name, namespace=namespace, subresource=subresource)
    response = await request(
        client,
        "POST",
        path,
        what=what or f"POST {path}",
        retry=retry,
        idempotent=idempotent,
        content=encode(body),
        headers=JSON,
    )
    return response.content
