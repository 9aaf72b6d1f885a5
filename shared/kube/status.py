"""The one place where API server HTTP statuses and httpx exceptions become loadsched errors."""

from __future__ import annotations

from typing import Any

import httpx
import msgspec

from shared.errors import (
    APIConflictError,
    APIError,
    APIGoneError,
    APINotFoundError,
    APITransientError,
    APIUnreachableError,
)

_BODY_LIMIT = 300


class Status(msgspec.Struct):
    """A ``meta/v1`` Status, as sent in error bodies and watch ERROR events."""

    code: int = 0
    reason: str = ""
    message: str = ""


_STATUS_DECODER = msgspec.json.Decoder(Status)


def error_for(code: int, reason: str, message: str) -> APIError:
    if code == 404:
        return APINotFoundError(code, reason, message)
    if code == 409:
        return APIConflictError(code, reason, message)
    if code == 410:
        return APIGoneError(code, reason, message)
    if code == 429 or code >= 500:
        return APITransientError(code, reason, message)
    return APIError(code, reason, message)


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
    raise error_for(response.status_code, status.reason or response.reason_phrase, status.message)


def unreachable(error: httpx.HTTPError, what: str) -> APIUnreachableError:
    """Wrap a transport-level failure (raise it ``from`` the original)."""
    return APIUnreachableError(f"{what}: {type(error).__name__}: {str(error)[:_BODY_LIMIT]}")


async def send(
    client: httpx.AsyncClient, method: str, path: str, *, what: str, **kwargs: Any
) -> httpx.Response:
    """One request: a transport failure becomes :class:`APIUnreachableError` naming ``what``,
    a non-2xx answer the matching :class:`APIError`."""
    try:
        response = await client.request(method, path, **kwargs)
    except httpx.HTTPError as e:
        raise unreachable(e, what) from e
    raise_for_status(response)
    return response
