"""``GET /ui``, the status page, and ``GET /v1/status``, the JSON it shows.

The page is a shell: one HTML file with its CSS and JavaScript inline, no data and no external
asset (a Content-Security-Policy lets the browser load nothing else, so it works air-gapped).
It is public because a browser cannot attach a bearer token to a page load. Its script asks for
a token (kept in the tab's ``sessionStorage`` only) and calls ``v1/status`` and
``v1/explain/...`` relative to the page's own URL, so the page also works under a path prefix
such as the API server's service proxy.

``/v1/status`` answers 401 without an accepted token and 403 unless the caller may ``list
nodes`` in the whole cluster (a SubjectAccessReview), with the same authentication as the
dispatch API (:mod:`extender.common.access`, ``--dispatch-auth``). As for explain, the token is read
from ``X-Loadsched-Authorization`` when the request came through the API server's service
proxy (``kubectl loadsched quotas``), else from ``Authorization``.
"""

from __future__ import annotations

import base64
import hashlib
import re
from functools import cache
from importlib import resources
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse

from extender.common.access import (
    Action,
    Authorizer,
    Caller,
    app_authorizer,
    authenticating,
    http_error,
    presented_authorization,
)
from extender.status.models import STATUS_PARTS, Status, StatusPart
from extender.status.report import StatusSources
from shared.errors import LoadschedError

STATUS_ACTION = Action("list", "nodes", "", group="")
"""What ``/v1/status`` asks the cluster's RBAC: it shows every node."""


def sources(request: Request) -> StatusSources:
    found: StatusSources = request.app.state.status
    return found


SourcesDep = Annotated[StatusSources, Depends(sources)]


@authenticating
async def may_see_status(
    request: Request, access: Annotated[Authorizer, Depends(app_authorizer)]
) -> Caller:
    """401 without an accepted token, 403 unless the caller may list nodes, 502/503 when the
    API server cannot review."""
    try:
        caller = await access.authenticate(presented_authorization(request.headers))
        await access.authorize(caller, STATUS_ACTION)
    except LoadschedError as e:
        raise http_error(e) from e
    return caller


STATUS_VIEWER = Depends(may_see_status)

router = APIRouter(tags=["status"])


@router.get("/v1/status", response_model=Status, dependencies=[STATUS_VIEWER])
async def status(
    found: SourcesDep,
    part: Annotated[
        list[StatusPart] | None,
        Query(description="only these parts (repeatable); the others are null. Default: all"),
    ] = None,
) -> Status:
    """Every node's verdict now (worst first) with each metric's value, age, freshness, limit
    and estimate; the elastic quotas; the dispatch templates with their active and pending
    counts; the rebalancer's last round."""
    return await found.full_report(part or STATUS_PARTS)


@cache
def page() -> tuple[str, str]:
    """The page and its Content-Security-Policy (the hashes of its inline style and script)."""
    html = resources.files("extender.status").joinpath("page.html").read_text(encoding="utf-8")

    def hashes(tag: str) -> str:
        found = re.findall(rf"<{tag}>(.*?)</{tag}>", html, flags=re.DOTALL)
        return " ".join(
            f"'sha256-{base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()}'"
            for text in found
        )

    policy = (
        f"default-src 'none'; script-src {hashes('script')}; style-src {hashes('style')}; "
        "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'"
    )
    return html, policy


@router.get("/ui", response_class=HTMLResponse, include_in_schema=False)
async def ui() -> HTMLResponse:
    """The status page (public: it carries no data)."""
    html, policy = page()
    return HTMLResponse(
        html,
        headers={
            "Content-Security-Policy": policy,
            "Cache-Control": "no-store",
            "Referrer-Policy": "no-referrer",
            "X-Content-Type-Options": "nosniff",
        },
    )
