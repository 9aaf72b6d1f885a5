"""The status page (``/ui``) and its report (``/v1/status``) against fake API servers: what it
shows of nodes, quotas and templates, and who may see it."""

import base64
import hashlib
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from extender.status.report import metric_cells
from shared.annotations import Sample, encode_hot_value, encode_metric
from shared.load_model import LoadRules, MetricTerm
from shared.policy import default_policy
from tests.fakes.clock import NOW
from tests.fakes.extender_calls import ClientFactory, wait_ready
from tests.fakes.jobs_api import JobsAPI, ready
from tests.fakes.kube import FakeCollection
from tests.fakes.quota_cluster import story_cluster, story_node

pytestmark = pytest.mark.anyio

CPU = "cpu_usage_avg_5m"
MEM = "mem_usage_avg_5m"
RULES = LoadRules.from_policy(default_policy())


def every_metric(usage: float) -> dict[str, str]:
    return {key: encode_metric(usage, NOW) for key in RULES.keys if key != "node_hot_value"}


def loaded_cluster() -> Any:
    """n1 over the CPU limit (0.9 > 0.65) and hot; n2 with a stale CPU value (sampled 9 min
    ago: 3m period + 5m); n3 quiet."""
    cluster = story_cluster()
    nodes = [story_node("n1", 1), story_node("n2", 2), story_node("n3", 3)]
    annotations = [
        {**every_metric(0.3), CPU: encode_metric(0.9, NOW), MEM: encode_metric(0.5, NOW)},
        {**every_metric(0.2), CPU: encode_metric(0.4, NOW - timedelta(minutes=9))},
        every_metric(0.1),
    ]
    annotations[0]["node_hot_value"] = encode_hot_value(2, NOW - timedelta(seconds=30))
    for body, extra in zip(nodes, annotations, strict=True):
        body["metadata"]["annotations"].update(extra)
    cluster.collections["/api/v1/nodes"] = FakeCollection([(5, nodes)])
    return cluster


async def ready_status(make_client: ClientFactory, **settings: object) -> httpx.AsyncClient:
    client = await make_client(
        fake=loaded_cluster(), elastic_quota=True, dispatch_auth="none", **settings
    )
    return await wait_ready(client)


async def test_nodes_worst_first_with_each_metric(make_client: ClientFactory) -> None:
    client = await ready_status(make_client)
    status = (await client.get("/v1/status")).json()
    nodes = status["nodes"]
    assert nodes["available"] and (nodes["total"], nodes["rejected"], nodes["stale"]) == (3, 1, 1)
    assert [row["name"] for row in nodes["items"]] == ["n1", "n2", "n3"]
    n1, n2, n3 = nodes["items"]
    assert not n1["passes"] and n1["decidedBy"] == CPU and n1["reason"] == "overloaded"
    assert n1["rejection"] == f"Load[{CPU}]=0.90000 of node[n1] is above 0.65"
    cpu = n1["metrics"][CPU]
    assert cpu["state"] == "fresh" and cpu["value"] == 0.9 and cpu["decided"]
    assert cpu["limit"] == 0.65 and cpu["limitFrom"] == "policy" and cpu["weight"] == 0.2
    assert cpu["usage"] == round(0.9 / 0.65, 4) and cpu["ageSeconds"] == 0.0
    assert n1["hot"] == 2 and n1["hotAgeSeconds"] == 30.0
    stale = n2["metrics"][CPU]
    assert (stale["state"], stale["value"], stale["usage"]) == ("stale", 0.4, None)
    assert stale["ageSeconds"] == 540.0 and n2["passes"]
    # the score shown is prioritize's answer
    answer = (
        await client.post(
            "/prioritize",
            json={"Pod": {"metadata": {"name": "p"}}, "NodeNames": ["n1", "n2", "n3"]},
        )
    ).json()
    assert {a["Host"]: a["Score"] for a in answer} == {
        row["name"]: row["extenderScore"] for row in nodes["items"]
    }
    assert n3["extenderScore"] > n1["extenderScore"]
    columns = {c["name"]: c for c in nodes["columns"]}
    assert columns[CPU]["limit"] == 0.65 and columns[CPU]["freshSeconds"] == 480


