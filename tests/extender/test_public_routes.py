"""Every HTTP endpoint either requires authentication or is on an explicit public list.

The walk covers every route the apps have, whatever their kind (FastAPI routes, plain
Starlette routes such as FastAPI's docs pages, mounts) and the scheduler verbs served ahead of
routing, so a route added later is checked without this file changing. A route passes when
its path is in :data:`PUBLIC`, or when it depends on an authentication dependency
(:data:`extender.common.access.AUTHENTICATING`: dispatch's, explain's) *and* answers 401 without a
token.

Public, and why:
- ``/healthz``, ``/readyz``, ``/readyz/{room}``: the kubelet's probes, which carry no
  credentials; they change nothing and say only "ok"/"ready"/what is not listed yet;
- ``/metrics``: Prometheus' scrape (counts, no object names or data);
- ``/filter``, ``/prioritize``, ``/preempt``: kube-scheduler's extender protocol has no
  credentials of its own; with ``--tls-client-ca-file`` they need a client certificate
  signed by that CA (``tests/extender/test_client_certificates.py``);
- ``/ui``: the status page's HTML shell (no data; a browser cannot send a token with a page
  load); its script calls ``/v1/status``, which authenticates.

FastAPI's ``/docs`` and ``/redoc`` are not served; ``/openapi.json`` answers only an
authenticated caller (``tests/extender/test_openapi.py``).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import fastapi.routing
import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute

from annotator.health import health_app
from annotator.metrics import AnnotatorMetrics
from extender.app import ExtenderApp
from extender.common.access import authenticates
from extender.dispatch.routes.deps import authenticated
from extender.scheduling.routes import PATHS as VERB_PATHS
from tests.fakes.jobs_api import JobsAPI, serve_dispatch

pytestmark = pytest.mark.anyio

PUBLIC = frozenset({"/healthz", "/readyz", "/readyz/{room}", "/metrics", "/ui"}) | VERB_PATHS
"""Answered to anyone (see the module's docstring for why each)."""
ANNOTATOR_PUBLIC = frozenset({"/healthz", "/readyz", "/metrics"})
PLACEHOLDERS = {"namespace": "batch", "name": "work-0123456789abcdef", "room": "scheduling"}


def endpoints(app: FastAPI) -> Iterator[tuple[str, frozenset[str], BaseRoute | None]]:
    """Every endpoint of ``app``: path, methods and route (``None`` for the scheduler verbs,
    which :class:`ExtenderApp` serves ahead of its routes)."""
    if isinstance(app, ExtenderApp) and app.scheduler_verbs is not None:
        for path in VERB_PATHS:
            yield path, frozenset({"POST"}), None
    yield from _walk(app.routes, "")


def _effective(routes: list[BaseRoute]) -> Iterator[BaseRoute]:
    """The routes as FastAPI serves them: an included router (kept as one lazy entry since
    FastAPI 0.16x) becomes its routes, with the prefix and dependencies of the inclusion."""
    resolve = getattr(fastapi.routing, "_iter_included_route_candidates", None)
    return iter(routes) if resolve is None else resolve(routes)


def _walk(routes: list[BaseRoute], prefix: str) -> Iterator[tuple[str, frozenset[str], Any]]:
    for route in _effective(routes):
        if isinstance(route, Mount):
            yield prefix + route.path, frozenset({"GET", "POST"}), route
            yield from _walk(route.routes, prefix + route.path)
        elif isinstance(route, Route):
            yield prefix + route.path, frozenset(route.methods or {"GET"}), route
        elif isinstance(route, WebSocketRoute):
            yield prefix + route.path, frozenset({"WEBSOCKET"}), route
        else:
            yield prefix + getattr(route, "path", repr(route)), frozenset({"?"}), route


def depends_on_authentication(route: BaseRoute | None) -> bool:
    return isinstance(route, APIRoute) and authenticates(route.dependant)


async def unguarded(app: FastAPI, client: httpx.AsyncClient, public: frozenset[str]) -> list[str]:
    """Endpoints neither public nor authenticated, as ``METHOD /path: why``."""
    found = []
    for path, methods, route in endpoints(app):
        if path in public:
            continue
        if not depends_on_authentication(route):
            found.append(f"{'|'.join(sorted(methods))} {path}: no authentication dependency")
            continue
        concrete = re.sub(r"\{(\w+)(:\w+)?\}", lambda m: PLACEHOLDERS.get(m[1], "x"), path)
        for method in sorted(methods - {"HEAD"}):
            response = await client.request(method, concrete, json={})
            if response.status_code != 401:
                found.append(f"{method} {path}: {response.status_code} without a token")
    return found


def every_room(
    tmp_path: Path, extra: Callable[[FastAPI], None] | None = None
) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """The extender serving both rooms (every route it has), ready, with a client."""
    return serve_dispatch(tmp_path, JobsAPI(), extra)


async def test_every_extender_endpoint_is_public_or_authenticated(tmp_path: Path) -> None:
    async for app, client in every_room(tmp_path):
        listed = {path for path, _, _ in endpoints(app)}
        # the walk sees the verbs, the probes and the dispatch API
        assert listed >= PUBLIC | {"/v1/jobs", "/v1/cronjobs/{namespace}/{name}"}
        assert await unguarded(app, client, PUBLIC) == []
        # and the public ones answer without credentials
        for path in ("/healthz", "/readyz", "/readyz/scheduling", "/metrics"):
            assert (await client.get(path)).status_code == 200, path
        filter_body = {"Pod": {"metadata": {"name": "p"}}, "Nodes": {"items": []}}
        assert (await client.post("/filter", json=filter_body)).status_code == 200


async def test_docs_pages_are_not_served_and_the_schema_needs_a_token(tmp_path: Path) -> None:
    async for _, client in every_room(tmp_path):
        for path in ("/docs", "/redoc", "/docs/oauth2-redirect"):
            assert (await client.get(path)).status_code == 404, path
        assert (await client.get("/openapi.json")).status_code == 401


async def test_a_route_added_later_is_caught(tmp_path: Path) -> None:
    """Whatever its kind: a FastAPI route, one under /v1 that reads the Authorization header
    itself, a plain Starlette route, a mount (and what the mounted app serves)."""

    def add_routes(app: FastAPI) -> None:
        @app.get("/debug/state")
        async def debug_state() -> dict[str, str]:
            return {"leak": "yes"}

        @app.get("/v1/jobs-export")
        async def export(authorization: str | None = None) -> dict[str, str]:
            return {"token": authorization or ""}

        async def plain(_: Any) -> httpx.Response:  # never called
            raise AssertionError

        app.router.routes.append(Route("/plain", plain))
        app.mount("/static", FastAPI())

    async for app, client in every_room(tmp_path, add_routes):
        found = await unguarded(app, client, PUBLIC)
        reported = {line.split(" ")[1].rstrip(":") for line in found}
        # each added route, and what the mounted app serves (its docs pages), nothing else
        assert {"/debug/state", "/v1/jobs-export", "/plain", "/static"} <= reported
        added = ("/debug/state", "/v1/jobs-export", "/plain", "/static")
        assert all(path.startswith(added) for path in reported), reported


async def test_an_authenticated_route_that_answers_anyway_is_caught(tmp_path: Path) -> None:
    """The dependency alone is not trusted: the route must also answer 401."""

    def add_route(app: FastAPI) -> None:
        from fastapi import Depends

        @app.get("/v1/lenient", dependencies=[Depends(authenticated)])
        async def lenient_route() -> dict[str, str]:
            return {}

        # a dependency that lets everyone in in its place
        app.dependency_overrides[authenticated] = lambda: None

    async for app, client in every_room(tmp_path, add_route):
        found = await unguarded(app, client, PUBLIC)
        assert "GET /v1/lenient: 200 without a token" in found


def test_the_annotator_serves_only_public_endpoints() -> None:
    app = health_app(AnnotatorMetrics(), lambda: (True, "ready"))
    paths = {path for path, _, _ in endpoints(app)}
    assert paths == ANNOTATOR_PUBLIC
