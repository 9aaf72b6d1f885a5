"""The dispatch routes' dependencies: the dispatcher, who the caller is, and what the caller
may do.

Authentication is a dependency of the ``/v1/jobs`` and ``/v1/cronjobs`` routers
(:data:`AUTHENTICATED`), so every route added under them answers 401 without an accepted
token, whatever its handler does. Each route also names its action with :func:`allowed`
(verb, resource, and where the namespace comes from: the path, all namespaces, or the posted
template), which answers 403 when the cluster's RBAC says no. Handlers call neither.
"""

# No ``from __future__ import annotations``: FastAPI reads the signature of the dependency
# :func:`allowed` builds, whose annotations name its own arguments.

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, Generic, Literal, Protocol, TypeVar

from fastapi import Depends, HTTPException, Request

from extender.common.access import Action, Caller, Forbidden, Unauthenticated, authenticating
from extender.common.access import upstream as upstream
from extender.common.routing import JSONRoute
from extender.dispatch.dispatcher import Dispatcher
from extender.dispatch.templates import JobTemplate
from shared.errors import LoadschedError


class DispatchState(Protocol):
    """What the routes read of the process's state (:class:`extender.state.ExtenderState`)."""

    @property
    def dispatcher(self) -> Dispatcher | None: ...

    def readiness(self, room: Literal["dispatch"]) -> tuple[bool, str]: ...


def get_dispatcher(request: Request) -> Dispatcher:
    """The dispatcher; 404 when this process does not serve dispatch, 503 (``Retry-After``)
    until its caches have been listed: before that, limits and known keys cannot be told."""
    state: DispatchState = request.app.state.loadsched
    if state.dispatcher is None:
        raise HTTPException(404, "job dispatch is not enabled (start with --job-templates)")
    ready, message = state.readiness("dispatch")
    if not ready:
        raise HTTPException(503, f"job dispatch is {message}", headers={"Retry-After": "1"})
    return state.dispatcher


DispatcherDep = Annotated[Dispatcher, Depends(get_dispatcher)]

DispatchRoute = JSONRoute
"""The dispatch routers' route class (:class:`extender.common.routing.JSONRoute`)."""


@authenticating
async def authenticated(dispatcher: DispatcherDep, request: Request) -> Caller:
    """The caller of this request; 401 (``WWW-Authenticate: Bearer``) without an accepted
    token, 502/503 when the API server cannot review it."""
    try:
        return await dispatcher.authorizer.authenticate(request.headers.get("authorization"))
    except Unauthenticated as e:
        raise HTTPException(401, str(e), headers={"WWW-Authenticate": "Bearer"}) from e
    except LoadschedError as e:
        raise upstream(e) from e


CallerDep = Annotated[Caller, Depends(authenticated)]
AUTHENTICATED = Depends(authenticated)
"""For ``APIRouter(dependencies=[AUTHENTICATED])``."""


class Target(Protocol):
    """What a request acts on, as far as authorization needs: its namespace (``""``: all
    namespaces; ``None``: nothing known, so only authentication applies and the route
    answers 404)."""

    @property
    def namespace(self) -> str | None: ...


@dataclass(frozen=True)
class Place:
    namespace: str | None


def in_path(namespace: str) -> Place:
    """The ``{namespace}`` path parameter."""
    return Place(namespace)


def everywhere() -> Place:
    """All namespaces (a list)."""
    return Place("")


R = TypeVar("R")


@dataclass(frozen=True)
class Posted(Generic[R]):
    """A posted body and the template it names (``None``: no such template)."""

    body: R
    template: JobTemplate | None

    @property
    def namespace(self) -> str | None:
        return self.template.namespace if self.template is not None else None


def allowed(
    verb: str,
    resource: str,
    target: Callable[..., Target | Awaitable[Target]] = in_path,
) -> Any:
    """A dependency: 403 unless the caller may ``verb`` ``resource`` in the namespace of the
    request's target; ``target`` is itself a dependency (:func:`in_path`, :func:`everywhere`, or
    one that reads the posted body), and the dependency's value is the target, so a handler
    can take the posted body from it."""

    async def check(
        caller: CallerDep, dispatcher: DispatcherDep, found: Annotated[Target, Depends(target)]
    ) -> Target:
        namespace = found.namespace
        if namespace is None:
            return found
        try:
            await dispatcher.authorizer.authorize(caller, Action(verb, resource, namespace))
        except Forbidden as e:
            raise HTTPException(403, str(e)) from e
        except LoadschedError as e:
            raise upstream(e) from e
        return found

    ACTIONS[check] = f"{verb} {resource}"
    return Depends(check)


ACTIONS: dict[Callable[..., Any], str] = {}
"""Each dependency made by :func:`allowed`, and the ``verb resource`` it checks."""
