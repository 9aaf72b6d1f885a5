"""The two rooms of one extender process: what each serves, and readiness kept apart (a
failing Job watch never keeps the scheduler verbs from being Ready)."""

from pathlib import Path

import anyio
import httpx
import pytest
import yaml

from extender.app import create_app, dispatch_config
from extender.scheduling.node_cache import NodeLoadCache
from extender.settings import load_settings
from shared.errors import ConfigError
from shared.load_model import LoadRules
from shared.policy import default_policy
from tests.fakes.extender_calls import ClientFactory
from tests.fakes.jobs_api import TEMPLATES, JobsAPI
from tests.payloads import encode, names_args

pytestmark = pytest.mark.anyio


def templates_file(tmp_path: Path) -> Path:
    path = tmp_path / "templates.yaml"
    path.write_text(yaml.safe_dump(TEMPLATES))
    return path


async def status_once_settled(client: httpx.AsyncClient, path: str) -> httpx.Response:
    """The answer of ``path`` once the node list has been taken in (or after 2 s of retries)."""
    for _ in range(200):
        if "node cache has not" not in (response := await client.get(path)).text:
            if response.status_code == 200:
                return response
        await anyio.sleep(0.01)
    return response


async def test_a_failing_job_watch_keeps_dispatch_unready_but_not_the_verbs(
    make_client: ClientFactory, tmp_path: Path
) -> None:
    api = JobsAPI()
    api.collections["/apis/batch/v1/jobs"].list_status = [403] * 10_000
    client = await make_client(
        fake=api, job_templates=templates_file(tmp_path), dispatch_auth="none"
    )
    scheduling = await status_once_settled(client, "/readyz/scheduling")
    assert scheduling.status_code == 200, scheduling.text
    assert "ready (scheduling)" in scheduling.text
    dispatch = await client.get("/readyz/dispatch")
    assert dispatch.status_code == 503
    assert "dispatched jobs" in dispatch.text
    everything = await client.get("/readyz")
    assert everything.status_code == 503 and "dispatched jobs" in everything.text
    names = await client.post("/filter", content=encode(names_args(["n1"])))
    assert names.status_code == 200 and names.json()["NodeNames"] == ["n1"]
    # until its caches are listed, dispatch cannot tell limits or known keys: it says so
    refused = await client.post("/v1/jobs", json={"template": "work", "key": "a"})
    assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
    assert "dispatched jobs not listed yet" in refused.json()["detail"]


async def test_dispatch_only_serves_no_scheduler_verbs(
    make_client: ClientFactory, tmp_path: Path
) -> None:
    client = await make_client(
        fake=JobsAPI(),
        job_templates=templates_file(tmp_path),
        dispatch_auth="none",
        serve="dispatch",
    )
    ready = await status_once_settled(client, "/readyz")
    assert ready.status_code == 200 and "ready (dispatch)" in ready.text
    assert (await client.get("/readyz/scheduling")).status_code == 503
    assert (await client.post("/filter", content=encode(names_args(["n1"])))).status_code == 404
    created = await client.post("/v1/jobs", json={"template": "work", "key": "a"})
    assert created.status_code == 201, created.text


async def test_scheduling_only_leaves_dispatch_off_even_with_templates(
    make_client: ClientFactory, tmp_path: Path
) -> None:
    api = JobsAPI()
    client = await make_client(
        fake=api,
        job_templates=templates_file(tmp_path),
        dispatch_auth="none",
        serve="scheduling",
    )
    ready = await status_once_settled(client, "/readyz")
    assert ready.status_code == 200 and "ready (scheduling)" in ready.text
    assert (await client.get("/readyz/dispatch")).status_code == 503
    off = await client.post("/v1/jobs", json={"template": "work", "key": "a"})
    assert off.status_code == 404
    assert not any(r.url.path.startswith("/apis/batch") for r in api_requests(api))


def api_requests(api: JobsAPI) -> list[httpx.Request]:
    return [r for collection in api.collections.values() for r in collection.requests]


@pytest.mark.parametrize(
    ("serve", "error"),
    [
        ("dispatch", "--job-templates / LOADSCHED_JOB_TEMPLATES: needed by --serve dispatch"),
        ("jobs", "--serve / LOADSCHED_SERVE"),
        (",", "--serve / LOADSCHED_SERVE"),
    ],
)
def test_serve_names_the_setting_it_cannot_use(serve: str, error: str) -> None:
    with pytest.raises(ConfigError) as raised:
        create_app(load_settings(serve=serve))
    assert error in str(raised.value)


def test_serve_is_normalised() -> None:
    assert load_settings(serve=" dispatch , scheduling").serve == "scheduling,dispatch"


def test_dispatch_without_its_extra_is_refused_naming_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """croniter comes with the dispatch extra; without it the extender refuses to serve the
    dispatch room at start-up, saying what to install, and a cron schedule is refused."""
    from extender.dispatch import building

    monkeypatch.setattr(building, "cron_available", lambda: False)
    with pytest.raises(ConfigError) as raised:
        dispatch_config(
            load_settings(serve="dispatch", job_templates=str(tmp_path / "templates.yaml")),
            frozenset({"dispatch"}),
            NodeLoadCache(LoadRules.from_policy(default_policy())),
        )
    assert "pip install 'loadsched[dispatch]'" in str(raised.value)
    assert "--job-templates" in str(raised.value)
    with pytest.raises(building.InvalidDispatch, match="loadsched\\[dispatch\\]"):
        building.check_schedule("*/5 * * * *", None)
