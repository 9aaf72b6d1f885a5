"""``/v1/explain`` agrees with what names-only filter and prioritize answer on the same app,
node by node (rejections by the deciding metric, scores), needs a token (401) allowed to get
pods in the namespace (403), and refuses bad input naming the field. The plugin's way to it,
through the API server's service proxy: tests/extender/test_kubectl_plugin.py."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import httpx
import pytest

from extender.app import create_app
from extender.settings import ExtenderSettings
from kubectl_loadsched.cli import probe_pod
from shared.annotations import encode_metric
from shared.kube.config import KubeEndpoint
from shared.load_model import LoadRules
from shared.policy import default_policy
from tests.fakes.clock import NOW
from tests.fakes.extender_calls import wait_ready
from tests.fakes.kube import FakeCluster, FakeCollection

pytestmark = pytest.mark.anyio

RULES = LoadRules.from_policy(default_policy())
LOADS = {"quiet": 0.10, "busy": 0.60, "hot": 0.90, "old": None}
"""Every metric at this usage; ``old``: values two days old (stale)."""
POD = {
    "metadata": {"name": "web", "namespace": "shop", "uid": "u1"},
    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}]},
}


def node(name: str, usage: float | None) -> dict[str, Any]:
    when = NOW - timedelta(seconds=30) if usage is not None else NOW - timedelta(days=2)
    value = 0.2 if usage is None else usage
    annotations = {k: encode_metric(value, when) for k in RULES.keys if k != "node_hot_value"}
    if name == "busy":
        annotations["node_hot_value"] = encode_metric(2, NOW - timedelta(seconds=10))
    return {"metadata": {"name": name, "resourceVersion": "1", "annotations": annotations}}


class ReviewingAPI(FakeCluster):
    """Nodes, the pod, and reviews: token ``reader`` may get pods, ``other`` may not."""

    def __init__(self) -> None:
        self.collections = {
            "/api/v1/nodes": FakeCollection([(1, [node(n, u) for n, u in LOADS.items()])]),
        }

    async def handler(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/api/v1/namespaces/shop/pods/web":
            return httpx.Response(200, json=POD)
        if path.endswith("/tokenreviews"):
            token = json.loads(request.content)["spec"]["token"]
            user = {"username": token}
            return httpx.Response(
                201, json={"status": {"authenticated": token != "bad", "user": user}}
            )
        if path.endswith("/subjectaccessreviews"):
            spec = json.loads(request.content)["spec"]
            attributes = spec["resourceAttributes"]
            allowed = spec["user"] == "reader" and (attributes["verb"], attributes["resource"]) == (
                "get",
                "pods",
            )
            return httpx.Response(201, json={"status": {"allowed": allowed}})
        return await super().handler(request)


async def serving() -> AsyncIterator[httpx.AsyncClient]:
    api = ReviewingAPI()
    app = create_app(
        ExtenderSettings(dispatch_auth="tokenreview", filter_rejections="always"),
        endpoint=KubeEndpoint(host="https://api.test"),
        transport=api.transport(),
        clock=lambda: NOW,
    )
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://extender") as client:
            await wait_ready(client)
            yield client


READER = {"Authorization": "Bearer reader"}


async def test_explain_is_what_filter_and_prioritize_answer() -> None:
    async for client in serving():
        response = await client.get("/v1/explain/shop/web", headers=READER)
        assert response.status_code == 200, response.text
        explained = response.json()
        names = list(LOADS)
        args = {"Pod": POD, "NodeNames": names}
        filtered = (await client.post("/filter", json=args)).json()
        scores = {
            h["Host"]: h["Score"] for h in (await client.post("/prioritize", json=args)).json()
        }
        by_node = {n["node"]: n for n in explained["nodes"]}
        assert set(by_node) == set(names)
        for name in names:
            row = by_node[name]
            assert row["passed"] == (name in filtered["NodeNames"])
            assert row["reason"] == filtered["FailedAndUnresolvableNodes"].get(name)
            assert row["score"]["final"] == scores[name]
        hot = by_node["hot"]
        assert hot["rejected_by"] == "cpu_usage_avg_5m"
        decided = [m for m in hot["metrics"] if m["decided"]]
        assert [m["metric"] for m in decided] == ["cpu_usage_avg_5m"]
        assert decided[0]["value"] == pytest.approx(0.90) and decided[0]["age_seconds"] == 30
        assert {m["state"] for m in by_node["old"]["metrics"]} == {"stale"}
        busy = by_node["busy"]["score"]
        assert busy["hot_value"] == 2 and busy["hot_penalty"] == 20
        assert busy["score"] == max(int(busy["weighted"]) - 20, 0)
        # best first: passing nodes by score, then the rejected
        order = [n["node"] for n in explained["nodes"]]
        assert order[0] == "quiet" and order[-1] == "hot"
        assert explained["quota"]["rule"] == "no-quota"


async def test_posted_pod_and_node_restriction() -> None:
    async for client in serving():
        body = probe_pod("shop", "100m", "64Mi")
        response = await client.post("/v1/explain?nodes=quiet,gone", json=body, headers=READER)
        assert response.status_code == 200, response.text
        rows = {n["node"]: n for n in response.json()["nodes"]}
        assert set(rows) == {"quiet", "gone"}
        assert rows["gone"]["cached"] is False and rows["gone"]["score"]["final"] == 0


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),
        ({"Authorization": "Bearer bad"}, 401),
        ({"Authorization": "Bearer other"}, 403),
        ({"X-Loadsched-Authorization": "Bearer reader"}, 200),
        ({"X-Loadsched-Authorization": "Bearer other", "Authorization": "Bearer reader"}, 403),
    ],
)
async def test_access(headers: dict[str, str], status: int) -> None:
    async for client in serving():
        assert (await client.get("/v1/explain/shop/web", headers=headers)).status_code == status
        posted = await client.post("/v1/explain", json=POD, headers=headers)
        assert posted.status_code == status


@pytest.mark.parametrize(
    ("method", "url", "body", "loc"),
    [
        ("GET", "/v1/explain/Shop!/web", None, ["path", "namespace"]),
        ("POST", "/v1/explain", {"metadata": {"name": 3}}, ["body", "metadata", "name"]),
        ("POST", "/v1/explain?nodes=,", POD, ["query", "nodes"]),
    ],
)
async def test_bad_input_names_the_field(method: str, url: str, body: Any, loc: list[str]) -> None:
    async for client in serving():
        response = await client.request(method, url, json=body, headers=READER)
        assert response.status_code == 422
        assert response.json()["detail"][0]["loc"] == loc


async def test_unknown_pod_is_404() -> None:
    async for client in serving():
        response = await client.get("/v1/explain/shop/nope", headers=READER)
        assert response.status_code == 404 and "shop/nope" in response.json()["detail"]
