"""Delete an object, with ``DeleteOptions`` (propagation policy, preconditions)."""

from __future__ import annotations

from typing import Any

import httpx

from shared.kube.bodies import JSON, encode
from shared.kube.paths import Resource
from shared.kube.requesting import DEFAULT_RETRY, request
from shared.kube.retrying import RetryPolicy


async def delete(
    client: httpx.AsyncClient,
    resource: Resource,
    name: str,
    *,
    namespace: str = "",
    options: Any = None,
    what: str = "",
    retry: RetryPolicy = DEFAULT_RETRY,
) -> bytes:
    """DELETE the object (``options`` as the body: a ``DeleteOptions``); the answer's JSON."""
    path = resource.path(name, namespace=namespace)
    response = await request(
        client,
        "DELETE",
        path,
        what=what or f"DELETE {path}",
        retry=retry,
        content=None if options is None else encode(options),
        headers=JSON if options is not None else None,
    )
    return response.content
