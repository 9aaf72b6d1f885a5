"""Contract tests: kube-scheduler's request shapes in, its response shapes out."""

import json
from datetime import timedelta
from typing import Any

import anyio
import httpx
import pytest

from shared.annotations import encode_hot_value, encode_metric
from shared.load_model import LoadRules
from shared.policy import parse_policy
from tests import payloads
from tests.fakes.clock import NOW
from tests.fakes.extender_calls import ClientFactory, wait_ready
from tests.fakes.kube import FakeCollection, obj

pytestmark = pytest.mark.anyio


def three_nodes(rules: LoadRules) -> list[dict[str, Any]]:
    return [
        payloads.node("n1", payloads.load_annotations(rules, 0.2, NOW), index=1),
        payloads.node("n2", payloads.load_annotations(rules, 0.5, NOW, hot=2), index=2),
        payloads.node(
            "n3",
            {
                **payloads.load_annotations(rules, 0.3, NOW),
                "cpu_usage_avg_5m": encode_metric(0.812, NOW),
            },
            index=3,
        ),
    ]


async def post(client: httpx.AsyncClient, verb: str, body: dict[str, Any]) -> Any:
    response = await client.post(
        f"/{verb}", content=payloads.encode(body), headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.headers["server-timing"].startswith("extender;dur=")
    return response.json()


async def test_filter_full_nodes(listing_client: httpx.AsyncClient, rules: LoadRules) -> None:
    nodes = three_nodes(rules)
    result = await post(listing_client, "filter", payloads.full_args(nodes))
    assert set(result) == {
        "Nodes",
        "NodeNames",
        "FailedNodes",
        "FailedAndUnresolvableNodes",
        "Error",
    }
    assert result["NodeNames"] is None
    assert result["Error"] == ""
    assert result["FailedNodes"] == {}
    assert result["FailedAndUnresolvableNodes"] == {
        "n3": "Load[cpu_usage_avg_5m]=0.81200 of node[n3] is above 0.65"
    }
    # passing nodes come back whole and unchanged: kube-scheduler builds NodeInfos from them
    assert result["Nodes"]["items"] == [nodes[0], nodes[1]]


async def test_daemonset_pods_are_never_filtered(
    client: httpx.AsyncClient, rules: LoadRules
) -> None:
    nodes = three_nodes(rules)
    result = await post(client, "filter", payloads.full_args(nodes, payloads.pod(daemonset=True)))
    assert [n["metadata"]["name"] for n in result["Nodes"]["items"]] == ["n1", "n2", "n3"]
    assert result["FailedAndUnresolvableNodes"] == {}


async def test_prioritize_is_a_bare_array(client: httpx.AsyncClient, rules: LoadRules) -> None:
    result = await post(client, "prioritize", payloads.full_args(three_nodes(rules)))
    # n1: usage .2 everywhere -> 80 -> 8; n2: .5 -> 50, hot 2 -> 30 -> 3;
    # n3: (.7 * 1.8 + .188 * .2) * 100 / 2.0 = 64.88 -> 64 -> 6
    assert result == [
        {"Host": "n1", "Score": 8},
        {"Host": "n2", "Score": 3},
        {"Host": "n3", "Score": 6},
    ]


async def test_objects_without_apiversion_kind_and_missing_fields(
    client: httpx.AsyncClient,
) -> None:
    body = {
        "Pod": {"metadata": {"name": "p"}},
        "Nodes": {"items": [{"metadata": {"name": "bare"}}, {}]},
        "NodeNames": None,
    }
    result = await post(client, "filter", body)
    assert len(result["Nodes"]["items"]) == 2
    assert await post(client, "prioritize", body) == [
        {"Host": "bare", "Score": 0},
        {"Host": "", "Score": 0},
    ]


async def test_garbage_annotations_are_unknown_not_errors(client: httpx.AsyncClient) -> None:
    junk = {
        "cpu_usage_avg_5m": "lots",
        "mem_usage_avg_5m": "0.9,yesterday",
        "node_hot_value": "x,y,z",
    }
    body = payloads.full_args([payloads.node("n1", junk)])
    assert (await post(client, "filter", body))["FailedAndUnresolvableNodes"] == {}
    assert await post(client, "prioritize", body) == [{"Host": "n1", "Score": 0}]
    metrics = (await client.get("/metrics")).text
    assert (
        'loadsched_extender_unknown_annotations_total{metric="cpu_usage_avg_5m",reason="malformed"} 1.0'
        in metrics
    )


async def test_fail_closed_rejects_unknown(make_client: ClientFactory, rules: LoadRules) -> None:
    closed = parse_policy(
        {
            "spec": {
                "syncPolicy": [{"name": "cpu_usage_avg_5m", "period": "3m"}],
                "predicate": [{"name": "cpu_usage_avg_5m", "maxLimitPecent": 0.65}],
                "staleData": "failClosed",
            }
        }
    )
    client = await make_client(the_policy=closed, filter_rejections="always")
    stale = encode_metric(0.1, NOW - timedelta(minutes=9))
    body = payloads.full_args(
        [
            payloads.node("n1", {"cpu_usage_avg_5m": stale}),
            payloads.node("n2", {"cpu_usage_avg_5m": encode_metric(0.1, NOW)}),
        ]
    )
    result = await post(client, "filter", body)
    assert [n["metadata"]["name"] for n in result["Nodes"]["items"]] == ["n2"]
    assert result["FailedAndUnresolvableNodes"]["n1"].startswith(
        "Load[cpu_usage_avg_5m] of node[n1] is stale"
    )


async def test_names_only_without_cluster_is_an_error_field(client: httpx.AsyncClient) -> None:
    result = await post(client, "filter", payloads.names_args(["n1"]))
    assert "nodeCacheCapable" in result["Error"]
    response = await client.post("/prioritize", json=payloads.names_args(["n1"]))
    assert response.status_code == 503


async def test_names_only_from_the_watch_cache(
    make_client: ClientFactory, rules: LoadRules
) -> None:
    fake = FakeCollection(
        lists=[
            (
                5,
                [
                    obj("n1", 1, payloads.load_annotations(rules, 0.2, NOW)),
                    obj("n2", 2, payloads.load_annotations(rules, 0.9, NOW)),
                    obj("n3", 3, payloads.load_annotations(rules, 0.5, NOW, hot=2)),
                ],
            )
        ]
    )
    client = await make_client(fake=fake, filter_rejections="always")
    await wait_ready(client)
    result = await post(client, "filter", payloads.names_args(["n3", "n2", "n1", "new-node"]))
    assert result["Nodes"] is None
    # names only from the input, in input order; a node the cache lacks passes (fail-open)
    assert result["NodeNames"] == ["n3", "n1", "new-node"]
    assert set(result["FailedAndUnresolvableNodes"]) == {"n2"}
    assert await post(client, "prioritize", payloads.names_args(["n1", "n3", "new-node"])) == [
        {"Host": "n1", "Score": 8},
        {"Host": "n3", "Score": 3},
        {"Host": "new-node", "Score": 0},
    ]
    metrics = (await client.get("/metrics")).text
    assert "loadsched_extender_node_cache_nodes 3.0" in metrics
    assert "loadsched_extender_uncached_nodes_total 1.0" in metrics
    # kube-scheduler's prioritize names the nodes filter passed, in its order: that answer was
    # prepared once the filter answer was written
    passed = (await post(client, "filter", payloads.names_args(["n1", "n2", "n3"])))["NodeNames"]
    assert passed == ["n1", "n3"]
    await anyio.sleep(0)  # a served request arrives as I/O, after the loop's ready calls
    prepared = await post(client, "prioritize", payloads.names_args(passed))
    assert prepared == [{"Host": "n1", "Score": 8}, {"Host": "n3", "Score": 3}]
    metrics = (await client.get("/metrics")).text
    assert 'loadsched_extender_answers_kept_total{verb="prioritize"} 1.0' in metrics


async def test_both_modes_agree(make_client: ClientFactory, rules: LoadRules) -> None:
    nodes = payloads.cluster(rules, 60, NOW)
    fake = FakeCollection(lists=[(5, nodes)])
    cached = await make_client(fake=fake)
    await wait_ready(cached)
    names = [n["metadata"]["name"] for n in nodes]
    full_filter = await post(cached, "filter", payloads.full_args(nodes))
    names_filter = await post(cached, "filter", payloads.names_args(names))
    assert [n["metadata"]["name"] for n in full_filter["Nodes"]["items"]] == names_filter[
        "NodeNames"
    ]
    assert full_filter["FailedAndUnresolvableNodes"] == names_filter["FailedAndUnresolvableNodes"]
    assert 0 < len(names_filter["NodeNames"]) < 60
    assert await post(cached, "prioritize", payloads.full_args(nodes)) == await post(
        cached, "prioritize", payloads.names_args(names)
    )


async def test_readyz_waits_for_the_first_list(
    make_client: ClientFactory, rules: LoadRules
) -> None:
    fake = FakeCollection(lists=[(5, [obj("n1", 1)])], list_status=[503, 503])
    client = await make_client(fake=fake)
    first = await client.get("/readyz")
    assert first.status_code == 503
    assert "not ready" in first.text
    await wait_ready(client)
    assert fake.list_count() == 3


async def test_preempt_passes_victims_through(client: httpx.AsyncClient) -> None:
    body = {
        "Pod": payloads.pod(),
        "NodeNameToVictims": {
            "n1": {"Pods": [{"metadata": {"name": "v", "uid": "u-1"}}], "NumPDBViolations": 1}
        },
        "NodeNameToMetaVictims": None,
    }
    assert await post(client, "preempt", body) == {
        "NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": "u-1"}], "NumPDBViolations": 1}}
    }
    meta = {
        "Pod": payloads.pod(),
        "NodeNameToVictims": None,
        "NodeNameToMetaVictims": {"n2": {"Pods": [{"UID": "u-2"}], "NumPDBViolations": 0}},
    }
    assert await post(client, "preempt", meta) == {
        "NodeNameToMetaVictims": meta["NodeNameToMetaVictims"]
    }


