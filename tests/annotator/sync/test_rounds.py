import asyncio
from collections.abc import Callable, Coroutine
from datetime import timedelta
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest

from annotator.matching import NodeAddresses
from annotator.metrics import AnnotatorMetrics
from annotator.objects import NodeStore, addresses_of
from annotator.patching import NodePatcher, kube_client
from annotator.sync.hot_value import BindingWindows
from annotator.sync.prometheus import PrometheusClient
from annotator.sync.rounds import AnnotationSync, MetricSync
from annotator.sync.runner import Runner
from shared.kube import direct
from shared.kube.config import KubeEndpoint
from shared.kube.retrying import RetryPolicy
from shared.policy import DynamicSchedulerPolicy, default_policy, parse_policy
from tests.fakes.annotator import FakeNodesAPI, FakePrometheus, node, store
from tests.fakes.clock import NOW
from tests.fakes.kube import served

pytestmark = pytest.mark.anyio

STAMP = "2026-11-22T12:00:00Z"


class Harness:
    def __init__(
        self,
        policy: DynamicSchedulerPolicy,
        series: dict[str, Any],
        *,
        leader: bool = True,
        dry_run: bool = False,
        kube: httpx.AsyncClient | None = None,
        api: FakeNodesAPI | None = None,
    ) -> None:
        self.prometheus = FakePrometheus(series)
        self.elapsed = 0.0
        """The sync's timer: each Prometheus query takes 0.5 s of it."""
        self.api = api or FakeNodesAPI()
        self.metrics = AnnotatorMetrics()
        self.leader = leader
        self.nodes = store(node("n1", "10.0.0.1"), node("n2", "10.0.0.2"), node("n3", "10.0.0.3"))
        self.sync = AnnotationSync(
            policy=policy,
            prometheus=PrometheusClient("http://prom", transport=httpx.MockTransport(self.query)),
            nodes=self.nodes,
            patcher=NodePatcher(
                kube or httpx.AsyncClient(base_url="https://api", transport=self.api.transport()),
                retry=RetryPolicy(backoff=0.001, backoff_max=0.01),
            ),
            windows=BindingWindows(policy.spec.hot_value),
            metrics=self.metrics,
            clock=lambda: NOW,
            may_write=lambda: self.leader,
            dry_run=dry_run,
            timer=lambda: self.elapsed,
        )

    def query(self, request: httpx.Request) -> httpx.Response:
        self.elapsed += 0.5
        return self.prometheus.handler(request)

    def written(self) -> dict[str, dict[str, str | None]]:
        out: dict[str, dict[str, str | None]] = {}
        for name, body in self.api.patches:
            out.setdefault(name, {}).update(body["metadata"]["annotations"])
        return out


DEFAULT = default_policy()
METRICS = MetricSync.all_from(DEFAULT)
ALL = {
    metric.name: [
        ("10.0.0.1:9100", 10.0 * (i + 1)),
        ("10.0.0.2:9100", 50.0),
        ("10.9.9.9:9100", 1.0),
    ]
    for i, metric in enumerate(METRICS)
}


async def test_one_query_per_metric_and_one_patch_per_node() -> None:
    h = Harness(DEFAULT, ALL)
    report = await h.sync.sync(METRICS)
    assert sorted(h.prometheus.queries) == sorted(metric.name for metric in METRICS)
    assert [name for name, _ in h.api.patches].count("n1") == 1
    assert report.queries == 6 and report.writes == 2  # n3 has no series
    written = h.written()
    assert written["n1"] == {
        metric.name: f"{0.1 * (i + 1):.5f},{STAMP}" for i, metric in enumerate(METRICS)
    }
    assert set(written) == {"n1", "n2"}
    text = h.metrics.registry.get_sample_value
    assert text("loadsched_annotator_nodes_unmatched", {"metric": "cpu_usage_avg_5m"}) == 1
    assert text("loadsched_annotator_series_unmatched", {"metric": "cpu_usage_avg_5m"}) == 1
    assert text("loadsched_annotator_node_patches_total", {"kind": "annotations"}) == 2


async def test_a_round_over_a_socket_writes_through_the_annotators_own_client() -> None:
    """The client annotator.main builds (kube_client, ``--kube-direct``): each patch written
    straight to a kept-alive connection, retried after a conflict, with the same bodies as
    through httpx."""
    api = FakeNodesAPI(fail={"n2": [409]})

    async def answer(request: httpx.Request) -> httpx.Response:
        return api.handler(request)

    async with (
        served(answer) as url,
        kube_client(KubeEndpoint(host=url), max_connections=4) as client,
    ):
        assert direct.route(client) is not None
        h = Harness(DEFAULT, ALL, kube=client, api=api)
        report = await h.sync.sync(METRICS)
    # n2's write, retried, ends after n1's: both counted
    assert report.writes == 2
    assert [name for name, _ in api.patches] == ["n1", "n2"]
    assert api.content_types == ["application/merge-patch+json"] * 2
    assert h.written()["n1"] == {
        metric.name: f"{0.1 * (i + 1):.5f},{STAMP}" for i, metric in enumerate(METRICS)
    }


