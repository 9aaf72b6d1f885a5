"""Contract tests on request bodies captured from the real kube-scheduler (tests/e2e records
them through a proxy: tests/fixtures/kube-scheduler)."""

import copy
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from shared.load_model import LoadRules
from tests import payloads
from tests.fakes.clock import NOW
from tests.fakes.extender_calls import ClientFactory, wait_ready
from tests.fakes.kube import FakeCollection, obj

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "kube-scheduler"


def captured(name: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    return body


def with_loads(body: dict[str, Any], rules: LoadRules, hot_node: str) -> dict[str, Any]:
    """The captured body with load annotations: ``hot_node`` overloaded, the others at 30 %."""
    body = copy.deepcopy(body)
    for item in body["Nodes"]["items"]:
        usage = 0.9 if item["metadata"]["name"] == hot_node else 0.3
        item["metadata"].setdefault("annotations", {}).update(
            payloads.load_annotations(rules, usage, NOW)
        )
    return body


def node_names() -> list[str]:
    return [n["metadata"]["name"] for n in captured("filter-full")["Nodes"]["items"]]


async def post(client: httpx.AsyncClient, verb: str, body: dict[str, Any]) -> Any:
    response = await client.post(f"/{verb}", content=json.dumps(body))
    assert response.status_code == 200, response.text
    return response.json()


def test_captured_bodies_have_the_documented_shape() -> None:
    assert set(captured("filter-full")) == {"Pod", "Nodes", "NodeNames"}
    assert captured("filter-full")["NodeNames"] is None
    assert captured("filter-names")["Nodes"] is None
    assert isinstance(captured("prioritize-names")["NodeNames"], list)
    assert captured("preempt-names")["NodeNameToVictims"] is None
    assert captured("preempt-full")["NodeNameToMetaVictims"] is None
    # objects from the scheduler's cache carry no apiVersion/kind
    assert "apiVersion" not in captured("filter-full")["Pod"]


async def test_filter_full_returns_passing_nodes_unchanged(
    listing_client: httpx.AsyncClient, rules: LoadRules
) -> None:
    body = with_loads(captured("filter-full"), rules, hot_node="node-3")
    result = await post(listing_client, "filter", body)
    assert result["NodeNames"] is None
    assert list(result["FailedAndUnresolvableNodes"]) == ["node-3"]
    assert result["Nodes"]["items"] == [
        n for n in body["Nodes"]["items"] if n["metadata"]["name"] != "node-3"
    ]


async def test_prioritize_full(client: httpx.AsyncClient, rules: LoadRules) -> None:
    body = with_loads(captured("prioritize-full"), rules, hot_node="node-3")
    result = await post(client, "prioritize", body)
    assert [r["Host"] for r in result] == node_names()
    assert {r["Host"]: r["Score"] for r in result}["node-3"] == 1
    assert {r["Score"] for r in result if r["Host"] != "node-3"} == {7}


async def test_names_only_bodies(make_client: ClientFactory, rules: LoadRules) -> None:
    listed = [
        obj(name, i, payloads.load_annotations(rules, 0.9 if name == "node-3" else 0.3, NOW))
        for i, name in enumerate(node_names())
    ]
    client = await make_client(fake=FakeCollection(lists=[(100, listed)]))
    await wait_ready(client)
    names = captured("filter-names")["NodeNames"]
    result = await post(client, "filter", captured("filter-names"))
    assert result["Nodes"] is None
    assert result["NodeNames"] == [n for n in names if n != "node-3"]
    scores = await post(client, "prioritize", captured("prioritize-names"))
    assert [s["Host"] for s in scores] == captured("prioritize-names")["NodeNames"]


@pytest.mark.parametrize("name", ["preempt-names", "preempt-full"])
async def test_preempt_bodies(client: httpx.AsyncClient, name: str) -> None:
    body = captured(name)
    result = await post(client, "preempt", body)
    if body["NodeNameToMetaVictims"] is not None:
        expected = body["NodeNameToMetaVictims"]
    else:
        expected = {
            node: {
                "Pods": [{"UID": p["metadata"]["uid"]} for p in victims["Pods"]],
                "NumPDBViolations": victims["NumPDBViolations"],
            }
            for node, victims in body["NodeNameToVictims"].items()
        }
    assert result == {"NodeNameToMetaVictims": expected}
    assert result["NodeNameToMetaVictims"]