async def test_metrics_cover_verbs_and_reasons(client: httpx.AsyncClient, rules: LoadRules) -> None:
    await post(client, "filter", payloads.full_args(three_nodes(rules)))
    await post(client, "prioritize", payloads.full_args(three_nodes(rules)))
    await client.post("/filter", content=b"{")
    text = (await client.get("/metrics")).text
    assert 'loadsched_extender_request_duration_seconds_count{verb="filter"} 2.0' in text
    assert 'loadsched_extender_request_duration_seconds_count{verb="prioritize"} 1.0' in text
    assert (
        'loadsched_extender_nodes_filtered_total{metric="cpu_usage_avg_5m",reason="overloaded"} 1.0'
        in text
    )
    assert 'loadsched_extender_decode_errors_total{verb="filter"} 1.0' in text
    assert 'loadsched_extender_responses_total{code="400",verb="filter"} 1.0' in text


async def test_health(client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz")).text == "ok"
    assert (await client.get("/readyz")).status_code == 200


async def test_hot_value_lowers_score_in_the_same_request(
    client: httpx.AsyncClient, rules: LoadRules
) -> None:
    cool = payloads.node("cool", payloads.load_annotations(rules, 0.3, NOW))
    hot = payloads.node(
        "hot",
        {**payloads.load_annotations(rules, 0.3, NOW), "node_hot_value": encode_hot_value(3, NOW)},
    )
    scores = {
        s["Host"]: s["Score"]
        for s in await post(client, "prioritize", payloads.full_args([cool, hot]))
    }
    assert scores == {"cool": 7, "hot": 4}


@pytest.mark.parametrize("verb", ["filter", "prioritize"])
async def test_json_keys_are_exactly_go_field_names(
    client: httpx.AsyncClient, rules: LoadRules, verb: str
) -> None:
    # lower-case keys are not what kube-scheduler sends: they are ignored, so Pod is missing
    body = json.dumps({"pod": payloads.pod(), "nodes": {"items": []}})
    response = await client.post(f"/{verb}", content=body)
    assert response.status_code == 400
    assert "Pod" in response.json()["detail"]
