"""The one place where API server HTTP statuses and httpx exceptions become loadsched errors."""

from __future__ import annotations

import httpx
import msgspec

from shared.errors import (
    APIConflictError,
    APIError,
    APIForbiddenError,
    APIGoneError,
    APIInvalidError,
    APINotFoundError,
    APIServerError,
    APITimeoutError,
    APITooManyRequestsError,
    APIUnauthorizedError,
    APIUnreachableError,
)
from shared.kube.retrying import retry_after

_BODY_LIMIT = 300

_BY_STATUS: dict[int, type[APIError]] = {
    401: APIUnauthorizedError,
    403: APIForbiddenError,
    404: APINotFoundError,
    409: APIConflictError,
    410: APIGoneError,
    422: APIInvalidError,
    429: APITooManyRequestsError,
}

_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
"""Failures before a byte of the request left: it cannot have been processed."""


class Status(msgspec.Struct):
    """A ``meta/v1`` Status, as sent in error bodies and watch ERROR events."""

    code: int = 0
    reason: str = ""
    message: str = ""


_STATUS_DECODER = msgspec.json.Decoder(Status)


def error_for(
    code: int, reason: str, message: str, *, retry_after: float | None = None
) -> APIError:
    """The error class of an HTTP status (:mod:`shared.errors` draws the tree)."""
    kind = _BY_STATUS.get(code) or (APIServerError if code >= 500 else APIError)
    return kind(code, reason, message, retry_after=retry_after)


def status_error(status: Status) -> APIError:
    return error_for(status.code, status.reason, status.message[:_BODY_LIMIT])


def raise_for_status(response: httpx.Response) -> None:
    """Raise the matching :class:`APIError` for a non-2xx response (body must be read)."""
    if response.is_success:
        return
    try:
        status = _STATUS_DECODER.decode(response.content)
    except msgspec.DecodeError:
        status = Status(message=response.text[:_BODY_LIMIT])
    raise error_for(
        response.status_code,
        status.reason or response.reason_phrase,
        status.message[:_BODY_LIMIT],
        retry_after=retry_after(response.headers.get("retry-after")),
    )


def unreachable(error: httpx.HTTPError, what: str) -> APIUnreachableError:
    """Wrap a transport-level failure (raise it ``from`` the original)."""
    kind = APITimeoutError if isinstance(error, httpx.TimeoutException) else APIUnreachableError
    return kind(
        f"{what}: {type(error).__name__}: {str(error)[:_BODY_LIMIT]}",
        sent=not isinstance(error, _NOT_SENT),
    )
