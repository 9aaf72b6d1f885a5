"""Write node annotations: one JSON merge patch of ``metadata.annotations`` per node, retried
by the service's :class:`~shared.kube.retrying.RetryPolicy` on connect errors, timeouts, 5xx,
429 (after its ``Retry-After``) and conflicts; a deleted node is skipped.

The patch sets fixed values and carries no ``resourceVersion``, so sending it twice equals
sending it once: it is retried like a read, and re-applied after a 409."""

from __future__ import annotations

import logging
from collections.abc import Mapping

import httpx
import msgspec

from shared.errors import APINotFoundError
from shared.kube import patching
from shared.kube.paths import NODES
from shared.kube.requesting import DEFAULT_RETRY
from shared.kube.retrying import RetryPolicy

logger = logging.getLogger(__name__)


class NodePatcher:
    def __init__(self, client: httpx.AsyncClient, *, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        self._client = client
        self._retry = retry

    async def patch_annotations(self, node: str, annotations: Mapping[str, str | None]) -> bool:
        """Merge ``annotations`` into the node's (``None`` removes a key). False if the node is
        gone; raises the last error once retries are exhausted."""
        body = msgspec.json.encode({"metadata": {"annotations": dict(annotations)}})
        try:
            await patching.patch(
                self._client,
                NODES,
                node,
                body,
                what=f"node/{node}: patch",
                retry=self._retry,
                idempotent=True,
                conflicts=True,
            )
        except APINotFoundError:
            logger.info("node/%s: deleted meanwhile; skipped", node)
            return False
        return True
