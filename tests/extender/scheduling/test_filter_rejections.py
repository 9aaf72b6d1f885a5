"""``--filter-rejections``: by default a filter answer lists the nodes refused only when it
passes none, the only answer kube-scheduler reads refusals from; ``always`` lists them in
every answer. Which nodes pass, and what the metrics count, are the same either way."""

from typing import Any

import httpx
import pytest

from extender.scheduling.metrics import ExtenderMetrics
from extender.scheduling.node_cache import NodeLoadCache
from extender.scheduling.verbs import LoadAwareExtender
from extender.scheduling.wire import Node
from shared.load_model import LoadRules
from tests import payloads
from tests.fakes.clock import NOW, Clock
from tests.fakes.extender_calls import ClientFactory, ask, counted, loaded_node, wait_ready
from tests.fakes.kube import FakeCollection, obj

pytestmark = pytest.mark.anyio

LOADS = {"cool": 0.2, "hot": 0.9, "warm": 0.5, "hotter": 0.95}


def decider(rules: LoadRules, nodes: list[Node], rejections: Any) -> LoadAwareExtender:
    cache = NodeLoadCache(rules)
    cache.replace(nodes)
    return LoadAwareExtender(
        rules=rules,
        clock=Clock(),
        metrics=ExtenderMetrics(),
        node_cache=cache,
        rejections=rejections,
    )


def test_an_answer_lists_refusals_only_when_no_node_passes(rules: LoadRules) -> None:
    nodes = [loaded_node(name, usage) for name, usage in LOADS.items()]
    by_default = decider(rules, nodes, "when-none-pass")
    always = decider(rules, nodes, "always")
    some = ask(by_default, "filter", list(LOADS))
    assert some["NodeNames"] == ["cool", "warm"]
    assert some["FailedAndUnresolvableNodes"] == {} and some["FailedNodes"] == {}
    listed = ask(always, "filter", list(LOADS))
    assert listed["NodeNames"] == ["cool", "warm"]
    assert set(listed["FailedAndUnresolvableNodes"]) == {"hot", "hotter"}
    # the metrics count every refusal either way
    assert counted(by_default) == counted(always) != {}
    none = ask(by_default, "filter", ["hot", "hotter"])
    assert none["NodeNames"] == []
    assert none["FailedAndUnresolvableNodes"] == listed["FailedAndUnresolvableNodes"]


def test_a_kept_answer_lists_its_refusals_once_its_last_passing_node_turns_hot(
    rules: LoadRules,
) -> None:
    """A kept answer brought up to date node by node lists the refusals when it comes to pass
    no node, and drops them again once one passes."""
    decide = decider(rules, [loaded_node("a", 0.2), loaded_node("b", 0.9)], "when-none-pass")
    cache = decide._cache
    assert cache is not None
    window = ["a", "b"]
    assert ask(decide, "filter", window)["FailedAndUnresolvableNodes"] == {}
    cache.apply("MODIFIED", loaded_node("a", 0.97))
    turned = ask(decide, "filter", window)
    assert turned["NodeNames"] == []
    assert set(turned["FailedAndUnresolvableNodes"]) == {"a", "b"}
    cache.apply("MODIFIED", loaded_node("b", 0.3))
    again = ask(decide, "filter", window)
    assert again["NodeNames"] == ["b"] and again["FailedAndUnresolvableNodes"] == {}
    kept = decide._metrics.registry.get_sample_value(
        "loadsched_extender_answers_kept_total", {"verb": "filter"}
    )
    assert kept == 2  # both brought up to date, not computed again


@pytest.mark.parametrize("listing", ["when-none-pass", "always"])
async def test_both_modes_over_http(
    make_client: ClientFactory, rules: LoadRules, listing: str
) -> None:
    listed = [
        obj(name, i, payloads.load_annotations(rules, usage, NOW))
        for i, (name, usage) in enumerate(LOADS.items())
    ]
    names_client = await make_client(
        fake=FakeCollection(lists=[(10, listed)]), filter_rejections=listing
    )
    await wait_ready(names_client)
    full_client = await make_client(filter_rejections=listing)
    full_nodes = [
        payloads.node(n, payloads.load_annotations(rules, u, NOW), index=i)
        for i, (n, u) in enumerate(LOADS.items())
    ]
    for client, body, hot_only in (
        (names_client, payloads.names_args(list(LOADS)), payloads.names_args(["hot", "hotter"])),
        (full_client, payloads.full_args(full_nodes), payloads.full_args(full_nodes[1::2])),
    ):
        some = await post(client, "filter", body)
        assert set(some["FailedAndUnresolvableNodes"]) == (
            set() if listing == "when-none-pass" else {"hot", "hotter"}
        )
        none = await post(client, "filter", hot_only)
        assert set(none["FailedAndUnresolvableNodes"]) == {"hot", "hotter"}
        assert none["Error"] == ""


async def post(client: httpx.AsyncClient, verb: str, body: dict[str, Any]) -> Any:
    response = await client.post(f"/{verb}", json=body)
    assert response.status_code == 200, response.text
    return response.json()