async def test_quotas_used_borrowed_and_lent(make_client: ClientFactory) -> None:
    client = await ready_status(make_client)
    quotas = (await client.get("/v1/status")).json()["quotas"]
    assert quotas["enabled"] and quotas["invalid"] == []
    rows = {q["namespace"]: q for q in quotas["items"]}
    # a: 8 CPU used of min 6 (borrows 2); b: 3 of min 12, its idle 9 lends the 2 a borrows
    assert rows["a"]["borrower"] and not rows["b"]["borrower"]
    assert rows["a"]["resources"]["cpu"] == {
        "min": "6",
        "max": "10",
        "used": "8",
        "borrowed": "2",
        "lent": "0",
    }
    assert rows["b"]["resources"]["cpu"] == {
        "min": "12",
        "max": "14",
        "used": "3",
        "borrowed": "0",
        "lent": "2",
    }
    assert quotas["pool"]["cpu"] == {"min": "18", "used": "11"}


async def test_only_the_parts_asked_for(make_client: ClientFactory) -> None:
    client = await ready_status(make_client)
    whole = (await client.get("/v1/status")).json()
    only = (await client.get("/v1/status", params={"part": "quotas"})).json()
    assert only["quotas"] == whole["quotas"]
    assert only["nodes"] is None and only["templates"] is None
    two = (await client.get("/v1/status?part=nodes&part=templates")).json()
    assert two["quotas"] is None and two["nodes"]["total"] == whole["nodes"]["total"]
    bad = await client.get("/v1/status", params={"part": "pods"})
    assert bad.status_code == 422
    assert bad.json()["detail"][0]["loc"] == ["query", "part", 0]


async def test_templates_active_pending_and_refusal(
    make_client: ClientFactory, tmp_path: Path
) -> None:
    api = JobsAPI()
    client = await ready(make_client, api, tmp_path)
    templates = (await client.get("/v1/status")).json()["templates"]
    rows = {t["name"]: t for t in templates["items"]}
    assert templates["enabled"] and rows["work"]["active"] == 0 and rows["work"]["maxActive"] == 1
    assert rows["work"]["refusing"] is None
    assert "no schedulable node can fit" in rows["huge"]["refusing"]
    posted = await client.post("/v1/jobs", json={"template": "work", "key": "k1"})
    assert posted.status_code == 201
    rows = {t["name"]: t for t in (await client.get("/v1/status")).json()["templates"]["items"]}
    assert rows["work"]["active"] == 1
    assert rows["work"]["refusing"] == "template work has 1 active Jobs (maxActive 1)"
    refused = await client.post("/v1/jobs", json={"template": "work", "key": "k2"})
    assert refused.status_code == 429 and refused.json()["detail"] == rows["work"]["refusing"]


