"""Evict a pod through the Eviction API (``policy/v1``), so PodDisruptionBudgets decide.

The result says what happened; nothing is retried here: the reclaim controller's next pass is
the retry, so a PodDisruptionBudget that blocks now is simply asked again later. How many
evictions a minute the controller may ask for is a :class:`TokenBucket`.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from shared.errors import (
    APIConflictError,
    APIError,
    APINotFoundError,
    APITooManyRequestsError,
    APIUnreachableError,
)
from shared.kube import creating
from shared.kube.paths import PODS
from shared.kube.requesting import DEFAULT_RETRY
from shared.kube.retrying import RetryPolicy

logger = logging.getLogger(__name__)


class Eviction(enum.Enum):
    EVICTED = "evicted"
    GONE = "gone"
    """The pod no longer exists (or is another pod with the same name)."""
    BLOCKED = "blocked"
    """429: a PodDisruptionBudget does not allow it now."""
    FAILED = "failed"


async def evict(
    client: httpx.AsyncClient,
    *,
    namespace: str,
    name: str,
    uid: str,
    grace_seconds: int | None,
    retry: RetryPolicy = DEFAULT_RETRY,
) -> tuple[Eviction, str]:
    """Ask the API server to evict the pod; the pod's UID is a precondition. Tried once, with
    ``retry``'s timeout: a 429 is a PodDisruptionBudget's answer, asked again next pass."""
    delete_options: dict[str, object] = {"preconditions": {"uid": uid}}
    if grace_seconds is not None:
        delete_options["gracePeriodSeconds"] = grace_seconds
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
        "deleteOptions": delete_options,
    }
    try:
        await creating.create(
            client,
            PODS,
            body,
            namespace=namespace,
            name=name,
            subresource="eviction",
            what=f"pod/{namespace}/{name}: evict",
            retry=retry.once(),
        )
    except APINotFoundError:
        return Eviction.GONE, "pod is gone"
    except APITooManyRequestsError as e:
        return Eviction.BLOCKED, e.message
    except APIConflictError as e:  # the UID precondition failed: a new pod of the same name
        return Eviction.GONE, e.message
    except APIError as e:
        return Eviction.FAILED, str(e)
    except APIUnreachableError as e:
        return Eviction.FAILED, str(e)
    return Eviction.EVICTED, ""


@dataclass
class TokenBucket:
    """``per_minute`` tokens a minute, at most ``max(per_minute, 1)`` saved up (so that a rate
    under one a minute still lets one through)."""

    per_minute: float
    monotonic: Callable[[], float] = time.monotonic
    _tokens: float = field(default=-1.0)
    _at: float = 0.0

    def _refill(self) -> None:
        now = self.monotonic()
        cap = max(self.per_minute, 1.0)
        if self._tokens < 0:
            self._tokens, self._at = cap, now
        self._tokens = min(cap, self._tokens + (now - self._at) * self.per_minute / 60)
        self._at = now

    def take(self, n: int) -> bool:
        """All ``n`` tokens, or none."""
        self._refill()
        if self._tokens < n:
            return False
        self._tokens -= n
        return True

    def take_up_to(self, n: int) -> int:
        """As many of ``n`` tokens as there are whole ones."""
        self._refill()
        taken = min(n, int(self._tokens))
        self._tokens -= taken
        return taken

    def give_back(self, n: int) -> None:
        """Return ``n`` tokens taken for evictions that did not happen (up to the cap)."""
        self._refill()
        self._tokens = min(max(self.per_minute, 1.0), self._tokens + n)
