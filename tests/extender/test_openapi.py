"""``GET /openapi.json`` (:mod:`extender.openapi`): the HTTP API's schema, served to callers
with a token the ``/v1`` API accepts, in each ``--dispatch-auth`` mode, and 401 to anyone
else; the same document as docs/reference/openapi.json; no interactive pages."""

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from extender.app import create_app
from extender.common.access import AUTHENTICATING, Authorizer
from extender.openapi import BEARER, api_schema, authenticated
from extender.settings import ExtenderSettings

pytestmark = pytest.mark.anyio

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())
COMMITTED = ROOT / "docs" / "reference" / "openapi.json"
TOKENS = 'reader-token,reader,uid-1,"readers"\n'


@pytest.fixture
def tokens_file(tmp_path: Path) -> Path:
    path = tmp_path / "tokens.csv"
    path.write_text(TOKENS)
    return path


async def test_the_schema_needs_an_accepted_token(make_client: Any, tokens_file: Path) -> None:
    client = await make_client(dispatch_auth="static", dispatch_tokens_file=tokens_file)
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic eDp5"}):
        response = await client.get("/openapi.json", headers=headers)
        assert response.status_code == 401, headers
        assert response.headers["WWW-Authenticate"] == "Bearer"
    response = await client.get("/openapi.json", headers={"Authorization": "Bearer reader-token"})
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == json.loads(COMMITTED.read_text())


async def test_through_the_service_proxy_the_token_comes_in_its_own_header(
    make_client: Any, tokens_file: Path
) -> None:
    client = await make_client(dispatch_auth="static", dispatch_tokens_file=tokens_file)
    proxied = {"X-Loadsched-Authorization": "Bearer reader-token"}
    assert (await client.get("/openapi.json", headers=proxied)).status_code == 200


async def test_with_checks_off_anyone_reads_it(make_client: Any) -> None:
    client = await make_client(dispatch_auth="none")
    assert (await client.get("/openapi.json")).status_code == 200


async def test_without_a_cluster_tokenreview_cannot_review(make_client: Any) -> None:
    """As for /v1/status: 503, not a schema served unchecked."""
    client = await make_client(dispatch_auth="tokenreview")
    response = await client.get("/openapi.json", headers={"Authorization": "Bearer any"})
    assert response.status_code == 503


class TokenReviews:
    """The API server's TokenReview endpoint: ``good`` is accepted, any other token not."""

    def __init__(self) -> None:
        self.reviewed: list[str] = []

    def handler(self, request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/apis/authentication.k8s.io/v1/tokenreviews"
        token = json.loads(request.content)["spec"]["token"]
        self.reviewed.append(token)
        status = {"authenticated": token == "good", "user": {"username": "reader"}}
        return httpx.Response(201, json={"status": status})


@pytest.fixture
async def reviewed() -> AsyncIterator[tuple[httpx.AsyncClient, TokenReviews]]:
    """The extender in tokenreview mode, its reviews sent to :class:`TokenReviews`."""
    app = create_app(ExtenderSettings(dispatch_auth="tokenreview"))
    reviews = TokenReviews()
    async with httpx.AsyncClient(
        transport=httpx.MockTransport(reviews.handler), base_url="https://api.test"
    ) as kube:
        app.state.api_authorizer = Authorizer("tokenreview", client=kube)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://extender") as client:
            yield client, reviews


async def test_tokenreview_lets_the_cluster_decide(
    reviewed: tuple[httpx.AsyncClient, TokenReviews],
) -> None:
    client, reviews = reviewed
    refused = await client.get("/openapi.json", headers={"Authorization": "Bearer bad"})
    assert refused.status_code == 401 and "not accepted" in refused.json()["detail"]
    assert (await client.get("/openapi.json")).status_code == 401
    accepted = await client.get("/openapi.json", headers={"Authorization": "Bearer good"})
    assert accepted.status_code == 200 and "/v1/jobs" in accepted.json()["paths"]
    assert reviews.reviewed == ["bad", "good"]  # no token: refused before any review


def test_every_operation_that_authenticates_says_so_in_the_schema() -> None:
    app = create_app(ExtenderSettings())
    schema = api_schema(app)
    assert schema["components"]["securitySchemes"][BEARER] == {
        **schema["components"]["securitySchemes"][BEARER],
        "type": "http",
        "scheme": "bearer",
    }
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            secured = operation.get("security") == [{BEARER: []}]
            assert secured == path.startswith("/v1"), f"{method} {path}"
    assert schema["info"]["version"] == app.version
    # the schema route itself is authenticated and stays out of the schema it serves
    assert authenticated in AUTHENTICATING and "/openapi.json" not in schema["paths"]


async def test_no_interactive_pages(make_client: Any) -> None:
    client = await make_client(dispatch_auth="none")
    for path in ("/docs", "/redoc", "/docs/oauth2-redirect"):
        assert (await client.get(path)).status_code == 404, path
