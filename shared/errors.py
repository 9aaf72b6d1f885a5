"""The one error tree of loadsched. Third-party exceptions are translated into these
at the module that talks to the third party, and re-raised ``from`` the original.

::

    LoadschedError
    ├── ConfigError                    a file or setting is invalid (names the field)
    ├── APIError                       the Kubernetes API answered with an error status
    │   ├── APIUnauthorizedError       401
    │   ├── APIForbiddenError          403
    │   ├── APINotFoundError           404
    │   ├── APIConflictError           409
    │   ├── APIGoneError               410
    │   ├── APIInvalidError            422
    │   └── APITransientError          429 and 5xx: worth retrying
    │       ├── APITooManyRequestsError    429 (API Priority and Fairness, eviction budgets)
    │       └── APIServerError             5xx
    ├── APIUnreachableError            no answer: connect error, broken stream
    │   └── APITimeoutError            no answer in time
    └── (domain errors, declared beside their code: InvalidPod, Backpressure, Unauthenticated,
         Forbidden, InvalidDispatch, PrometheusError, DatabaseError, ...)
"""

from __future__ import annotations


class LoadschedError(Exception):
    """Base of every error loadsched raises on purpose."""


class ConfigError(LoadschedError):
    """A configuration file or setting is invalid. The message names the file and field."""

    def __init__(self, source: str, field: str, message: str) -> None:
        self.source = source
        self.field = field
        self.message = message
        where = f"{source}: {field}" if field else source
        super().__init__(f"{where}: {message}")


class APIError(LoadschedError):
    """The Kubernetes API answered with an error status."""

    def __init__(
        self, status: int, reason: str, message: str, *, retry_after: float | None = None
    ) -> None:
        self.status = status
        self.reason = reason
        self.message = message
        self.retry_after = retry_after
        """Seconds the server asked to wait (``Retry-After``), if it said."""
        super().__init__(f"HTTP {status} {reason}: {message}")


class APIUnauthorizedError(APIError):
    """401: the credentials were not accepted."""


class APIForbiddenError(APIError):
    """403: RBAC does not allow the request."""


class APINotFoundError(APIError):
    """404: the object does not exist (any more)."""


class APIConflictError(APIError):
    """409: a conflicting write, or a resourceVersion that no longer matches."""


class APIGoneError(APIError):
    """410: a watch or list resourceVersion is too old; the caller must re-list."""


class APIInvalidError(APIError):
    """422: the object or patch does not validate."""


class APITransientError(APIError):
    """5xx or 429: worth retrying with backoff."""


class APITooManyRequestsError(APITransientError):
    """429: API Priority and Fairness rejected the request before running it, or (evictions)
    a PodDisruptionBudget does not allow it now."""


class APIServerError(APITransientError):
    """5xx: the server failed, or (503) could not take the request now."""


class APIUnreachableError(LoadschedError):
    """The API server could not be reached (connect error, timeout, broken stream)."""

    def __init__(self, message: str, *, sent: bool = True) -> None:
        self.sent = sent
        """False when the request surely never left (connect error, no pooled connection):
        retrying it cannot repeat its effect."""
        super().__init__(message)


class APITimeoutError(APIUnreachableError):
    """No answer within the timeout (connect, read, write, or waiting for a connection)."""