async def test_without_a_cluster_every_part_says_it_is_off(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/status", headers={"Authorization": "Bearer x"})
    # tokenreview with no API server to ask: the caller cannot be checked
    assert response.status_code == 503


async def test_without_a_cluster_and_no_checks(make_client: ClientFactory) -> None:
    client = await make_client(dispatch_auth="none")
    status = (await client.get("/v1/status")).json()
    assert not status["nodes"]["available"] and status["nodes"]["items"] == []
    assert not status["quotas"]["enabled"] and not status["templates"]["enabled"]
    assert status["ready"]


@pytest.mark.parametrize(
    ("token", "code", "detail"),
    [
        (None, 401, "no credentials"),
        ("bad", 401, "not accepted"),
        ("reader", 403, "may not list nodes in all namespaces"),
        ("writer", 200, None),
    ],
)
async def test_status_needs_a_caller_who_may_list_nodes(
    make_client: ClientFactory, tmp_path: Path, token: str | None, code: int, detail: str | None
) -> None:
    api = JobsAPI()
    client = await ready(make_client, api, tmp_path, dispatch_auth="tokenreview")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = await client.get("/v1/status", headers=headers)
    assert response.status_code == code
    if detail is not None:
        assert detail in response.json()["detail"]
    if code == 401:
        assert response.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize(
    ("headers", "code"),
    [
        ({"X-Loadsched-Authorization": "Bearer writer"}, 200),
        ({"X-Loadsched-Authorization": "Bearer reader"}, 403),
        ({"X-Loadsched-Authorization": "Bearer bad"}, 401),
        ({"X-Loadsched-Authorization": "Bearer reader", "Authorization": "Bearer writer"}, 403),
    ],
)
async def test_status_takes_the_token_the_service_proxy_lets_through(
    make_client: ClientFactory, tmp_path: Path, headers: dict[str, str], code: int
) -> None:
    """The API server's service proxy drops ``Authorization``: ``kubectl loadsched`` repeats
    the token in ``X-Loadsched-Authorization``, which is read first."""
    api = JobsAPI()
    client = await ready(make_client, api, tmp_path, dispatch_auth="tokenreview")
    assert (await client.get("/v1/status", headers=headers)).status_code == code


async def test_static_mode_without_a_tokens_file_accepts_no_token(
    make_client: ClientFactory,
) -> None:
    client = await make_client(dispatch_auth="static")
    response = await client.get("/v1/status", headers={"Authorization": "Bearer anything"})
    assert response.status_code == 401


async def test_static_tokens(make_client: ClientFactory, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.csv"
    tokens.write_text("s3cret,ops,1\n")
    client = await make_client(dispatch_auth="static", dispatch_tokens_file=tokens)
    good = await client.get("/v1/status", headers={"Authorization": "Bearer s3cret"})
    bad = await client.get("/v1/status", headers={"Authorization": "Bearer other"})
    assert (good.status_code, bad.status_code) == (200, 401)


async def test_page_is_a_shell_that_loads_nothing_from_elsewhere(
    client: httpx.AsyncClient,
) -> None:
    response = await client.get("/ui")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    html = response.text
    # no external asset of any kind: no URL with a scheme or host, no import, no font
    assert not re.search(r"(?i)(https?:)?//[a-z0-9]", html.replace("<!doctype html>", ""))
    assert not re.search(r"(?i)\bsrc\s*=|<link\b|@import", html)
    assert not re.search(r"\burl\(", html)  # CSS url(), not JavaScript's new URL()
    policy = response.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "connect-src 'self'" in policy
    # the policy allows exactly the page's own inline script and style, by hash
    for tag, directive in (("script", "script-src"), ("style", "style-src")):
        (body,) = re.findall(rf"<{tag}>(.*?)</{tag}>", html, flags=re.DOTALL)
        digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
        assert f"{directive} 'sha256-{digest}';" in policy
    assert response.headers["cache-control"] == "no-store"
    # the page calls the API relative to itself (kept under a proxy's path prefix)
    assert 'api("v1/status")' in html and 'fetch("/' not in html


def test_metric_that_is_predicate_and_priority_is_one_cell() -> None:
    sampled = NOW - timedelta(seconds=40)
    terms = [
        MetricTerm(CPU, "predicate", "fresh", 0.5, sampled, 0.1, 0.8, "node", decided=False),
        MetricTerm(CPU, "priority", "fresh", 0.5, sampled, 0.1, 0.2, points=8.0),
        MetricTerm(MEM, "priority", "stale", None, None, 0.0, 0.3),
    ]
    readings = {MEM: Sample(0.7, NOW - timedelta(hours=1))}
    cells = metric_cells(terms, readings, NOW)
    cpu, mem = cells[CPU], cells[MEM]
    assert (cpu.limit, cpu.limit_from, cpu.weight, cpu.points) == (0.8, "node", 0.2, 8.0)
    assert cpu.usage == round(0.6 / 0.8, 4) and cpu.age_seconds == 40.0
    assert (mem.state, mem.value, mem.usage, mem.limit, mem.age_seconds) == (
        "stale",
        0.7,
        None,
        None,
        3600.0,
    )


async def test_api_answers_are_counted_by_route_and_code(
    make_client: ClientFactory, tmp_path: Path
) -> None:
    api = JobsAPI()
    client = await ready(make_client, api, tmp_path)
    for key in ("k1", "k2"):
        await client.post("/v1/jobs", json={"template": "work", "key": key})  # 201, then 429
    await client.get("/v1/jobs/batch/nope")
    await client.get("/no/such/path")
    await client.post("/filter", json={"Pod": {}, "Nodes": {"items": []}})
    metrics = (await client.get("/metrics")).text
    counted = dict(
        re.findall(r"^loadsched_extender_api_requests_total(\{.*\}) (\S+)$", metrics, re.M)
    )
    # /readyz was polled until ready: once 200, after as many 503s as it took
    readyz = {k: v for k, v in counted.items() if 'route="/readyz"' in k}
    assert readyz.get('{code="200",method="GET",route="/readyz"}') == "1.0"
    assert set(readyz) <= {
        '{code="200",method="GET",route="/readyz"}',
        '{code="503",method="GET",route="/readyz"}',
    }
    assert {k: v for k, v in counted.items() if k not in readyz} == {
        '{code="201",method="POST",route="/v1/jobs"}': "1.0",
        '{code="429",method="POST",route="/v1/jobs"}': "1.0",
        '{code="404",method="GET",route="/v1/jobs/{namespace}/{name}"}': "1.0",
        '{code="404",method="GET",route="unmatched"}': "1.0",
    }