async def test_a_failing_metric_is_skipped_and_counted() -> None:
    series: dict[str, list[tuple[str, float]] | int] = dict(ALL)
    series["cpu_usage_avg_5m"] = 500
    series["mem_usage_avg_5m"] = []
    h = Harness(DEFAULT, series)
    report = await h.sync.sync(METRICS)
    assert report.failed_metrics == ["cpu_usage_avg_5m", "mem_usage_avg_5m"]
    assert "cpu_usage_avg_5m" not in h.written()["n1"]
    assert "cpu_usage_max_avg_1h" in h.written()["n1"]
    get = h.metrics.registry.get_sample_value
    assert (
        get(
            "loadsched_annotator_query_errors_total",
            {"metric": "cpu_usage_avg_5m", "reason": "error"},
        )
        == 1
    )
    assert (
        get(
            "loadsched_annotator_query_errors_total",
            {"metric": "mem_usage_avg_5m", "reason": "empty"},
        )
        == 1
    )


async def test_hot_values_ride_along_and_fall_back_to_zero() -> None:
    h = Harness(DEFAULT, ALL)
    for i in range(4):
        h.sync.windows.record("n2", f"u{i}", NOW - timedelta(seconds=10), NOW)
    await h.sync.sync(METRICS[:1], with_hot=True)
    assert h.written()["n2"]["node_hot_value"] == f"2,{STAMP}"  # 4 in 1m / 2
    assert "node_hot_value" not in h.written()["n1"]  # never hot: nothing to say
    h.sync.windows.prune(NOW + timedelta(minutes=6))
    h.sync._clock = lambda: NOW + timedelta(minutes=6)
    h.api.patches.clear()
    assert await h.sync.sync_hot_values() == 1
    assert h.api.patches == [
        ("n2", {"metadata": {"annotations": {"node_hot_value": "0,2026-11-22T12:06:00Z"}}})
    ]
    h.api.patches.clear()
    assert await h.sync.sync_hot_values() == 0  # zero already written


def rounds(h: Harness, kind: str, nodes: str) -> tuple[float | None, float | None]:
    """(count, sum) of the round duration histogram."""
    get = h.metrics.registry.get_sample_value
    labels = {"kind": kind, "nodes": nodes}
    return (
        get("loadsched_annotator_round_duration_seconds_count", labels),
        get("loadsched_annotator_round_duration_seconds_sum", labels),
    )


async def test_a_round_is_timed_once_with_its_queries_and_writes() -> None:
    h = Harness(DEFAULT, ALL)
    await h.sync.sync(METRICS, with_hot=True)
    assert rounds(h, "metrics", "all") == (1, 3.0)  # six queries of 0.5 s, in one round
    await h.sync.sync(METRICS[:2], only={"n2"})
    assert rounds(h, "metrics", "some") == (1, 1.0)
    await h.sync.sync_hot_values({"n1"})
    await h.sync.sync_hot_values()
    assert rounds(h, "hot", "some") == (1, 0) and rounds(h, "hot", "all") == (1, 0)
    get = h.metrics.registry.get_sample_value
    assert get("loadsched_annotator_rounds_total", {"kind": "metrics"}) == 2
    assert get("loadsched_annotator_rounds_total", {"kind": "hot"}) == 2


async def test_only_new_nodes() -> None:
    h = Harness(DEFAULT, ALL)
    await h.sync.sync(METRICS, only={"n2"})
    assert set(h.written()) == {"n2"}
    assert len(h.prometheus.queries) == 6


@pytest.mark.parametrize(("leader", "dry_run"), [(False, False), (True, True)])
async def test_followers_and_dry_runs_write_nothing(leader: bool, dry_run: bool) -> None:
    h = Harness(DEFAULT, ALL, leader=leader, dry_run=dry_run)
    report = await h.sync.sync(METRICS)
    assert h.api.patches == [] and report.writes == 0
    assert report.annotations["n1"]  # computed all the same


async def test_promql_override_scale_and_crane_zone() -> None:
    policy = parse_policy(
        {
            "spec": {
                "syncPolicy": [
                    {
                        "name": "gpu_usage",
                        "period": "1m",
                        "promql": "avg by (instance) (gpu_util)",
                        "scale": 1,
                    }
                ],
                "timestampZone": "Asia/Shanghai",
            }
        }
    )
    h = Harness(policy, {"avg by (instance) (gpu_util)": [("n1", 0.42)]})
    await h.sync.sync(MetricSync.all_from(policy))
    local = NOW.astimezone(ZoneInfo("Asia/Shanghai")).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert h.written() == {"n1": {"gpu_usage": f"0.42000,{local}"}}


