"""Replace an object (``PUT``): guarded by the ``resourceVersion`` in its body, so a 409 means
someone else wrote in between and is never retried here."""

from __future__ import annotations

from typing import Any

import httpx

from shared.kube.bodies import JSON, encode
from shared.kube.paths import Resource
from shared.kube.requesting import DEFAULT_RETRY, request
from shared.kube.retrying import RetryPolicy


async def replace(
    client: httpx.AsyncClient,
    resource: Resource,
    name: str,
    body: Any,
    *,
    namespace: str = "",
    what: str = "",
    retry: RetryPolicy = DEFAULT_RETRY,
) -> bytes:
    """PUT ``body`` as the object ``name``; the stored object's JSON."""
    path = resource.path(name, namespace=namespace)
    response = await request(
        client,
        "PUT",
        path,
        what=what or f"PUT {path}",
        retry=retry,
        content=encode(body),
        headers=JSON,
    )
    return response.content
