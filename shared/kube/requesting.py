"""The one request function every Kubernetes API call goes through (watches excepted: see
:mod:`shared.kube.watching`): it sends, translates the answer into the error tree
(:mod:`shared.kube.status`), and retries by the :class:`RetryPolicy` it is given."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import httpx

from shared.errors import APIError, APIUnreachableError
from shared.kube.retrying import RetryPolicy
from shared.kube.status import raise_for_status, unreachable

logger = logging.getLogger(__name__)

DEFAULT_RETRY = RetryPolicy()
Sleep = Callable[[float], Awaitable[None]]
T = TypeVar("T")


async def request(
    client: httpx.AsyncClient,
    method: str,
    path: str,
    *,
    what: str,
    retry: RetryPolicy = DEFAULT_RETRY,
    idempotent: bool = False,
    conflicts: bool = False,
    content: bytes | None = None,
    json: Any = None,
    headers: Mapping[str, str] | None = None,
    params: Mapping[str, str] | None = None,
    sleep: Sleep = asyncio.sleep,
) -> httpx.Response:
    """Send one API request and return its 2xx response.

    ``what`` names the object for messages (``node/n1: patch``). ``idempotent`` says a write
    may be repeated like a read; ``conflicts`` that a 409 may be retried as is (see
    :mod:`shared.kube.retrying`). Once retries are exhausted, or for a failure that may not be
    retried, the last error is raised: an :class:`~shared.errors.APIError` by status or an
    :class:`~shared.errors.APIUnreachableError`."""

    async def send() -> httpx.Response:
        try:
            response = await client.request(
                method,
                path,
                content=content,
                json=json,
                headers=headers,
                params=params,
                timeout=retry.http_timeout,
            )
        except httpx.HTTPError as e:
            raise unreachable(e, what) from e
        raise_for_status(response)
        return response

    return await retried(
        send,
        method=method,
        what=what,
        retry=retry,
        idempotent=idempotent,
        conflicts=conflicts,
        sleep=sleep,
    )


async def retried(
    send: Callable[[], Awaitable[T]],
    *,
    method: str,
    what: str,
    retry: RetryPolicy = DEFAULT_RETRY,
    idempotent: bool = False,
    conflicts: bool = False,
    sleep: Sleep = asyncio.sleep,
) -> T:
    """Call ``send`` (one attempt of a ``method`` request, raising an
    :class:`~shared.errors.APIError` or :class:`~shared.errors.APIUnreachableError`) until it
    succeeds or ``retry`` says to stop; then the last error is raised. :func:`request` is this
    over httpx; a writer with its own connections (the annotator's PATCH path) calls it
    directly, so both share one retry rule."""
    attempt = 1
    while True:
        try:
            return await send()
        except (APIError, APIUnreachableError) as e:
            error = e
        if attempt >= retry.attempts or not retry.retryable(
            method, error, idempotent=idempotent, conflicts=conflicts
        ):
            raise error
        delay = retry.delay(attempt, error)
        logger.warning(
            "%s: attempt #%d/%d failed (%s); will retry in %.2fs",
            what,
            attempt,
            retry.attempts,
            error,
            delay,
        )
        await sleep(delay)
        attempt += 1
