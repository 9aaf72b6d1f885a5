"""Estimation and Trimaran's strategies in the extender: recently bound pods from the pod watch
change filter and prioritize, in names-only and full-node mode."""

import json
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest

from extender.scheduling.explain import Explainer
from extender.scheduling.metrics import ExtenderMetrics
from extender.scheduling.node_cache import NodeLoadCache, decode_node
from extender.scheduling.placements import PlacementIndex
from extender.scheduling.verbs import LoadAwareExtender
from extender.scheduling.wire import ARGS_DECODER
from kubectl_loadsched.tables import explain_table
from shared.load_model import LoadRules
from shared.pods import POD_DECODER, Pod
from tests import payloads
from tests.fakes.clock import NOW
from tests.fakes.estimation_cluster import (
    BURST,
    bound_pod,
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
from tests.fakes.kube import FakeCluster

pytestmark = pytest.mark.anyio


def decoded(body: dict[str, Any]) -> Pod:
    return POD_DECODER.decode(payloads.encode(body))


def index(rules: LoadRules, changed: list[str] | None = None) -> PlacementIndex:
    return PlacementIndex(
        rules, clock=lambda: NOW, on_change=(changed.append if changed is not None else print)
    )


def test_the_index_keeps_recently_bound_pods_by_node() -> None:
    rules = LoadRules.from_policy(the_policy(estimation={"enabled": True}))
    changed: list[str] = []
    pods = index(rules, changed)
    pods.replace(
        [
            decoded(bound_pod("a", "n1", NOW - timedelta(seconds=30))),
            decoded(bound_pod("old", "n1", NOW - timedelta(hours=1))),  # beyond the retention
            decoded(bound_pod("untimed", "n2", None)),  # listed, no binding time: long ago
            decoded(payloads.pod("pending")),  # not bound
        ]
    )
    assert [p.uid for p in pods.of("n1")] == ["uid-a"]
    assert pods.of("n2") == () and len(pods) == 1
    assert set(changed) == {"n1"}
    placed = pods.of("n1")[0]
    assert (placed.cpu, placed.memory) == (1.0, float(2**30))
    assert placed.bound_at == NOW - timedelta(seconds=30)

    changed.clear()
    pods.apply("MODIFIED", decoded(bound_pod("b", "n2", None)))  # seen bound now
    assert pods.of("n2")[0].bound_at == NOW and changed == ["n2"]
    ahead = bound_pod("c", "n2", NOW + timedelta(hours=2))  # a binding time ahead: now
    pods.apply("ADDED", decoded(ahead))
    assert [p.bound_at for p in pods.of("n2")] == [NOW, NOW]

    finished = bound_pod("a", "n1", NOW)
    finished["status"]["phase"] = "Succeeded"
    pods.apply("MODIFIED", decoded(finished))
    pods.apply("DELETED", decoded(bound_pod("b", "n2", None)))
    gone = {p.uid: p.gone_at for p in pods.of("n1") + pods.of("n2")}
    assert gone == {"uid-a": NOW, "uid-b": NOW, "uid-c": None}  # kept as gone
    assert len(pods) == 1 and changed[-2:] == ["n1", "n2"]
    changed.clear()
    pods.apply("DELETED", decoded(finished))  # the finished pod's deletion is no news
    assert changed == []


@pytest.mark.parametrize("subtract", [True, False])
def test_a_pod_gone_is_kept_for_the_retention_after_it_left(subtract: bool) -> None:
    """Also a pod the index never kept (bound an hour ago): the samples still hold it."""
    estimation = {"enabled": True, "subtractDeparted": subtract}
    rules = LoadRules.from_policy(the_policy(estimation=estimation))
    now = [NOW]
    pods = PlacementIndex(rules, clock=lambda: now[0])
    pods.replace([decoded(bound_pod("a", "n1", NOW - timedelta(seconds=30)))])
    pods.apply("DELETED", decoded(bound_pod("a", "n1", NOW - timedelta(seconds=30))))
    pods.apply("DELETED", decoded(bound_pod("old", "n1", NOW - timedelta(hours=1))))
    if not subtract:
        assert pods.of("n1") == ()
        return
    kept = pods.of("n1")
    assert [(p.uid, p.gone_at) for p in kept] == [("uid-old", NOW), ("uid-a", NOW)]
    assert kept[0].bound_at == NOW - timedelta(hours=1) and len(pods) == 0
    pods.replace([])  # a list after a watch restarts: still gone
    assert [p.uid for p in pods.of("n1")] == ["uid-old", "uid-a"]
    pods.prune(NOW + rules.retention - timedelta(seconds=1))
    assert len(pods.of("n1")) == 2
    pods.prune(NOW + rules.retention + timedelta(minutes=1))
    assert pods.of("n1") == ()


def test_only_a_pod_seen_leaving_is_kept_as_gone() -> None:
    """A finished pod the index never kept may have finished long ago: not kept. A pod
    being deleted left at its deletion time. A binding assumed for a pod deleted unbound: no
    pod ran."""
    rules = LoadRules.from_policy(the_policy(estimation={"enabled": True}))
    pods = index(rules)
    finished = bound_pod("done", "n1", NOW - timedelta(hours=2))
    finished["status"]["phase"] = "Succeeded"
    pods.apply("DELETED", decoded(finished))
    deleting = bound_pod("going", "n1", NOW - timedelta(hours=1))
    deleting["metadata"]["deletionTimestamp"] = "2026-11-22T11:59:30Z"
    pods.apply("DELETED", decoded(deleting))
    assert [(p.uid, p.gone_at) for p in pods.of("n1")] == [
        ("uid-going", NOW - timedelta(seconds=30))
    ]
    unbound = decoded(payloads.pod("never"))
    pods.record_binding(unbound, "n2")
    assert len(pods.of("n2")) == 1
    pods.apply("DELETED", unbound)
    assert pods.of("n2") == ()


def turned_ready(body: dict[str, Any], at: datetime) -> dict[str, Any]:
    body["status"]["conditions"].append(
        {"type": "Ready", "status": "True", "lastTransitionTime": at.strftime("%Y-%m-%dT%H:%M:%SZ")}
    )
    return body


def test_a_pod_turning_ready_moves_its_start_once() -> None:
    rules = LoadRules.from_policy(the_policy(estimation={"enabled": True}))
    changed: list[str] = []
    pods = index(rules, changed)
    bound = NOW - timedelta(seconds=20)
    pods.apply("ADDED", decoded(bound_pod("a", "n1", bound)))
    startup = timedelta(seconds=30)
    assert pods.of("n1")[0].started_at(startup) == bound + startup
    changed.clear()
    pods.apply("MODIFIED", decoded(bound_pod("a", "n1", bound)))  # nothing new
    assert changed == []
    pods.apply(
        "MODIFIED", decoded(turned_ready(bound_pod("a", "n1", bound), bound + timedelta(seconds=8)))
    )
    assert pods.of("n1")[0].started_at(startup) == bound + timedelta(seconds=8)
    assert changed == ["n1"]
    # Ready again later (a restart): the first start stands
    again = turned_ready(bound_pod("a", "n1", bound), NOW)
    pods.apply("MODIFIED", decoded(again))
    assert pods.of("n1")[0].started_at(startup) == bound + timedelta(seconds=8)
    assert changed == ["n1"]
    # Ready only after the allowance: the start does not move, no verdict is recomputed
    pods.apply("ADDED", decoded(bound_pod("b", "n2", bound)))
    changed.clear()
    pods.apply(
        "MODIFIED", decoded(turned_ready(bound_pod("b", "n2", bound), bound + timedelta(minutes=2)))
    )
    assert changed == []


def test_without_estimation_readiness_is_not_news() -> None:
    rules = LoadRules.from_policy(the_policy(scoring={"targetLoadPacking": {}}))
    changed: list[str] = []
    pods = index(rules, changed)
    bound = NOW - timedelta(seconds=20)
    pods.apply("ADDED", decoded(bound_pod("a", "n1", bound)))
    changed.clear()
    pods.apply("MODIFIED", decoded(turned_ready(bound_pod("a", "n1", bound), bound)))
    assert changed == []


def test_the_index_forgets_pods_past_the_retention() -> None:
    rules = LoadRules.from_policy(the_policy(estimation={"enabled": True}))
    pods = index(rules)
    pods.apply("ADDED", decoded(bound_pod("a", "n1", NOW)))
    pods.prune(NOW + rules.retention - timedelta(seconds=1))
    assert len(pods) == 1
    pods.prune(NOW + rules.retention + timedelta(minutes=1))
    assert len(pods) == 0 and pods.of("n1") == ()


@pytest.mark.parametrize("enabled", [True, False])
async def test_names_only_filter_counts_pods_bound_since_the_sample(
    make_client: ClientFactory, enabled: bool
) -> None:
    nodes = [node("n1", 0.30, 1), node("n2", 0.40, 2)]
    client = await make_client(
        filter_rejections="always",
        fake=cluster(nodes, BURST),
        the_policy=the_policy(estimation={"enabled": enabled}),
    )
    await ready(client)
    result = await post(client, "filter", payloads.names_args(["n1", "n2"]))
    if enabled:
        assert result["NodeNames"] == ["n2"]
        assert result["FailedAndUnresolvableNodes"]["n1"].startswith(
            "Load[cpu_usage_avg_5m]=0.72500 of node[n1] is above 0.65 (0.30000 measured + "
        )
        scores = await post(client, "prioritize", payloads.names_args(["n1", "n2"]))
        assert scores == [{"Host": "n1", "Score": 3}, {"Host": "n2", "Score": 6}]
    else:  # crane: the sample alone; n1 looks the emptier
        assert result["NodeNames"] == ["n1", "n2"]
        scores = await post(client, "prioritize", payloads.names_args(["n1", "n2"]))
        assert scores == [{"Host": "n1", "Score": 7}, {"Host": "n2", "Score": 6}]


async def test_full_node_mode_counts_them_too(make_client: ClientFactory) -> None:
    nodes = [node("n1", 0.30, 1), node("n2", 0.40, 2)]
    client = await make_client(
        filter_rejections="always",
        fake=cluster(nodes, BURST),
        the_policy=the_policy(estimation={"enabled": True}),
    )
    await ready(client)
    result = await post(client, "filter", payloads.full_args(nodes))
    assert [n["metadata"]["name"] for n in result["Nodes"]["items"]] == ["n2"]
    assert set(result["FailedAndUnresolvableNodes"]) == {"n1"}


@pytest.mark.parametrize("when", ["wait", "place"])
@pytest.mark.parametrize("mode", ["names", "full"])
async def test_a_node_without_room_for_the_pod_refuses_it(
    make_client: ClientFactory, mode: str, when: str
) -> None:
    """n1: 0.30 measured + two 1-core pods bound since (0.2125) leaves 0.1375 of 8 cores,
    1.1 cores; n2 at 0.40 leaves 2 cores. The pod being placed counts too (at 85 %). A pod
    neither has room for waits, or with ``place`` passes both (each is under 0.65 on its own)."""
    nodes = [node("n1", 0.30, 1), node("n2", 0.40, 2)]
    estimation = {"enabled": True, "basis": "limit", "whenNoNodeHasRoom": when}
    client = await make_client(
        filter_rejections="always",
        fake=cluster(nodes, BURST[:2]),
        the_policy=the_policy(estimation=estimation),
    )
    await ready(client)

    async def placed(pod: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
        result = await post(client, "filter", filter_args(mode, nodes, pod))
        return passed(mode, result), result["FailedAndUnresolvableNodes"] or {}

    assert (await placed(placing("a", "1")))[0] == ["n1", "n2"]  # 0.85 core
    names, failed = await placed(placing("b", "2"))  # 1.7 cores: n2 only
    assert names == ["n2"]
    assert failed["n1"] == (
        "Load[cpu_usage_avg_5m]=0.72500 of node[n1] with this pod is above 0.65 (0.30000 "
        "measured + 0.21250 estimated for pods the sample does not show yet + 0.21250 this pod)"
    )
    # the same nodes asked about again, for a smaller pod: not the answer kept for the larger
    assert (await placed(placing("c", "1")))[0] == ["n1", "n2"]
    names, failed = await placed(placing("d", "3"))  # 2.55 cores: room on neither
    if when == "wait":
        assert (names, sorted(failed)) == ([], ["n1", "n2"])
    else:
        assert (names, failed) == (["n1", "n2"], {})
    assert (await placed(placing("e", "1", limit="2")))[0] == ["n2"]  # basis limit: 1.7
    assert (await placed(placing("f", "3", daemonset=True)))[0] == ["n1", "n2"]
    counted = (await client.get("/metrics")).text
    refused = 4 if when == "wait" else 2
    assert (
        'loadsched_extender_nodes_filtered_total{metric="cpu_usage_avg_5m",'
        f'reason="overloaded-with-pod"}} {refused}.0'
    ) in counted
    without_room = 0 if when == "wait" else 1
    assert f"loadsched_extender_placed_without_room_total {without_room}.0" in counted


@pytest.mark.parametrize("mode", ["names", "full"])
async def test_placed_without_room_only_where_the_node_is_under_its_limit_alone(
    make_client: ClientFactory, mode: str
) -> None:
    """n1 is over 0.65 with the pods bound since its sample (0.30 + 4 × 0.10625 = 0.725); n2
    (0.40) and n3 (0.50) are under on their own, with room for 2 and 1.2 cores. A 3-core pod
    (2.55 estimated) fits none: it goes to n2 or n3, never n1, and asking again keeps it so."""
    nodes = [node("n1", 0.30, 1), node("n2", 0.40, 2), node("n3", 0.50, 3)]
    client = await make_client(
        filter_rejections="always",
        fake=cluster(nodes, BURST),
        the_policy=the_policy(estimation={"enabled": True}),
    )
    await ready(client)
    for _ in range(2):  # the second answer is the kept one, in names-only mode
        result = await post(client, "filter", filter_args(mode, nodes, placing("big", "3")))
        assert passed(mode, result) == ["n2", "n3"]
        assert list(result["FailedAndUnresolvableNodes"]) == ["n1"]
        assert "0.72500 of node[n1] is above 0.65" in result["FailedAndUnresolvableNodes"]["n1"]
    small = await post(client, "filter", filter_args(mode, nodes, placing("small", "2")))
    assert passed(mode, small) == ["n2"]  # 1.7 cores fit n2: the room counts again
    counted = (await client.get("/metrics")).text
    assert "loadsched_extender_placed_without_room_total 2.0" in counted


async def test_without_estimation_the_pod_being_placed_is_not_counted(
    make_client: ClientFactory,
) -> None:
    nodes = [node("n1", 0.60, 1)]
    client = await make_client(fake=cluster(nodes, []), the_policy=the_policy())
    await ready(client)
    result = await post(client, "filter", payloads.names_args(["n1"], placing("a", "8")))
    assert result["NodeNames"] == ["n1"]  # crane: the node's own value only


@pytest.mark.parametrize("stale", ["failOpen", "failClosed"])
async def test_a_node_the_cache_lacks_counts_as_its_stale_data_rule_says(
    make_client: ClientFactory, stale: str
) -> None:
    """n1 and n2 lack room for a 3-core pod (2.55 estimated); ``ghost`` is not cached. Open,
    the ghost passes, so n1 and n2 refuse for room; closed, it is refused, and n1 and n2 pass
    the pod without room."""
    nodes = [node("n1", 0.40, 1), node("n2", 0.50, 2)]
    client = await make_client(
        filter_rejections="always",
        fake=cluster(nodes, []),
        the_policy=the_policy(estimation={"enabled": True}, staleData=stale),
    )
    await ready(client)
    args = payloads.names_args(["n1", "ghost", "n2"], placing("big", "3"))
    result = await post(client, "filter", args)
    failed = result["FailedAndUnresolvableNodes"] or {}
    if stale == "failOpen":
        assert (result["NodeNames"], sorted(failed)) == (["ghost"], ["n1", "n2"])
    else:
        assert (result["NodeNames"], sorted(failed)) == (["n1", "n2"], ["ghost"])
    without_room = 0 if stale == "failOpen" else 1
    counted = (await client.get("/metrics")).text
    assert f"loadsched_extender_placed_without_room_total {without_room}.0" in counted


def explainer(estimation: dict[str, Any], *loads: float) -> Explainer:
    """n1 at 0.50 and n2 at 0.30 of 8 cores: 1.2 and 2.8 cores of room below 0.65; then a node
    n3, n4, ... at each of ``loads``."""
    rules = LoadRules.from_policy(the_policy(estimation=estimation))
    cache = NodeLoadCache(rules)
    usage = [0.50, 0.30, *loads]
    cache.replace(
        [decode_node(payloads.encode(node(f"n{i}", u, i))) for i, u in enumerate(usage, 1)]
    )
    decide = LoadAwareExtender(
        rules=rules,
        clock=lambda: NOW,
        metrics=ExtenderMetrics(),
        node_cache=cache,
        rejections="always",
    )
    return Explainer(decide, clock=lambda: NOW)


def test_explain_shows_the_pods_estimate_and_the_room_it_lacks() -> None:
    """A 2-core pod is estimated at 1.7 cores: room on n2 only."""
    explain = explainer({"enabled": True}).explain
    explained = explain(decoded(placing("big", "2")))
    assert explained.estimate is not None and explained.estimate.cpu == pytest.approx(1.7)
    rows = {row.node: row for row in explained.nodes}
    assert rows["n2"].passed and not rows["n1"].passed
    assert rows["n1"].reason is not None and "with this pod is above 0.65" in rows["n1"].reason
    small = explain(decoded(placing("small", "1")))
    assert all(row.passed for row in small.nodes)
    assert not explained.placed_without_room and not small.placed_without_room


@pytest.mark.parametrize("when", ["wait", "place"])
def test_explain_says_when_no_node_has_room(when: str) -> None:
    """A 3.3-core pod (2.805 estimated) fits neither n1 (1.2 cores of room) nor n2 (2.8); n3
    is over the limit on its own and refuses it either way."""
    explain = explainer({"enabled": True, "whenNoNodeHasRoom": when}, 0.90).explain
    explained = explain(decoded(placing("big", "3.3")))
    assert explained.placed_without_room is (when == "place")
    over = explained.nodes[-1]
    assert (over.node, over.passed, over.rejected_by) == ("n3", False, "cpu_usage_avg_5m")
    for row in explained.nodes[:-1]:
        assert row.passed is (when == "place")
        assert row.reason is not None and "with this pod is above 0.65" in row.reason
        assert row.reason.startswith("passes: no node has room") is (when == "place")
    table = explain_table(explained.model_dump(mode="json"))  # kubectl loadsched explain
    assert "estimate: 2.8 cores, 179.2Mi once it runs" in table
    assert ("no node has room for it" in table) is (when == "place")
    assert table.count("with this pod is above 0.65") == 2


async def test_target_load_packing_scores_per_pod(make_client: ClientFactory) -> None:
    """Target 40 %; n1 at 10 % of 8 cores, n2 at 30 %. A 1-core pod (predicted 1.5 cores,
    18.75 %): n1 → 28.75 % → 83, n2 → 48.75 % → 34. A 4-core one (6 cores, 75 %): n1 85 %
    → 10, n2 105 % → 0."""
    policy = the_policy(predicate=[], scoring={"targetLoadPacking": {"targetUtilization": 40}})
    nodes = [node("n1", 0.10, 1), node("n2", 0.30, 2)]
    client = await make_client(fake=cluster(nodes, []), the_policy=policy)
    await ready(client)
    small = payloads.names_args(["n1", "n2"])
    small["Pod"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    assert await post(client, "prioritize", small) == [
        {"Host": "n1", "Score": 8},
        {"Host": "n2", "Score": 3},
    ]
    big = payloads.names_args(["n1", "n2"])
    big["Pod"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "4"}}
    assert await post(client, "prioritize", big) == [
        {"Host": "n1", "Score": 1},
        {"Host": "n2", "Score": 0},
    ]


async def test_target_load_packing_predicts_pods_the_sample_misses(
    make_client: ClientFactory,
) -> None:
    """Trimaran's rule: n1's four 1-core pods bound since its sample are predicted at 1.5
    cores each: 10 % + 75 % + the pod's 18.75 % is above 100 %: 0."""
    policy = the_policy(predicate=[], scoring={"targetLoadPacking": {}})
    nodes = [node("n1", 0.10, 1), node("n2", 0.30, 2)]
    client = await make_client(fake=cluster(nodes, BURST), the_policy=policy)
    await ready(client)
    args = payloads.names_args(["n1", "n2"])
    args["Pod"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    assert await post(client, "prioritize", args) == [
        {"Host": "n1", "Score": 0},
        {"Host": "n2", "Score": 3},
    ]


async def test_risk_balancing_scores_the_riskier_node_lower(make_client: ClientFactory) -> None:
    """n1: CPU average 30 %, stddev 25 % → risk (0.30 + 0.25)/2 → 72.5; memory 20 %, 0 →
    90: min 72.5 → 73 → 7. n2: average 40 %, stddev 5 % → 77.5 → 78; memory 80 % → 60:
    min 60 → 6. The pod requests nothing."""
    policy = the_policy(
        predicate=[],
        syncPolicy=[
            {"name": "cpu_usage_avg_5m", "period": "3m"},
            {"name": "cpu_usage_stddev_5m", "period": "3m"},
            {"name": "mem_usage_avg_5m", "period": "3m"},
            {"name": "mem_usage_stddev_5m", "period": "3m"},
        ],
        scoring={"loadVariationRiskBalancing": {}},
    )
    nodes = [
        node("n1", 0.30, 1, cpu_usage_stddev_5m=0.25, mem_usage_avg_5m=0.2, mem_usage_stddev_5m=0),
        node("n2", 0.40, 2, cpu_usage_stddev_5m=0.05, mem_usage_avg_5m=0.8, mem_usage_stddev_5m=0),
    ]
    client = await make_client(fake=cluster(nodes, []), the_policy=policy)
    await ready(client)
    assert await post(client, "prioritize", payloads.names_args(["n1", "n2"])) == [
        {"Host": "n1", "Score": 7},
        {"Host": "n2", "Score": 6},
    ]


class BindingCluster(FakeCluster):
    """The fake cluster, plus the pods/binding subresource (answers ``status`` in turn)."""

    def __init__(self, nodes: list[dict[str, Any]], statuses: list[int] | None = None) -> None:
        super().__init__(cluster(nodes, []).collections)
        self.bound: list[tuple[str, str]] = []
        self.statuses = statuses or []

    async def handler(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/binding"):
            status = self.statuses.pop(0) if self.statuses else 201
            body = json.loads(request.content)
            if status == 201:
                self.bound.append((body["metadata"]["name"], body["target"]["name"]))
                return httpx.Response(201, json={"kind": "Status", "status": "Success"})
            return httpx.Response(
                status,
                json={
                    "kind": "Status",
                    "code": status,
                    "reason": "Conflict",
                    "message": "already bound",
                },
            )
        return await super().handler(request)


def asked(name: str) -> dict[str, Any]:
    body = payloads.pod(name)
    body["metadata"]["uid"] = f"uid-{name}"
    body["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    return body


def binding(name: str, node: str) -> dict[str, Any]:
    return {"PodName": name, "PodNamespace": "default", "PodUID": f"uid-{name}", "Node": node}


async def test_the_bind_verb_counts_a_pod_before_the_watch_shows_it(
    make_client: ClientFactory,
) -> None:
    """n1 at 0.30 of 8 cores: each 1-core pod adds 0.10625, the one being placed too; with
    three bound there, a fourth would take it to 0.725, above 0.65, though no pod watch event
    has come."""
    fake = BindingCluster([node("n1", 0.30, 1), node("n2", 0.40, 2)])
    client = await make_client(
        filter_rejections="always", fake=fake, the_policy=the_policy(estimation={"enabled": True})
    )
    await ready(client)
    for i in range(3):
        args = payloads.names_args(["n1", "n2"], asked(f"p{i}"))
        assert (await post(client, "filter", args))["NodeNames"] == ["n1", "n2"]
        assert await post(client, "bind", binding(f"p{i}", "n1")) == {"Error": ""}
    assert fake.bound == [(f"p{i}", "n1") for i in range(3)]
    result = await post(client, "filter", payloads.names_args(["n1", "n2"], asked("p3")))
    assert result["NodeNames"] == ["n2"]
    message = result["FailedAndUnresolvableNodes"]["n1"]
    assert "0.72500" in message and "0.31875 estimated" in message
    assert "0.10625 this pod" in message


async def test_a_failed_binding_is_taken_back_and_reported(make_client: ClientFactory) -> None:
    fake = BindingCluster([node("n1", 0.50, 1)], statuses=[409])
    client = await make_client(fake=fake, the_policy=the_policy(estimation={"enabled": True}))
    await ready(client)
    await post(client, "filter", payloads.names_args(["n1"], asked("p0")))
    answer = await post(client, "bind", binding("p0", "n1"))
    assert "binding pod/default/p0 to n1" in answer["Error"] and fake.bound == []
    # not counted: 0.50 + 0.10625 for p1 passes (with p0 too, 0.7125 would not)
    result = await post(client, "filter", payloads.names_args(["n1"], asked("p1")))
    assert result["NodeNames"] == ["n1"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"PodNamespace": "default", "PodUID": "u", "Node": "n1"}, "PodName"),
        ({"PodName": "p", "PodUID": "u", "Node": "n1"}, "PodNamespace"),
        ({"PodName": "p", "PodNamespace": "default", "PodUID": "u"}, "Node"),
        ({"PodName": 3, "PodNamespace": "default", "Node": "n1"}, "PodName"),
    ],
)
async def test_a_bad_binding_body_names_the_field(
    make_client: ClientFactory, body: dict[str, Any], field: str
) -> None:
    client = await make_client(fake=BindingCluster([node("n1", 0.1, 1)]))
    response = await client.post("/bind", content=payloads.encode(body))
    assert response.status_code == 400
    assert field in response.json()["detail"]


def test_with_estimation_a_nodes_room_is_what_filter_answers_read() -> None:
    """With estimation a passing node's values set the room it leaves a pod, which filter
    answers read: a change of value is a change for them, without estimation it is not."""
    for estimation, seen in (({"enabled": True}, 1), ({"enabled": False}, 0)):
        rules = LoadRules.from_policy(the_policy(estimation=estimation))
        cache = NodeLoadCache(rules)
        cache.replace([decode_node(payloads.encode(node("n1", 0.30, 1)))])
        view = cache.view(NOW)
        before = view.filter_changes.version
        cache.apply("MODIFIED", decode_node(payloads.encode(node("n1", 0.35, 1))))
        assert cache.view(NOW).filter_changes.version - before == seen
        assert bool(view.verdicts["n1"].headrooms) == estimation["enabled"]


def names_extender(
    rules: LoadRules, nodes: dict[str, dict[str, Any]]
) -> tuple[LoadAwareExtender, NodeLoadCache]:
    """A names-only extender whose node cache holds ``nodes``, its clock at NOW."""
    cache = NodeLoadCache(rules)
    cache.replace([decode_node(payloads.encode(n)) for n in nodes.values()])
    decide = LoadAwareExtender(
        rules=rules,
        clock=lambda: NOW,
        metrics=ExtenderMetrics(),
        node_cache=cache,
        rejections="always",
    )
    return decide, cache


def test_filter_answers_made_with_the_pods_estimate_are_computed_again_not_patched() -> None:
    """Whether any node has room for the pod's estimate depends on every node asked about: a
    filter answer made with it is computed again once a node in it changes its room, never
    patched node by node, and is the answer from scratch."""
    rules = LoadRules.from_policy(the_policy(estimation={"enabled": True}))
    nodes = {f"n{i}": node(f"n{i}", 0.3 + i / 10, i + 1) for i in range(3)}

    def ask(decide: LoadAwareExtender) -> Any:
        args = ARGS_DECODER.decode(payloads.encode(payloads.names_args(sorted(nodes))))
        assert args.Pod is not None
        return json.loads(bytes(decide.filter(args.Pod, args)))  # type: ignore[arg-type]

    decide, cache = names_extender(rules, nodes)
    ask(decide)
    nodes["n1"] = node("n1", 0.62, 2)  # passing still, with less room
    cache.apply("MODIFIED", decode_node(payloads.encode(nodes["n1"])))
    fresh, _ = names_extender(rules, nodes)
    assert ask(decide) == ask(fresh)
    registry = decide._metrics.registry
    labels = {"verb": "filter"}
    assert not registry.get_sample_value("loadsched_extender_answers_kept_total", labels)
    ask(decide)  # nothing changed since: kept
    assert registry.get_sample_value("loadsched_extender_answers_kept_total", labels) == 1


@pytest.mark.parametrize("when", ["wait", "place"])
def test_an_estimated_answer_where_no_node_passed_is_computed_again_when_one_does(
    when: str,
) -> None:
    """Every node refused, then one passes on its own without room for the pod's estimate:
    the answer is computed again (the room check included), not patched as if it fitted."""
    estimation = {"enabled": True, "whenNoNodeHasRoom": when}
    rules = LoadRules.from_policy(the_policy(estimation=estimation))
    nodes = {f"n{i}": node(f"n{i}", 0.9, i + 1) for i in range(3)}

    def ask(decide: LoadAwareExtender) -> tuple[Any, float]:
        args = ARGS_DECODER.decode(payloads.encode(payloads.names_args(sorted(nodes))))
        assert args.Pod is not None
        answer = json.loads(bytes(decide.filter(args.Pod, args)))  # type: ignore[arg-type]
        registry = decide._metrics.registry
        placed = registry.get_sample_value("loadsched_extender_placed_without_room_total")
        return answer, placed or 0.0

    decide, cache = names_extender(rules, nodes)
    assert ask(decide)[0]["NodeNames"] == []
    nodes["n1"] = node("n1", 0.62, 2)  # under 0.65 on its own; 0.24 of 8 cores left, 0.425 asked
    cache.apply("MODIFIED", decode_node(payloads.encode(nodes["n1"])))
    fresh, _ = names_extender(rules, nodes)
    answer, placed = ask(decide)
    assert (answer, placed) == ask(fresh)
    assert answer["NodeNames"] == ([] if when == "wait" else ["n1"])
    assert placed == (when == "place")
