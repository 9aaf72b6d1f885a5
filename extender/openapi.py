"""``GET /openapi.json``: the HTTP API's OpenAPI schema, for ``curl`` users and client
generators, behind the same authentication as the ``/v1`` API (:mod:`extender.common.access`,
``--dispatch-auth``): 401 without an accepted token. Any authenticated caller may read it; it
describes the API, not the cluster. No interactive page is served (FastAPI's ``/docs`` and
``/redoc`` load their scripts from a CDN).

:func:`api_schema` is FastAPI's schema with a ``bearer`` security scheme on every operation
whose route authenticates (depends on an :func:`extender.common.access.authenticating` dependency),
so generated clients send the token. ``docs/reference/openapi.json`` is the same document
(``make reference``). kube-scheduler's verbs (``/filter``, ...) are served ahead of FastAPI
and are not in it.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import JSONResponse
from fastapi.routing import iter_route_contexts

from extender.common.access import (
    Authorizer,
    Caller,
    app_authorizer,
    authenticates,
    authenticating,
    http_error,
    presented_authorization,
)
from shared.errors import LoadschedError

SCHEMA_PATH = "/openapi.json"
BEARER = "bearer"
"""The security scheme's name in the schema's ``components.securitySchemes``."""
BEARER_SCHEME = {
    "type": "http",
    "scheme": "bearer",
    "description": "A token the cluster accepts (--dispatch-auth tokenreview) or one of "
    "--dispatch-tokens-file (static). Explain, status and this schema also read it from "
    "X-Loadsched-Authorization, for callers behind the API server's service proxy.",
}


@authenticating
async def authenticated(
    request: Request, access: Annotated[Authorizer, Depends(app_authorizer)]
) -> Caller:
    """401 (``WWW-Authenticate: Bearer``) without an accepted token, 502/503 when the API
    server cannot review it."""
    try:
        return await access.authenticate(presented_authorization(request.headers))
    except LoadschedError as e:
        raise http_error(e) from e


router = APIRouter(tags=["openapi"])


@router.get(SCHEMA_PATH, include_in_schema=False, dependencies=[Depends(authenticated)])
async def openapi_schema(request: Request) -> JSONResponse:
    """The OpenAPI schema of this app."""
    return JSONResponse(api_schema(request.app))


def api_schema(app: FastAPI) -> dict[str, Any]:
    """``app``'s OpenAPI schema, with the bearer scheme on each authenticated operation."""
    schema = copy.deepcopy(app.openapi())
    secured = set(authenticated_operations(app))
    for path, operations in schema.get("paths", {}).items():
        for method, operation in operations.items():
            if (method.upper(), path) in secured:
                operation["security"] = [{BEARER: []}]
    if secured:
        schemes = schema.setdefault("components", {}).setdefault("securitySchemes", {})
        schemes[BEARER] = BEARER_SCHEME
    return schema


def authenticated_operations(app: FastAPI) -> Iterator[tuple[str, str]]:
    """(method, path) of every route that depends on an authenticating dependency."""
    for context in iter_route_contexts(app.routes):
        dependant = getattr(context, "dependant", None)
        if dependant is None or not authenticates(dependant):
            continue
        for method in context.methods or ():
            yield method, str(context.path_format)
