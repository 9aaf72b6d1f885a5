"""``--filter-messages per-reason``: one phrase per reason, the same for every node refused for
it, so kube-scheduler counts the nodes instead of listing them (``0/5000 nodes are available:
3201 node(s) with Load[cpu_usage_avg_5m] above 0.65``); ``per-node`` keeps crane's message."""

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from extender.scheduling.wording import NOT_CACHED_REASON, Wording
from shared.annotations import encode_hot_value, encode_metric
from shared.load_model import LoadRules, NodeLoad, evaluate, reason_message
from shared.policy import parse_policy
from tests import payloads
from tests.fakes.clock import NOW
from tests.fakes.estimation_cluster import (
    BURST,
    cluster,
    filter_args,
    node,
    passed,
    placing,
    post,
    ready,
    the_policy,
)
from tests.fakes.extender_calls import ClientFactory
from tests.fakes.kube import FakeCollection

pytestmark = pytest.mark.anyio

POLICY = parse_policy(
    {
        "spec": {
            "syncPolicy": [{"name": "cpu_usage_avg_5m", "period": "3m"}],
            "predicate": [{"name": "cpu_usage_avg_5m", "maxLimitPecent": 0.65}],
            "hotValue": [{"timeRange": "5m", "count": 1}],
            "hotValueLimit": 2,
            "staleData": "failClosed",
        }
    }
)


def loads() -> list[dict[str, Any]]:
    """n1 and n2 over 0.65 by different values, n3 hot, n4 stale (failClosed), n5 passes."""
    return [
        payloads.node("n1", {"cpu_usage_avg_5m": encode_metric(0.81, NOW)}, index=1),
        payloads.node("n2", {"cpu_usage_avg_5m": encode_metric(0.93, NOW)}, index=2),
        payloads.node(
            "n3",
            {
                "cpu_usage_avg_5m": encode_metric(0.2, NOW),
                "node_hot_value": encode_hot_value(3, NOW),
            },
            index=3,
        ),
        payloads.node(
            "n4", {"cpu_usage_avg_5m": encode_metric(0.1, NOW - timedelta(minutes=9))}, index=4
        ),
        payloads.node("n5", {"cpu_usage_avg_5m": encode_metric(0.3, NOW)}, index=5),
    ]


ABOVE = "node(s) with Load[cpu_usage_avg_5m] above 0.65"
PER_REASON = {
    "n1": ABOVE,
    "n2": ABOVE,
    "n3": "node(s) with a hot value above hotValueLimit 2",
    "n4": "node(s) with Load[cpu_usage_avg_5m] stale (staleData is failClosed)",
}


@pytest.mark.parametrize("mode", ["names", "full"])
async def test_per_reason_words_each_reason_once(make_client: ClientFactory, mode: str) -> None:
    nodes = loads()
    fake = FakeCollection(lists=[(5, nodes)])
    client = await make_client(
        filter_rejections="always",
        fake=fake if mode == "names" else None,
        the_policy=POLICY,
        filter_messages="per-reason",
    )
    if mode == "names":
        await ready(client)
        body = payloads.names_args([*(n["metadata"]["name"] for n in nodes), "n6"])
    else:
        body = payloads.full_args(nodes)
    result = await post(client, "filter", body)
    expected = dict(PER_REASON)
    if mode == "names":  # failClosed: a node the cache lacks is refused too
        expected["n6"] = NOT_CACHED_REASON
        assert result["NodeNames"] == ["n5"]
    assert result["FailedAndUnresolvableNodes"] == expected
    # the metrics still count by metric and reason
    metrics = (await client.get("/metrics")).text
    assert (
        'loadsched_extender_nodes_filtered_total{metric="cpu_usage_avg_5m",reason="overloaded"} 2.0'
    ) in metrics


async def test_per_node_is_cranes_message(make_client: ClientFactory) -> None:
    client = await make_client(filter_rejections="always", the_policy=POLICY)
    result = await post(client, "filter", payloads.full_args(loads()))
    refused = result["FailedAndUnresolvableNodes"]
    assert refused["n1"] == "Load[cpu_usage_avg_5m]=0.81000 of node[n1] is above 0.65"
    assert refused["n2"] == "Load[cpu_usage_avg_5m]=0.93000 of node[n2] is above 0.65"
    assert refused["n3"] == "Hot value 3 of node[n3] is above hotValueLimit 2"


@pytest.mark.parametrize("mode", ["names", "full"])
async def test_per_reason_with_estimation(make_client: ClientFactory, mode: str) -> None:
    """As in test_estimation: n1 at 0.30 with four 1-core pods bound since its sample is over
    0.65 by estimate; then n1 and n2 without room for a pod of 3 cores."""
    nodes = [node("n1", 0.30, 1), node("n2", 0.40, 2)]
    client = await make_client(
        filter_rejections="always",
        fake=cluster(nodes, BURST),
        the_policy=the_policy(estimation={"enabled": True, "whenNoNodeHasRoom": "wait"}),
        filter_messages="per-reason",
    )
    await ready(client)
    result = await post(client, "filter", filter_args(mode, nodes, placing("a", "1")))
    assert passed(mode, result) == ["n2"]
    assert result["FailedAndUnresolvableNodes"] == {
        "n1": f"{ABOVE} with the pods the sample does not show yet"
    }
    result = await post(client, "filter", filter_args(mode, nodes, placing("b", "3")))
    assert result["FailedAndUnresolvableNodes"]["n2"] == f"{ABOVE} with this pod"


def test_only_a_refused_node_is_worded() -> None:
    rules = LoadRules.from_policy(POLICY)
    wording = Wording("per-reason", rules.hot_limit)
    for value, expected in ((0.3, None), (0.8, ABOVE)):
        annotations = {"cpu_usage_avg_5m": encode_metric(value, NOW)}
        verdict = evaluate(NodeLoad.from_annotations("n", annotations, rules), rules, NOW)
        assert wording.overload(verdict) == expected
    # a refusal whose reason is not recorded is still a refusal
    refused = replace(verdict, overload_reason=None)
    assert reason_message(refused, rules.hot_limit) == ABOVE
