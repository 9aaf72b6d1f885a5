"""Read one object."""

from __future__ import annotations

import httpx

from shared.kube.paths import Resource
from shared.kube.requesting import DEFAULT_RETRY, request
from shared.kube.retrying import RetryPolicy


async def get(
    client: httpx.AsyncClient,
    resource: Resource,
    name: str,
    *,
    namespace: str = "",
    what: str = "",
    retry: RetryPolicy = DEFAULT_RETRY,
) -> bytes:
    """The object's JSON; :class:`~shared.errors.APINotFoundError` when there is none."""
    path = resource.path(name, namespace=namespace)
    response = await request(client, "GET", path, what=what or f"GET {path}", retry=retry)
    return response.content
