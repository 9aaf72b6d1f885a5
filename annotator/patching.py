"""Write node annotations: one JSON merge patch of ``metadata.annotations`` per node, retried
with backoff on connect errors, timeouts, 5xx, 429 and conflicts; a deleted node is skipped."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

import httpx
import msgspec
from tenacity import (
    AsyncRetrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential_jitter,
)

from shared.errors import APIConflictError, APINotFoundError, APITransientError, APIUnreachableError
from shared.kube.status import send

logger = logging.getLogger(__name__)

MERGE_PATCH = "application/merge-patch+json"
RETRYABLE = (APIUnreachableError, APITransientError, APIConflictError)


class NodePatcher:
    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        attempts: int = 5,
        max_wait: float = 8.0,
        first_wait: float = 0.2,
    ) -> None:
        self._client = client
        self._attempts = attempts
        self._max_wait = max_wait
        self._first_wait = first_wait
        """Seconds before the second attempt; later ones back off exponentially."""

    async def _patch_once(self, node: str, body: bytes) -> None:
        await send(
            self._client,
            "PATCH",
            f"/api/v1/nodes/{node}",
            what=f"node/{node}: patch",
            content=body,
            headers={"Content-Type": MERGE_PATCH},
        )

    async def patch_annotations(self, node: str, annotations: Mapping[str, str | None]) -> bool:
        """Merge ``annotations`` into the node's (``None`` removes a key). False if the node is
        gone; raises the last error once retries are exhausted."""
        body = msgspec.json.encode({"metadata": {"annotations": dict(annotations)}})
        try:  # the first attempt without the retry machinery: most patches need no retry
            await self._patch_once(node, body)
            return True
        except APINotFoundError:
            logger.info("node/%s: deleted meanwhile; skipped", node)
            return False
        except RETRYABLE as e:
            logger.warning(
                "node/%s: attempt #1/%d failed (%s); will retry", node, self._attempts, e
            )
            await asyncio.sleep(self._first_wait)
        retrying = AsyncRetrying(
            retry=retry_if_exception_type(RETRYABLE),
            stop=stop_after_attempt(self._attempts - 1),
            wait=wait_exponential_jitter(multiplier=0.2, max=self._max_wait, jitter=0.2),
            before_sleep=lambda state: logger.warning(
                "node/%s: attempt #%d/%d failed (%s); will retry",
                node,
                state.attempt_number + 1,
                self._attempts,
                state.outcome.exception() if state.outcome else None,
            ),
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    await self._patch_once(node, body)
        except APINotFoundError:
            logger.info("node/%s: deleted meanwhile; skipped", node)
            return False
        return True