async def run_for(
    seconds: float,
    sync: AnnotationSync,
    policy: DynamicSchedulerPolicy,
    on_tick: Callable[[float], None] | None = None,
) -> None:
    """Run the metric loop on a virtual clock until ``seconds`` have passed."""
    clock = {"t": 0.0}

    async def sleep(delay: float) -> None:
        clock["t"] += delay
        if on_tick is not None:
            on_tick(clock["t"])
        await asyncio.sleep(0)

    runner = Runner(sync, MetricSync.all_from(policy), monotonic=lambda: clock["t"], sleep=sleep)
    task = asyncio.create_task(runner.metric_loop())
    while clock["t"] < seconds:
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_runner_gives_each_metric_its_period_and_shares_patches() -> None:
    policy = parse_policy(
        {
            "spec": {
                "syncPolicy": [{"name": "fast", "period": "10s"}, {"name": "slow", "period": "30s"}]
            }
        }
    )
    h = Harness(policy, {"fast": [("10.0.0.1", 10.0)], "slow": [("10.0.0.1", 20.0)]})
    await run_for(65, h.sync, policy)
    # rounds at t = 0, 10, 20, 30, 40, 50, 60: slow at 0, 30, 60 rides in the same patch
    patches = [set(body["metadata"]["annotations"]) for _, body in h.api.patches]
    assert patches[:4] == [{"fast", "slow"}, {"fast"}, {"fast"}, {"fast", "slow"}]
    assert h.prometheus.queries.count("slow") == 3 and h.prometheus.queries.count("fast") == 7
    # seven rounds, ten queries: the round time is observed once per round
    assert rounds(h, "metrics", "all") == (7, 5.0)


def test_node_store_reports_new_nodes_and_builds_the_index() -> None:
    seen: list[set[str]] = []
    s = NodeStore(on_new=seen.append)
    s.replace([node("n1", "10.0.0.1")])
    s.apply("MODIFIED", node("n1", "10.0.0.1"))
    s.apply("ADDED", node("n2", "10.0.0.2"))
    assert seen == [{"n2"}]  # the first list is synced by the first round anyway
    assert s.index().node_for("10.0.0.2:9100") == "n2"
    s.apply("DELETED", node("n2", "10.0.0.2"))
    assert s.index().node_for("10.0.0.2:9100") is None
    assert NodeAddresses("n1", ("10.0.0.1",), ("n1",)) == addresses_of(node("n1", "10.0.0.1"))


async def test_a_failed_metric_is_retried_before_its_period() -> None:
    policy = parse_policy({"spec": {"syncPolicy": [{"name": "daily", "period": "3h"}]}})
    h = Harness(policy, {"daily": 503})

    def recover(t: float) -> None:
        if t >= 30:
            h.prometheus.series["daily"] = [("10.0.0.1", 50.0)]

    await run_for(100, h.sync, policy, on_tick=recover)
    # at 0 s (failed), 30 s (n1 written; n2, n3 have no series), then every 30 s for those two
    assert h.prometheus.queries == ["daily"] * 4
    assert h.written() == {"n1": {"daily": f"0.50000,{STAMP}"}}
    assert [name for name, _ in h.api.patches] == ["n1"]


async def until_patched(
    h: Harness, loop: Coroutine[Any, Any, None], nudge: Callable[[], None]
) -> None:
    """Run one of the runner's loops, nudge it, and stop it after its first patch."""
    task = asyncio.create_task(loop)
    nudge()
    for _ in range(50):
        await asyncio.sleep(0)
        if h.api.patches:
            break
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_new_nodes_get_every_metric_at_once() -> None:
    h = Harness(DEFAULT, ALL)
    runner = Runner(h.sync, METRICS)
    await until_patched(h, runner.new_node_loop(), lambda: runner.nodes_added({"n2"}))
    assert [name for name, _ in h.api.patches] == ["n2"]
    assert set(h.api.patches[0][1]["metadata"]["annotations"]) == {
        metric.name for metric in METRICS
    }
    assert len(h.prometheus.queries) == len(METRICS)  # one query per metric, not per node


async def test_hot_loop_writes_soon_after_bindings() -> None:
    h = Harness(DEFAULT, ALL)
    h.sync.windows.record("n3", "u1", NOW, NOW)
    h.sync.windows.record("n3", "u2", NOW, NOW)
    runner = Runner(h.sync, METRICS, hot_debounce=0, hot_refresh=3600)
    await until_patched(h, runner.hot_loop(), lambda: runner.bindings_changed({"n3"}))
    assert h.api.patches == [
        ("n3", {"metadata": {"annotations": {"node_hot_value": f"1,{STAMP}"}}})
    ]


async def test_a_replica_that_stops_leading_exports_no_last_round_figures() -> None:
    h = Harness(DEFAULT, ALL)
    runner = Runner(h.sync, METRICS)
    task = asyncio.create_task(runner.run())
    text = h.metrics.registry.get_sample_value
    labels = {"metric": "cpu_usage_avg_5m"}
    for _ in range(200):
        if text("loadsched_annotator_nodes_matched", labels) is not None:
            break
        await asyncio.sleep(0.01)
    assert text("loadsched_annotator_nodes_matched", labels) == 2
    assert text("loadsched_annotator_series_unmatched", labels) == 1
    task.cancel()  # leadership lost
    with pytest.raises(asyncio.CancelledError):
        await task
    for name in ("nodes_matched", "nodes_unmatched", "series_unmatched"):
        assert text(f"loadsched_annotator_{name}", labels) is None
