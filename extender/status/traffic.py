"""Counts the extender's HTTP API answers (``/v1/jobs``, ``/v1/cronjobs``, ``/v1/status``,
``/v1/explain``, ...) by route, method and status code, so dispatch rates and its 429s can be
graphed. The scheduler verbs are counted by their own metrics and never reach this middleware
(:class:`extender.app.ExtenderApp` serves them ahead of it)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter
from starlette.types import ASGIApp, Message, Receive, Scope, Send

UNMATCHED = "unmatched"
"""The route label of a request no route matched (a 404), so paths never become labels."""


def api_requests(registry: CollectorRegistry) -> Counter:
    return Counter(
        "loadsched_extender_api_requests_total",
        "HTTP API answers (not the scheduler verbs) by route template, method and status code.",
        ["route", "method", "code"],
        registry=registry,
    )


class CountAnswers:
    """ASGI middleware: one count per HTTP answer, labelled by the route's path template."""

    def __init__(self, app: ASGIApp, *, counter: Counter) -> None:
        self.app = app
        self.counter = counter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        code = 500

        async def sending(message: Message) -> None:
            nonlocal code
            if message["type"] == "http.response.start":
                code = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = getattr(scope.get("route"), "path", None) or UNMATCHED
            self.counter.labels(route, scope["method"], str(code)).inc()
