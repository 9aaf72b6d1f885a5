"""``/healthz``, ``/readyz`` and ``/metrics`` for the annotator."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI, Response
from fastapi.responses import PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from annotator.metrics import AnnotatorMetrics


def health_app(metrics: AnnotatorMetrics, readiness: Callable[[], tuple[bool, str]]) -> FastAPI:
    app = FastAPI(title="loadsched annotator", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/healthz", response_class=PlainTextResponse)
    async def healthz() -> str:
        return "ok"

    @app.get("/readyz", response_class=PlainTextResponse)
    async def readyz(response: Response) -> str:
        ready, message = readiness()
        if not ready:
            response.status_code = 503
        return message

    @app.get("/metrics")
    async def prometheus_metrics() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    return app
