"""No route under ``/v1`` answers without credentials: every operation of the app's OpenAPI
schema is called without a token (and with one the cluster rejects) and must answer 401
before doing anything; every such route also names the action its RBAC check is for.

Exempt, because their callers hold no dispatch token and they change nothing:
- ``/healthz``, ``/readyz``, ``/readyz/{room}``: the kubelet's probes;
- ``/metrics``: Prometheus' scrape;
- ``/docs``, ``/docs/oauth2-redirect``, ``/redoc``: not served (404); ``/openapi.json``, not in
  the schema itself, authenticates like ``/v1`` (``tests/extender/test_openapi.py``);
- ``/filter``, ``/prioritize``, ``/preempt``: kube-scheduler's extender calls, served ahead of
  FastAPI (:mod:`extender.scheduling.routes`), not in the schema either; the scheduler is
  trusted by the network path and TLS (``extender.tls``), as kube-scheduler's extender
  protocol has no credentials of its own.
"""

import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute

from extender.dispatch.routes import cronjobs, jobs
from extender.dispatch.routes.deps import ACTIONS
from tests.fakes.jobs_api import JobsAPI, serve_dispatch

pytestmark = pytest.mark.anyio

EXEMPT = {"/healthz", "/readyz", "/readyz/{room}", "/metrics"}
"""The schema's paths outside ``/v1`` (see the module's docstring for why)."""
KNOWN = {
    "POST /v1/jobs",
    "GET /v1/jobs",
    "GET /v1/jobs/{namespace}/{name}",
    "DELETE /v1/jobs/{namespace}/{name}",
    "GET /v1/jobs/{namespace}/{name}/watch",
    "POST /v1/cronjobs",
    "GET /v1/cronjobs",
    "GET /v1/cronjobs/{namespace}/{name}",
    "DELETE /v1/cronjobs/{namespace}/{name}",
}
"""The dispatch API's operations today: the enumeration must find at least these."""
ROUTERS = (jobs.router, cronjobs.router)
"""The dispatch API's routers."""
PLACEHOLDERS = {"namespace": "batch", "name": "work-0123456789abcdef"}


def minimal(schema: dict[str, Any], components: dict[str, Any]) -> Any:
    """The smallest JSON value ``schema`` accepts, filling required properties only."""
    if "$ref" in schema:
        return minimal(components[schema["$ref"].rsplit("/", 1)[1]], components)
    if "anyOf" in schema:
        return minimal(schema["anyOf"][0], components)
    if "enum" in schema:
        return schema["enum"][0]
    kind: str = schema.get("type", "")
    if kind == "object":
        properties = schema.get("properties", {})
        return {k: minimal(properties[k], components) for k in schema.get("required", [])}
    samples = {"string": "x", "integer": 1, "number": 1, "boolean": False, "array": []}
    return samples.get(kind, None)


def operations(app: FastAPI) -> list[tuple[str, str, str, Any]]:
    """Every operation of the app's OpenAPI schema: method, path as declared, path with its
    parameters filled in, and the smallest body it accepts (``None`` without one)."""
    schema = app.openapi()
    components = schema.get("components", {}).get("schemas", {})
    found = []
    for path, methods in schema["paths"].items():
        concrete = re.sub(r"\{(\w+)\}", lambda m: PLACEHOLDERS.get(m[1], "x"), path)
        for method, operation in methods.items():
            body = None
            if "requestBody" in operation:
                content = operation["requestBody"]["content"]["application/json"]["schema"]
                body = minimal(content, components)
            found.append((method.upper(), path, concrete, body))
    return found


async def answered_without_credentials(app: FastAPI, client: httpx.AsyncClient) -> list[str]:
    """The ``/v1`` operations that do not answer 401 (with ``WWW-Authenticate: Bearer``)
    without a token or with one the cluster rejects, as ``METHOD /path: status``."""
    leaks = []
    for method, path, concrete, body in operations(app):
        if not path.startswith("/v1"):
            continue
        for headers in ({}, {"Authorization": "Bearer bad"}):
            response = await client.request(method, concrete, json=body, headers=headers)
            challenged = response.headers.get("WWW-Authenticate") == "Bearer"
            if response.status_code != 401 or not challenged:
                leaks.append(f"{method} {path}: {response.status_code}")
                break
    return leaks


async def test_every_v1_route_answers_401_without_a_token(tmp_path: Path) -> None:
    api = JobsAPI()
    async for app, client in serve_dispatch(tmp_path, api):
        schema_paths = set(app.openapi()["paths"])
        assert {p for p in schema_paths if not p.startswith("/v1")} == EXEMPT
        assert {f"{method} {path}" for method, path, _, _ in operations(app)} >= KNOWN
        assert await answered_without_credentials(app, client) == []
        # nothing was reviewed beyond the rejected token, nothing created
        assert set(api.reviews) == {"token"} and api.created == {}
        # the same calls with a token the cluster accepts get past authentication
        writer = {"Authorization": "Bearer writer"}
        response = await client.get("/v1/jobs", headers=writer)
        assert response.status_code == 200 and "access" in api.reviews


VIEWS = {"/v1/status", "/v1/explain", "/v1/explain/{namespace}/{pod}"}
"""``/v1`` routes outside the dispatch routers, with their own authorization."""


async def test_every_v1_route_names_its_action(tmp_path: Path) -> None:
    """Each route of the dispatch routers (and the schema's ``/v1`` operations are exactly
    theirs) depends on one :func:`extender.dispatch.routes.deps.allowed` check, for its own
    resource."""
    async for app, _ in serve_dispatch(tmp_path, JobsAPI()):
        routes = [r for router in ROUTERS for r in router.routes if isinstance(r, APIRoute)]
        declared = {f"{m} {r.path}" for r in routes for m in r.methods or ()}
        in_schema = {
            f"{m} {p}" for m, p, _, _ in operations(app) if p.startswith("/v1") and p not in VIEWS
        }
        assert declared == in_schema and declared >= KNOWN
        for route in routes:
            actions = [ACTIONS[call] for call in _calls(route.dependant) if call in ACTIONS]
            assert len(actions) == 1, (route.path, actions)
            verb, resource = actions[0].split()
            assert resource == route.path.split("/")[2]
            assert verb in {"create", "list", "get", "delete", "watch"}


async def test_the_check_catches_a_route_added_without_the_dependency(tmp_path: Path) -> None:
    """A bare router's route is reported; a route added to a copy of the jobs router (its
    dependencies kept) is not: the router brings authentication with it."""

    def add_routes(app: FastAPI) -> None:
        bare = APIRouter(prefix="/v1/bare")
        copy = APIRouter(prefix="/v1/copy", dependencies=list(jobs.router.dependencies))

        @bare.post("/leak")
        async def leak(body: dict[str, str]) -> dict[str, str]:
            return body

        @copy.get("/{namespace}/new")
        async def new(namespace: str) -> dict[str, str]:
            return {"namespace": namespace}

        app.include_router(bare)
        app.include_router(copy)

    async for app, client in serve_dispatch(tmp_path, JobsAPI(), add_routes):
        assert await answered_without_credentials(app, client) == ["POST /v1/bare/leak: 200"]


def _calls(dependant: Any) -> list[Any]:
    calls = []
    for sub in dependant.dependencies:
        calls.append(sub.call)
        calls += _calls(sub)
    return calls
