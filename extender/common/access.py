"""Who may use the extender's HTTP API (job dispatch, explain), decided by the cluster itself.
Neutral ground: both rooms (:mod:`extender.dispatch`, :mod:`extender.scheduling`) import it.

- ``tokenreview`` (the default): the bearer token is checked with a TokenReview against the
  API server, and the action with a SubjectAccessReview (``create jobs`` in the template's
  namespace, ``get pods``, ...), so the cluster's own RBAC decides. Answers are cached
  for ``cache_seconds`` per (token, action), so a busy client costs two reviews a period.
- ``static``: tokens from a file in kube-apiserver's ``--token-auth-file`` format
  (``token,user,uid,"group1,group2"``); every listed token may do everything.
- ``none``: no checks at all; only when explicitly configured.

:meth:`Authorizer.authenticate` answers who the caller is (:class:`Unauthenticated`, a 401,
if no one), :meth:`Authorizer.authorize` whether that caller may do an action
(:class:`Forbidden`, a 403). :func:`http_error` turns either, or an API server that cannot
review, into the HTTP answer. The dispatch routes run the first as a dependency of their
router and the second per route (:mod:`extender.dispatch.routes.deps`); explain does the same
(:mod:`extender.scheduling.explain_routes`). :func:`presented_authorization` finds the token of a
request that may have come through the API server's service proxy (the status report; explain
reads the same two headers in the same order).
"""

from __future__ import annotations

import asyncio
import csv
import hashlib
import hmac
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import httpx
from fastapi import HTTPException, Request

from shared.errors import APIError, ConfigError, LoadschedError
from shared.kube import creating
from shared.kube.paths import SUBJECT_ACCESS_REVIEWS, TOKEN_REVIEWS, Resource
from shared.kube.requesting import DEFAULT_RETRY
from shared.kube.retrying import RetryPolicy

logger = logging.getLogger(__name__)

AuthMode = Literal["tokenreview", "static", "none"]

D = TypeVar("D", bound=Callable[..., Any])

AUTHENTICATING: set[Callable[..., Any]] = set()
"""Every FastAPI dependency that answers 401 without an accepted token (registered with
:func:`authenticating`): what tests/extender/test_public_routes.py looks for on each route."""


def authenticating(dependency: D) -> D:
    """Register ``dependency`` as one that authenticates the request."""
    AUTHENTICATING.add(dependency)
    return dependency


def authenticates(dependant: Any) -> bool:
    """Whether a FastAPI route's ``dependant`` (its dependency tree) holds one of
    :data:`AUTHENTICATING`, at any depth."""
    pending = list(dependant.dependencies)
    while pending:
        dependency = pending.pop()
        if dependency.call in AUTHENTICATING:
            return True
        pending += dependency.dependencies
    return False


class Unauthenticated(LoadschedError):
    """No token, or one the cluster does not accept."""


class Forbidden(LoadschedError):
    """The caller is known but may not do this."""


