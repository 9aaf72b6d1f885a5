"""/v1/jobs against a fake API server: the decisions that need no real cluster."""

from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from extender.app import create_app
from extender.settings import ExtenderSettings
from shared.errors import ConfigError
from shared.kube.config import KubeEndpoint
from tests.fakes.extender_calls import ClientFactory
from tests.fakes.jobs_api import TEMPLATES, JobsAPI, ready

pytestmark = pytest.mark.anyio


async def test_dispatch_is_off_without_templates(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/jobs", json={"template": "work", "key": "k"})
    assert response.status_code == 404 and "--job-templates" in response.json()["detail"]


async def test_create_then_duplicate_then_max_active(
    make_client: ClientFactory, tmp_path: Path
) -> None:
    api = JobsAPI()
    client = await ready(make_client, api, tmp_path)
    first = await client.post(
        "/v1/jobs", json={"template": "work", "key": "a", "data": {"ROW_ID": "1"}}
    )
    assert first.status_code == 201 and first.json()["created"] is True
    again = await client.post("/v1/jobs", json={"template": "work", "key": "a"})
    assert again.status_code == 200 and again.json()["uid"] == first.json()["uid"]
    # the Job created a moment ago counts at once: maxActive 1 is reached
    busy = await client.post("/v1/jobs", json={"template": "work", "key": "b"})
    assert busy.status_code == 429 and busy.headers["Retry-After"] == "10"
    assert "1 active Jobs (maxActive 1)" in busy.json()["detail"]
    assert len(api.created) == 1


async def test_no_node_fits(make_client: ClientFactory, tmp_path: Path) -> None:
    client = await ready(make_client, JobsAPI(), tmp_path)
    response = await client.post("/v1/jobs", json={"template": "huge", "key": "a"})
    assert (
        response.status_code == 429 and "no schedulable node can fit" in response.json()["detail"]
    )


@pytest.mark.parametrize(
    ("body", "status", "loc"),
    [
        ({"template": "work"}, 422, ["body", "key"]),
        ({"template": "work", "key": "k", "data": {"ROW_ID": 7}}, 422, ["body", "data", "ROW_ID"]),
        ({"template": "work", "key": "k", "data": {"OTHER": "x"}}, 422, ["body", "data", "OTHER"]),
        ({"template": "work", "key": "k", "extra": 1}, 422, ["body", "extra"]),
        ({"template": "nope", "key": "k"}, 404, None),
    ],
)
async def test_bad_requests_name_the_field(
    make_client: ClientFactory,
    tmp_path: Path,
    body: dict[str, Any],
    status: int,
    loc: list[Any] | None,
) -> None:
    client = await ready(make_client, JobsAPI(), tmp_path)
    response = await client.post("/v1/jobs", json=body)
    assert response.status_code == status, response.text
    if loc is not None:
        assert response.json()["detail"][0]["loc"][: len(loc)] == loc


async def test_api_server_refusal_is_a_502(make_client: ClientFactory, tmp_path: Path) -> None:
    client = await ready(make_client, JobsAPI(post_status=403), tmp_path)
    response = await client.post("/v1/jobs", json={"template": "work", "key": "a"})
    assert response.status_code == 502 and "403" in response.json()["detail"]
    missing = await client.get("/v1/jobs/batch/nothing")
    assert missing.status_code == 404


async def test_cronjobs_create_then_update(make_client: ClientFactory, tmp_path: Path) -> None:
    api = JobsAPI()
    client = await ready(make_client, api, tmp_path)
    body = {"template": "work", "key": "nightly", "schedule": "0 3 * * *", "data": {"ROW_ID": "1"}}
    first = await client.post("/v1/cronjobs", json=body)
    assert first.status_code == 201, first.text
    name = first.json()["name"]
    assert api.created[name]["spec"]["concurrencyPolicy"] == "Forbid"
    again = await client.post("/v1/cronjobs", json=body | {"schedule": "0 4 * * *"})
    assert again.status_code == 200 and again.json()["created"] is False
    assert api.created[name]["spec"]["schedule"] == "0 4 * * *"
    listed = await client.get("/v1/cronjobs")
    assert [c["name"] for c in listed.json()["items"]] == [name]


@pytest.mark.parametrize(
    ("extra", "loc"),
    [
        ({"schedule": "every day"}, ["body", "schedule"]),
        ({"schedule": "0 3 * * *", "timeZone": "Nowhere/Else"}, ["body", "timeZone"]),
        (
            {"schedule": "0 3 * * *", "concurrencyPolicy": "Sometimes"},
            ["body", "concurrencyPolicy"],
        ),
        ({"schedule": "0 3 * * *", "suspend": "yes"}, ["body", "suspend"]),
    ],
)
async def test_bad_cronjobs_name_the_field(
    make_client: ClientFactory, tmp_path: Path, extra: dict[str, Any], loc: list[Any]
) -> None:
    client = await ready(make_client, JobsAPI(), tmp_path)
    response = await client.post("/v1/cronjobs", json={"template": "work", "key": "k"} | extra)
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"][: len(loc)] == loc


async def test_tokenreview_and_subjectaccessreview(
    make_client: ClientFactory, tmp_path: Path
) -> None:
    api = JobsAPI()
    client = await ready(make_client, api, tmp_path, dispatch_auth="tokenreview")
    body = {"template": "work", "key": "a"}
    anonymous = await client.post("/v1/jobs", json=body)
    assert anonymous.status_code == 401 and anonymous.headers["WWW-Authenticate"] == "Bearer"
    bad = await client.post("/v1/jobs", json=body, headers={"Authorization": "Bearer bad"})
    assert bad.status_code == 401
    reader = await client.post("/v1/jobs", json=body, headers={"Authorization": "Bearer reader"})
    assert reader.status_code == 403
    assert reader.json()["detail"] == (
        "user system:serviceaccount:batch:reader may not create jobs in namespace batch: rbac"
    )
    writer = {"Authorization": "Bearer writer"}
    assert (await client.post("/v1/jobs", json=body, headers=writer)).status_code == 201
    # answers are cached: the second request costs no reviews
    before = len(api.reviews)
    assert (await client.post("/v1/jobs", json=body, headers=writer)).status_code == 200
    assert len(api.reviews) == before
    # an unknown template is a 404 only for an authenticated caller
    unknown = await client.post("/v1/jobs", json={"template": "nope", "key": "a"}, headers=writer)
    assert unknown.status_code == 404
    assert (await client.post("/v1/jobs", json={"template": "nope", "key": "a"})).status_code == 401
    # authentication comes first: a bad body is a 422 only for an authenticated caller
    assert (await client.post("/v1/jobs", json={"template": "work"})).status_code == 401
    incomplete = await client.post("/v1/jobs", json={"template": "work"}, headers=writer)
    assert incomplete.status_code == 422
    # a token is reviewed once: another action by the same caller costs one access review
    before = len(api.reviews)
    assert (await client.get("/v1/jobs", headers=writer)).status_code == 200
    assert api.reviews[before:] == ["access"]
    denied = await client.get("/v1/jobs/batch/x", headers={"Authorization": "Bearer reader"})
    assert denied.status_code == 403
    assert "may not get jobs in namespace batch" in denied.json()["detail"]


async def test_static_tokens(make_client: ClientFactory, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.csv"
    tokens.write_text('s3cret,ci-bot,1001,"ops,ci"\n')
    client = await ready(
        make_client, JobsAPI(), tmp_path, dispatch_auth="static", dispatch_tokens_file=tokens
    )
    body = {"template": "work", "key": "a"}
    assert (await client.post("/v1/jobs", json=body)).status_code == 401
    wrong = await client.post("/v1/jobs", json=body, headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    basic = await client.post("/v1/jobs", json=body, headers={"Authorization": "Basic eDp5"})
    assert basic.status_code == 401 and "bearer" in basic.json()["detail"]
    ok = await client.post("/v1/jobs", json=body, headers={"Authorization": "Bearer s3cret"})
    assert ok.status_code == 201


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_static_mode_needs_a_token_file(tmp_path: Path) -> None:
    path = tmp_path / "templates.yaml"
    path.write_text(yaml.safe_dump(TEMPLATES))
    settings = ExtenderSettings(job_templates=path, dispatch_auth="static")
    with pytest.raises(ConfigError, match="dispatch-tokens-file"):
        create_app(settings, endpoint=KubeEndpoint(host="https://api.test"))
