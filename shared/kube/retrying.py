"""When a Kubernetes API call is tried again, and how long to wait first.

One :class:`RetryPolicy` per service, built from its settings (``--kube-retry-attempts``,
``--kube-retry-backoff``, ``--kube-retry-backoff-max``, ``--kube-timeout``), is passed to every
call. What may be retried depends on whether sending the request twice could do twice what it
does once:

- **Safe reads** (``GET``, lists) are retried on every transient failure: a transport error or
  timeout, ``429``, any ``5xx``.
- **Writes** (``POST``, ``PUT``, ``PATCH``, ``DELETE``) are retried only when the API server
  surely did not process them: the connection was never made (connect error or timeout, no
  pooled connection), or the server answered ``429`` or ``503``. kube-apiserver answers 429
  when API Priority and Fairness (or ``--max-requests-inflight``) rejects a request *before*
  running it, and while it shuts down; 503 when it cannot take requests now (not yet ready,
  an aggregated API's backend unavailable). A request that ran too long is answered ``504``
  by its timeout filter, possibly after the write happened, so 504, other 5xx and read
  timeouts are not retried for writes.
- **Idempotent writes** (a caller says so: a merge patch that sets fixed values, a
  TokenReview) are retried like reads: applying them twice equals applying them once.
- A ``409 Conflict`` is retried only when the caller asks (an unconditional merge patch is
  re-applied to the fresh object); a write guarded by ``resourceVersion`` must re-read first.

Waits are exponential with full jitter (``uniform(0, min(max, base * 2**n))``); a
``Retry-After`` on 429 or 503 replaces that wait, capped at the backoff maximum.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from shared.errors import (
    APIConflictError,
    APIError,
    APIUnreachableError,
    LoadschedError,
)

SAFE_METHODS = frozenset({"GET", "HEAD"})
NOT_PROCESSED = frozenset({429, 503})
"""Statuses kube-apiserver answers without having run the request."""

DEFAULT_ATTEMPTS = 5
DEFAULT_BACKOFF = 0.2
DEFAULT_BACKOFF_MAX = 8.0
DEFAULT_TIMEOUT = 10.0
CONNECT_TIMEOUT = 5.0


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently one API call is tried."""

    attempts: int = DEFAULT_ATTEMPTS
    """Tries in all (1: never retried)."""
    backoff: float = DEFAULT_BACKOFF
    """Seconds of the first backoff step; doubled each retry."""
    backoff_max: float = DEFAULT_BACKOFF_MAX
    """Longest wait, also the cap on a server's ``Retry-After``."""
    timeout: float = DEFAULT_TIMEOUT
    """Seconds per try (connecting takes at most 5 s of them)."""
    http_timeout: httpx.Timeout = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"attempts must be at least 1, got {self.attempts}")
        if self.backoff < 0 or self.backoff_max < self.backoff:
            raise ValueError(
                f"need 0 <= backoff <= backoff_max, got {self.backoff} and {self.backoff_max}"
            )
        if self.timeout <= 0:
            raise ValueError(f"timeout must be positive, got {self.timeout}")
        timeout = httpx.Timeout(self.timeout, connect=min(CONNECT_TIMEOUT, self.timeout))
        object.__setattr__(self, "http_timeout", timeout)

    def once(self) -> RetryPolicy:
        """The same timeout, no retries (for callers whose next pass is the retry)."""
        return RetryPolicy(1, self.backoff, self.backoff_max, self.timeout)

    def retryable(
        self, method: str, error: LoadschedError, *, idempotent: bool, conflicts: bool
    ) -> bool:
        """May a call that failed with ``error`` be sent again?"""
        repeatable = idempotent or method in SAFE_METHODS
        if isinstance(error, APIUnreachableError):
            return repeatable or not error.sent
        if isinstance(error, APIConflictError):
            return conflicts
        if isinstance(error, APIError):
            if error.status in NOT_PROCESSED:
                return True
            return repeatable and error.status >= 500
        return False

    def delay(
        self,
        retry: int,
        error: LoadschedError,
        *,
        uniform: Callable[[float, float], float] = random.uniform,
    ) -> float:
        """Seconds to wait before retry number ``retry`` (1 for the first retry)."""
        if isinstance(error, APIError) and error.retry_after is not None:
            return min(self.backoff_max, max(0.0, error.retry_after))
        return uniform(0.0, min(self.backoff_max, self.backoff * 2 ** min(retry - 1, 30)))


def retry_after(value: str | None) -> float | None:
    """Seconds of a ``Retry-After`` header; None when absent or not a number of seconds (the
    API server always sends seconds; an HTTP date falls back to the backoff)."""
    if not value:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return max(0.0, seconds) if math.isfinite(seconds) else None