@dataclass(frozen=True)
class Identity:
    user: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: dict[str, list[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Caller:
    """Who sends a request: ``identity`` is ``None`` when checks are off (``none``);
    ``digest`` names the token in the review cache (``tokenreview`` only)."""

    identity: Identity | None
    digest: str = ""


@dataclass(frozen=True)
class Action:
    verb: str
    resource: str
    namespace: str
    group: str = "batch"

    def __str__(self) -> str:
        where = f"in namespace {self.namespace}" if self.namespace else "in all namespaces"
        return f"{self.verb} {self.resource} {where}"


PROXIED_AUTHORIZATION = "x-loadsched-authorization"
"""Where a client behind the API server's service proxy puts its ``Bearer <token>``: the proxy
removes ``Authorization`` once it has authenticated the caller (``kubectl loadsched``)."""


def presented_authorization(headers: Mapping[str, str]) -> str | None:
    """The credentials a request presents: ``X-Loadsched-Authorization`` (through the API
    server's service proxy) before ``Authorization``. ``headers`` are looked up by lower-case
    name (Starlette's are case-insensitive)."""
    return headers.get(PROXIED_AUTHORIZATION) or headers.get("authorization")


def bearer_token(authorization: str | None) -> str:
    if not authorization:
        raise Unauthenticated("no credentials: send Authorization: Bearer <token>")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated("only bearer tokens are accepted (Authorization: Bearer <token>)")
    return token.strip()


def load_static_tokens(path: Path) -> dict[str, Identity]:
    """``token,user,uid[,"groups"]`` lines, as kube-apiserver's token file."""
    try:
        rows = list(csv.reader(path.read_text().splitlines()))
    except OSError as e:
        raise ConfigError(str(path), "", f"cannot read: {e.strerror}") from e
    tokens: dict[str, Identity] = {}
    for number, row in enumerate(rows, start=1):
        if not row or row[0].startswith("#"):
            continue
        if len(row) < 2 or not row[0] or not row[1]:
            raise ConfigError(str(path), f"line {number}", "expected token,user[,uid[,groups]]")
        groups = tuple(g for g in (row[3].split(",") if len(row) > 3 else ()) if g)
        tokens[row[0]] = Identity(user=row[1], uid=row[2] if len(row) > 2 else "", groups=groups)
    if not tokens:
        raise ConfigError(str(path), "", "no tokens")
    return tokens


class Authorizer:
    def __init__(
        self,
        mode: AuthMode,
        *,
        client: httpx.AsyncClient | None = None,
        static_tokens: dict[str, Identity] | None = None,
        cache_seconds: float = 10.0,
        monotonic: Callable[[], float] = time.monotonic,
        retry: RetryPolicy = DEFAULT_RETRY,
    ) -> None:
        self.mode = mode
        self._client = client
        self._retry = retry
        self._static = static_tokens or {}
        self._cache_seconds = cache_seconds
        self._monotonic = monotonic
        self._cache: dict[tuple[str, Action | None], tuple[float, Identity | Exception]] = {}
        self._reviewing: dict[tuple[str, Action | None], asyncio.Future[Identity | Exception]] = {}

    def attach(self, client: httpx.AsyncClient) -> None:
        """Send reviews through ``client`` (known once the cluster is reached)."""
        self._client = client

    async def authenticate(self, authorization: str | None) -> Caller:
        """Who sends ``authorization`` (an ``Authorization`` header); raises
        :class:`Unauthenticated` unless the mode is ``none`` or the token is accepted."""
        if self.mode == "none":
            return Caller(None)
        token = bearer_token(authorization)
        if self.mode == "static":
            for known, identity in self._static.items():
                if hmac.compare_digest(known, token):
                    return Caller(identity)
            raise Unauthenticated("the token is not accepted")
        digest = hashlib.sha256(token.encode()).hexdigest()
        identity = await self._cached((digest, None), lambda: self._review_token(token))
        return Caller(identity, digest)

    async def authorize(self, caller: Caller, action: Action) -> None:
        """Raises :class:`Forbidden` unless ``caller`` may do ``action``: always in modes
        ``none`` and ``static`` (every listed token may do everything), else as the cluster's
        RBAC answers a SubjectAccessReview."""
        identity = caller.identity
        if self.mode != "tokenreview" or identity is None:
            return
        await self._cached((caller.digest, action), lambda: self._review_access(identity, action))

    async def require(self, authorization: str | None, action: Action | None) -> Identity | None:
        """The caller's identity if it may do ``action`` (``None``: is it anyone at all);
        raises otherwise."""
        caller = await self.authenticate(authorization)
        if action is not None:
            await self.authorize(caller, action)
        return caller.identity

    async def _cached(
        self, key: tuple[str, Action | None], review: Callable[[], Awaitable[Identity]]
    ) -> Identity:
        """The outcome of ``review`` (an identity, or the 401/403 it raised), kept for
        ``cache_seconds`` under ``key``: a token's digest and the action (``None``: the token
        itself). Callers asking about the same key while it is reviewed share that one review,
        so requests that arrive together when an entry expires send one review, not one each."""
        cached = self._cache.get(key)
        if cached is not None and cached[0] > self._monotonic():
            outcome = cached[1]
        else:
            running = self._reviewing.get(key)
            if running is None:
                running = asyncio.ensure_future(self._review_once(key, review))
                running.add_done_callback(_retrieved)
                self._reviewing[key] = running
            # a caller that goes away does not cancel the review the others wait for
            outcome = await asyncio.shield(running)
        if isinstance(outcome, Exception):
            # shared by every caller (and kept): each raise starts a traceback of its own
            raise outcome.with_traceback(None)
        return outcome

    async def _review_once(
        self, key: tuple[str, Action | None], review: Callable[[], Awaitable[Identity]]
    ) -> Identity | Exception:
        try:
            try:
                outcome: Identity | Exception = await review()
            except (Unauthenticated, Forbidden) as e:
                outcome = e
        finally:
            del self._reviewing[key]
        if len(self._cache) > 10_000:
            self._cache.clear()
        self._cache[key] = (self._monotonic() + self._cache_seconds, outcome)
        return outcome

    async def _review_token(self, token: str) -> Identity:
        review = await self._post(
            TOKEN_REVIEWS,
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenReview",
                "spec": {"token": token},
            },
        )
        status = review.get("status") or {}
        if not status.get("authenticated"):
            raise Unauthenticated(f"the token is not accepted: {status.get('error') or 'unknown'}")
        user = status.get("user") or {}
        return Identity(
            user=str(user.get("username", "")),
            uid=str(user.get("uid", "")),
            groups=tuple(user.get("groups") or ()),
            extra={k: list(v) for k, v in (user.get("extra") or {}).items()},
        )

    async def _review_access(self, identity: Identity, action: Action) -> Identity:
        attributes: dict[str, Any] = {
            "verb": action.verb,
            "group": action.group,
            "resource": action.resource,
        }
        if action.namespace:
            attributes["namespace"] = action.namespace
        access = await self._post(
            SUBJECT_ACCESS_REVIEWS,
            {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "spec": {
                    "user": identity.user,
                    "uid": identity.uid,
                    "groups": list(identity.groups),
                    "extra": identity.extra,
                    "resourceAttributes": attributes,
                },
            },
        )
        verdict = access.get("status") or {}
        if not verdict.get("allowed"):
            reason = verdict.get("reason") or "no RBAC rule allows it"
            raise Forbidden(f"user {identity.user} may not {action}: {reason}")
        return identity

    async def _post(self, resource: Resource, body: dict[str, Any]) -> dict[str, Any]:
        if self._client is None:  # pragma: no cover - create_app always passes one
            raise LoadschedError("no API server client for reviews")
        content = await creating.create(  # a review stores nothing: repeating it is harmless
            self._client, resource, body, retry=self._retry, idempotent=True
        )
        result: dict[str, Any] = json.loads(content)
        return result


def app_authorizer(request: Request) -> Authorizer:
    """The dependency that hands a route the app's :class:`Authorizer` of its own views
    (``app.state.api_authorizer``: the status report and ``/openapi.json``)."""
    found: Authorizer = request.app.state.api_authorizer
    return found


def upstream(error: LoadschedError) -> HTTPException:
    """The answer when the API server could not review: 502 if it refused, else 503."""
    if isinstance(error, APIError):
        return HTTPException(502, f"the API server refused: {error}")
    return HTTPException(503, f"the API server is unreachable: {error}")


def http_error(error: LoadschedError) -> HTTPException:
    """401 (``WWW-Authenticate: Bearer``), 403, or :func:`upstream`'s answer."""
    if isinstance(error, Unauthenticated):
        return HTTPException(401, str(error), headers={"WWW-Authenticate": "Bearer"})
    if isinstance(error, Forbidden):
        return HTTPException(403, str(error))
    return upstream(error)


def _retrieved(review: asyncio.Future[Identity | Exception]) -> None:
    """A review whose every caller went away: its failure is not logged as never retrieved
    (the next caller asks again)."""
    if not review.cancelled():
        review.exception()
