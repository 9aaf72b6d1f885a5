from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from annotator.patching import NodePatcher
from annotator.sync.prometheus import PrometheusAuth, PrometheusClient, PrometheusError
from shared.errors import APIError
from shared.kube.retrying import RetryPolicy
from tests.fakes.annotator import FakeNodesAPI, FakePrometheus

pytestmark = pytest.mark.anyio


async def test_query_returns_instance_and_value() -> None:
    fake = FakePrometheus(
        {"cpu_usage_avg_5m": [("10.0.0.1:9100", 63.5), ("10.0.0.2:9100", float("nan"))]}
    )
    client = PrometheusClient("http://prom", transport=fake.transport())
    series = await client.query("cpu_usage_avg_5m")
    assert series[0] == ("10.0.0.1:9100", 63.5)
    assert series[1][1] != series[1][1]  # NaN passes through; the matcher writes 0
    await client.aclose()


@pytest.mark.parametrize(
    ("handler", "mentions"),
    [
        (
            lambda r: httpx.Response(
                503, json={"status": "error", "errorType": "unavailable", "error": "busy"}
            ),
            "HTTP 503 unavailable: busy",
        ),
        (lambda r: httpx.Response(502, text="<html>bad gateway</html>"), "unreadable body"),
        (
            lambda r: httpx.Response(
                200, json={"status": "success", "data": {"resultType": "matrix", "result": []}}
            ),
            "instant vector",
        ),
    ],
)
async def test_query_errors(
    handler: Callable[[httpx.Request], httpx.Response], mentions: str
) -> None:
    client = PrometheusClient("http://prom", transport=httpx.MockTransport(handler))
    with pytest.raises(PrometheusError, match=mentions):
        await client.query("x")


async def test_unreachable_prometheus() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    client = PrometheusClient("http://prom", transport=httpx.MockTransport(refuse))
    with pytest.raises(PrometheusError, match="ConnectError"):
        await client.query("x")


async def test_auth_files_are_read_per_request(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first\n")
    fake = FakePrometheus()
    client = PrometheusClient(
        "http://prom", auth=PrometheusAuth(bearer_token_file=token), transport=fake.transport()
    )
    await client.query("a")
    token.write_text("rotated")
    await client.query("b")
    assert [h["authorization"] for h in fake.headers] == ["Bearer first", "Bearer rotated"]
    password = tmp_path / "password"
    password.write_text("s3cret")
    basic = PrometheusClient(
        "http://prom",
        auth=PrometheusAuth(username="u", password_file=password),
        transport=fake.transport(),
    )
    await basic.query("c")
    assert fake.headers[-1]["authorization"] == "Basic dTpzM2NyZXQ="  # base64("u:s3cret")


def patcher(fake: FakeNodesAPI) -> NodePatcher:
    client = httpx.AsyncClient(base_url="https://api", transport=fake.transport())
    return NodePatcher(client, retry=RetryPolicy(attempts=4, backoff=0.001, backoff_max=0.001))


async def test_patch_is_one_merge_patch_of_annotations() -> None:
    fake = FakeNodesAPI()
    assert await patcher(fake).patch_annotations(
        "n1", {"cpu_usage_avg_5m": "0.50000,2026-11-22T12:00:00Z", "gone": None}
    )
    assert fake.patches == [
        (
            "n1",
            {
                "metadata": {
                    "annotations": {
                        "cpu_usage_avg_5m": "0.50000,2026-11-22T12:00:00Z",
                        "gone": None,
                    }
                }
            },
        )
    ]
    assert fake.content_types == ["application/merge-patch+json"]


@pytest.mark.parametrize(
    "failures", [[500], [429, 503], [409], [httpx.ConnectError("x"), httpx.ReadTimeout("y")]]
)
async def test_transient_failures_are_retried(failures: list[Any]) -> None:
    fake = FakeNodesAPI(fail={"n1": list(failures)})
    assert await patcher(fake).patch_annotations("n1", {"a": "b"})
    assert len(fake.patches) == 1


async def test_deleted_node_is_skipped() -> None:
    fake = FakeNodesAPI(fail={"n1": [404]})
    assert not await patcher(fake).patch_annotations("n1", {"a": "b"})


async def test_client_errors_escalate_at_once() -> None:
    fake = FakeNodesAPI(fail={"n1": [403, 200]})
    with pytest.raises(APIError, match="403"):
        await patcher(fake).patch_annotations("n1", {"a": "b"})
    assert fake.fail["n1"] == [200]  # not retried


async def test_retries_are_bounded() -> None:
    fake = FakeNodesAPI(fail={"n1": [500] * 10})
    with pytest.raises(APIError, match="500"):
        await patcher(fake).patch_annotations("n1", {"a": "b"})
    assert len(fake.fail["n1"]) == 6
