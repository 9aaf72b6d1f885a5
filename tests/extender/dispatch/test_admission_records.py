"""/v1/jobs with admission records: what another replica admitted counts, and a finished key
is answered without a second Job."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from extender.dispatch.admission import DATA_KEY
from extender.dispatch.building import key_hash
from tests.fakes.clock import NOW
from tests.fakes.extender_calls import ClientFactory, wait_ready
from tests.fakes.jobs_api import JobsAPI

pytestmark = pytest.mark.anyio

T = int(NOW.timestamp())
TEMPLATES = {
    "templates": [
        {"name": "capped", "namespace": "batch", "image": "img", "maxActive": 2},
        {"name": "kept", "namespace": "batch", "image": "img", "keyRetentionSeconds": 3600},
        {"name": "plain", "namespace": "batch", "image": "img"},
    ]
}


async def ready(make_client: ClientFactory, api: JobsAPI, tmp_path: Path) -> httpx.AsyncClient:
    path = tmp_path / "templates.yaml"
    path.write_text(yaml.safe_dump(TEMPLATES))
    client = await make_client(fake=api, job_templates=path, dispatch_auth="none")
    return await wait_ready(client)


def record(api: JobsAPI, template: str) -> dict[str, dict[str, list[object]]]:
    stored = api.configmaps.objects[("batch", f"loadsched-dispatch-{template}")]
    return dict(json.loads(stored["data"][DATA_KEY]))


def write_record(
    api: JobsAPI, template: str, admitted: dict[str, Any], finished: dict[str, Any]
) -> None:
    data = json.dumps({"admitted": admitted, "finished": finished})
    api.configmaps.put("batch", f"loadsched-dispatch-{template}", {DATA_KEY: data})


async def test_what_another_replica_admitted_counts(
    make_client: ClientFactory, tmp_path: Path
) -> None:
    api = JobsAPI()
    client = await ready(make_client, api, tmp_path)
    first = await client.post("/v1/jobs", json={"template": "capped", "key": "a"})
    assert first.status_code == 201 and first.json()["state"] == "active"
    name_a = first.json()["name"].removeprefix("capped-")
    # another replica admitted a key a moment ago; its Job is not in this replica's watch yet
    write_record(api, "capped", {name_a: [T, 1], "0123456789abcdef": [T, 1]}, {})
    busy = await client.post("/v1/jobs", json={"template": "capped", "key": "b"})
    assert busy.status_code == 429 and busy.headers["Retry-After"] == "10"
    assert busy.json()["detail"] == "template capped has 2 active Jobs (maxActive 2)"
    assert len(api.created) == 1


async def test_a_retained_key_is_answered_without_a_second_job(
    make_client: ClientFactory, tmp_path: Path
) -> None:
    api = JobsAPI()
    client = await ready(make_client, api, tmp_path)
    h = key_hash("kept", "row-7")
    write_record(api, "kept", {}, {h: [T - 60, "succeeded", "uid-7"]})
    again = await client.post("/v1/jobs", json={"template": "kept", "key": "row-7"})
    assert again.status_code == 200, again.text
    assert again.json() == {
        "namespace": "batch",
        "name": f"kept-{h}",
        "uid": "uid-7",
        "created": False,
        "state": "succeeded",
    }
    assert api.created == {}
    new = await client.post("/v1/jobs", json={"template": "kept", "key": "row-8"})
    assert new.status_code == 201
    assert set(record(api, "kept")["admitted"]) == {key_hash("kept", "row-8")}
    # a template without limits or retention keeps no record
    assert (
        await client.post("/v1/jobs", json={"template": "plain", "key": "x"})
    ).status_code == 201
    assert ("batch", "loadsched-dispatch-plain") not in api.configmaps.objects


async def test_a_failed_create_takes_its_admission_back(
    make_client: ClientFactory, tmp_path: Path
) -> None:
    api = JobsAPI(post_status=403)
    client = await ready(make_client, api, tmp_path)
    refused = await client.post("/v1/jobs", json={"template": "capped", "key": "a"})
    assert refused.status_code == 502
    assert record(api, "capped")["admitted"] == {}


async def test_the_record_cannot_be_read(make_client: ClientFactory, tmp_path: Path) -> None:
    api = JobsAPI()
    client = await ready(make_client, api, tmp_path)

    async def forbidden(request: httpx.Request) -> httpx.Response:
        return httpx.Response(403, json={"kind": "Status", "code": 403, "message": "no"})

    api.configmaps.handler = forbidden  # type: ignore[method-assign]
    answer = await client.post("/v1/jobs", json={"template": "capped", "key": "a"})
    assert answer.status_code == 502 and "403" in answer.json()["detail"]
    assert api.created == {}
