"""Timestamps ahead of now (crane's local wall time read as UTC): never fresh, counted in
/metrics by the unknown-annotations counter, and logged once per node in both modes."""

import logging
from datetime import timedelta
from typing import Any
from zoneinfo import ZoneInfo

import anyio
import httpx
import pytest

from extender.scheduling.node_cache import NodeLoadCache, RequestMemo
from extender.scheduling.wire import Node, NodeMeta
from shared.annotations import encode_metric
from shared.load_model import LoadRules
from tests import payloads
from tests.fakes.clock import NOW
from tests.fakes.extender_calls import ClientFactory
from tests.fakes.kube import FakeCollection, obj

SHANGHAI = ZoneInfo("Asia/Shanghai")
FUTURE_COUNTER = (
    'loadsched_extender_unknown_annotations_total{metric="cpu_usage_avg_5m",reason="future"}'
)


def crane_written(rules: LoadRules, usage: float) -> dict[str, str]:
    """Every metric fresh, cpu_usage_avg_5m as crane writes it: Shanghai wall time, literal Z."""
    return {
        **payloads.load_annotations(rules, 0.1, NOW),
        "cpu_usage_avg_5m": encode_metric(usage, NOW, SHANGHAI),
    }


def warnings_about(caplog: pytest.LogCaptureFixture, node: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and r.getMessage().startswith(f"node/{node}: ")
    ]


async def post(client: httpx.AsyncClient, verb: str, body: dict[str, Any]) -> Any:
    response = await client.post(f"/{verb}", content=payloads.encode(body))
    assert response.status_code == 200, response.text
    return response.json()


async def counted(client: httpx.AsyncClient) -> float:
    for line in (await client.get("/metrics")).text.splitlines():
        if line.startswith(FUTURE_COUNTER + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.mark.anyio
async def test_full_node_mode_counts_and_logs_once(
    client: httpx.AsyncClient, rules: LoadRules, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="extender.scheduling.node_cache")
    # 0.9 is above the 0.65 limit, but 8 hours ahead it is not used: fail-open passes
    body = payloads.full_args([payloads.node("n1", crane_written(rules, 0.9))])
    for _ in range(3):
        result = await post(client, "filter", body)
        assert [n["metadata"]["name"] for n in result["Nodes"]["items"]] == ["n1"]
        assert result["FailedAndUnresolvableNodes"] == {}
    assert await counted(client) == 3.0
    [warning] = warnings_about(caplog, "n1")
    assert "cpu_usage_avg_5m" in warning
    assert "8h00m ahead of now" in warning
    assert "spec.timestampZone" in warning


@pytest.mark.anyio
async def test_names_only_mode_counts_and_logs_once(
    make_client: ClientFactory, rules: LoadRules, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="extender.scheduling.node_cache")
    fake = FakeCollection(
        lists=[
            (
                5,
                [
                    obj("n1", 1, crane_written(rules, 0.9)),
                    obj("n2", 2, payloads.load_annotations(rules, 0.9, NOW)),
                ],
            )
        ]
    )
    client = await make_client(fake=fake)
    with anyio.fail_after(15):
        while (await client.get("/readyz")).status_code != 200:
            await anyio.sleep(0.01)
    for _ in range(2):
        result = await post(client, "filter", payloads.names_args(["n1", "n2"]))
        assert result["NodeNames"] == ["n1"]  # n2's fresh 0.9 is overloaded
    assert await counted(client) == 2.0
    [warning] = warnings_about(caplog, "n1")
    assert "cpu_usage_avg_5m" in warning and "spec.timestampZone" in warning
    assert warnings_about(caplog, "n2") == []


def node(name: str, annotations: dict[str, str]) -> Node:
    return Node(metadata=NodeMeta(name=name, annotations=annotations))


def test_each_cache_and_memo_warns_once_per_node(
    rules: LoadRules, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="extender.scheduling.node_cache")
    ahead = crane_written(rules, 0.5)
    memo = RequestMemo(rules)
    memo.load(node("n1", ahead)).verdict(rules, NOW)
    # a changed annotation is a new entry, still the same node: no second warning
    changed = {**ahead, "cpu_usage_avg_5m": encode_metric(0.6, NOW, SHANGHAI)}
    memo.load(node("n1", changed)).verdict(rules, NOW + timedelta(seconds=1))
    memo.load(node("n2", ahead)).verdict(rules, NOW)
    cache = NodeLoadCache(rules)
    cache.replace([node("n1", ahead)])
    cache.view(NOW)
    cache.apply("MODIFIED", node("n1", changed))
    cache.view(NOW + timedelta(seconds=1))
    # one warning for n1 from each owner, one for n2
    assert len(warnings_about(caplog, "n1")) == 2
    assert len(warnings_about(caplog, "n2")) == 1


def test_a_value_within_the_skew_is_not_warned_about(
    rules: LoadRules, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="extender.scheduling.node_cache")
    slightly_ahead = {
        **payloads.load_annotations(rules, 0.1, NOW),
        "cpu_usage_avg_5m": encode_metric(0.9, NOW + timedelta(seconds=59)),
    }
    verdict = RequestMemo(rules).load(node("n1", slightly_ahead)).verdict(rules, NOW)
    assert verdict.overload is not None
    assert caplog.records == []
