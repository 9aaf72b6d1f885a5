"""The rebalancer against a recording fake API: the mark before the eviction, the Events, a
PodDisruptionBudget's 429, dry-run, stale data, the limits, and the status it publishes."""

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import httpx
import msgspec
import pytest
import yaml

from annotator.evicting import TokenBucket
from annotator.metrics import AnnotatorMetrics
from annotator.rebalance.controller import Rebalancer
from annotator.rebalance.full_pod import FullPod
from annotator.rebalance.nodes import NodeFacts
from annotator.rebalance.pods import BoundPods
from annotator.recording import EventRecorder
from shared.annotation_keys import REBALANCED_FROM_ANNOTATION, REBALANCED_USAGE_ANNOTATION
from shared.annotations import encode_metric
from shared.errors import LoadschedError
from shared.estimation import NodeSize
from shared.node_fit import FitNode
from shared.policy import DEFAULT_POLICY_YAML, parse_policy
from shared.quota import Admission
from shared.rules import LoadRules
from tests.fakes.clock import Clock

pytestmark = pytest.mark.anyio

CPU = "cpu_usage_avg_5m"
MEM = "mem_usage_avg_5m"
SIZE = NodeSize(8.0, 32 * 2**30, 8.0, 32 * 2**30)


def policy(**rebalance: Any) -> Any:
    data = yaml.safe_load(DEFAULT_POLICY_YAML)
    data["spec"]["rebalance"] = {"enabled": True, "consecutiveRounds": 2, **rebalance}
    return parse_policy(data)


def pod(name: str, cpu: str, **meta: Any) -> dict[str, Any]:
    owners = meta.pop("owners", [{"kind": "ReplicaSet", "name": f"{name}-rs"}])
    return {
        "metadata": {
            "name": name,
            "namespace": "web",
            "uid": f"uid-{name}",
            "creationTimestamp": "2026-11-22T10:00:00Z",
            "ownerReferences": owners,
            **meta,
        },
        "spec": {
            "nodeName": "hot",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
        },
        "status": {"phase": "Running"},
    }


REQUIRED = {
    "requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
    ]
}
PREFERRED = {
    "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": {}}]
}


def with_spec(body: dict[str, Any], **spec: Any) -> dict[str, Any]:
    body["spec"].update(spec)
    return body


@pytest.mark.parametrize(
    ("spec", "unjudged"),
    [
        ({}, None),
        ({"affinity": {"podAntiAffinity": PREFERRED, "podAffinity": PREFERRED}}, None),
        ({"affinity": {"podAntiAffinity": REQUIRED}}, "required podAntiAffinity"),
        ({"affinity": {"podAffinity": REQUIRED}}, "required podAffinity"),
        ({"affinity": {"nodeAffinity": REQUIRED}}, None),  # judged: node fit reads it
        (
            {"topologySpreadConstraints": [{"maxSkew": 1, "whenUnsatisfiable": "ScheduleAnyway"}]},
            None,
        ),
        (
            {"topologySpreadConstraints": [{"maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}]},
            "topology spread (DoNotSchedule)",
        ),
        ({"topologySpreadConstraints": [{"maxSkew": 1}]}, "topology spread (DoNotSchedule)"),
        ({"containers": [{"name": "c", "ports": [{"containerPort": 80}]}]}, None),
        ({"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 0}]}]}, None),
        (
            {"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 80}]}]},
            "hostPort",
        ),
        (  # an init container's ports are held while it runs only
            {"initContainers": [{"name": "i", "ports": [{"containerPort": 80, "hostPort": 80}]}]},
            None,
        ),
        (
            {
                "initContainers": [
                    {
                        "name": "s",
                        "restartPolicy": "Always",
                        "ports": [{"containerPort": 80, "hostPort": 80}],
                    }
                ]
            },
            "hostPort",
        ),
        (
            {"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "d"}}]},
            "persistent volume",
        ),
        (
            {"volumes": [{"name": "d", "ephemeral": {"volumeClaimTemplate": {}}}]},
            "persistent volume",
        ),
        ({"volumes": [{"name": "c", "configMap": {"name": "c"}}]}, None),
    ],
)
def test_what_the_target_check_does_not_judge(spec: dict[str, Any], unjudged: str | None) -> None:
    body = with_spec(pod("p", "1"), **spec)
    assert msgspec.json.decode(json.dumps(body), type=FullPod).spec.unjudged == unjudged


class FakeAPI:
    def __init__(
        self, pods: list[dict[str, Any]], eviction_status: int = 201, node_misses: int = 0
    ) -> None:
        self.pods = pods
        self.eviction_status = eviction_status
        self.node_misses = node_misses
        """The first node patches answered 404 (the node gone a moment), not applied."""
        self.requests: list[tuple[str, str, Any]] = []
        self.nodes: Nodes | None = None
        """Where a node patch shows, as the annotator's node watch would show it."""

    def handler(self, request: httpx.Request) -> httpx.Response:
        body: Any = None
        if request.content:
            body = json.loads(request.content)
        self.requests.append((request.method, request.url.path, body))
        if request.method == "GET" and request.url.path == "/api/v1/pods":
            selector = request.url.params.get("fieldSelector", "")
            node = selector.removeprefix("spec.nodeName=")
            items = [p for p in self.pods if p["spec"]["nodeName"] == node]
            return httpx.Response(200, json={"items": items})
        if request.method == "PATCH" and request.url.path.startswith("/api/v1/nodes/"):
            if self.node_misses:
                self.node_misses -= 1
                return httpx.Response(404, json={"code": 404, "reason": "NotFound"})
            if self.nodes is not None and self.nodes.watched:
                node = request.url.path.rsplit("/", 1)[1]
                for key, value in body["metadata"]["annotations"].items():
                    if value is None:
                        self.nodes.extra[node].pop(key, None)
                    else:
                        self.nodes.extra[node][key] = value
            return httpx.Response(200, json={})
        if request.url.path.endswith("/eviction"):
            if self.eviction_status == 429:
                return httpx.Response(
                    429, json={"code": 429, "reason": "TooManyRequests", "message": "violates PDB"}
                )
            return httpx.Response(self.eviction_status, json={})
        return httpx.Response(200, json={})

    def calls(self) -> list[tuple[str, str]]:
        return [
            (method, path)
            for method, path, _ in self.requests
            if not path.endswith("/events") and method != "GET"
        ]

    def events(self) -> list[tuple[str, str, str]]:
        return [
            (b["involvedObject"]["kind"], b["reason"], b["message"])
            for _, path, b in self.requests
            if path.endswith("/events")
        ]


class Nodes:
    """Node facts the test moves: ``hot`` at 0.80 CPU, ``quiet`` at 0.20, resampled on demand."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.cpu = {"hot": 0.80, "quiet": 0.20}
        self.extra: dict[str, dict[str, str]] = {"hot": {}, "quiet": {}}
        self.sampled = clock()
        self.watched = True
        """Node patches show here (a watch that keeps up)."""

    def sample(self) -> None:
        self.sampled = self.clock()

    def __call__(self) -> Mapping[str, NodeFacts]:
        return {
            name: NodeFacts(
                {
                    CPU: encode_metric(cpu, self.sampled),
                    MEM: encode_metric(0.30, self.sampled),
                    **self.extra[name],
                },
                SIZE,
                FitNode(name, {"cpu": "8", "memory": "32Gi", "pods": "110"}),
            )
            for name, cpu in self.cpu.items()
        }


def rebalancer(
    api: FakeAPI,
    clock: Clock,
    nodes: Nodes,
    usage: dict[tuple[str, str], float] | None = None,
    metrics: AnnotatorMetrics | None = None,
    quota_admits: Any = None,
    sleep: Callable[[float], Awaitable[None]] | None = None,
    **settings: Any,
) -> Rebalancer:
    chosen = policy(**settings)
    client = httpx.AsyncClient(transport=httpx.MockTransport(api.handler), base_url="http://api")

    async def query(promql: str) -> dict[tuple[str, str], float]:
        if usage is None:
            raise LoadschedError("Prometheus is down")
        return usage if "cpu" in promql else {}

    rules = LoadRules.from_policy(chosen)
    api.nodes = nodes

    async def advance(seconds: float) -> None:
        clock.advance(seconds)

    return Rebalancer(
        kube=client,
        policy=chosen,
        rules=rules,
        node_facts=nodes,
        bound_pods=BoundPods(rules, clock).on,
        usage=query,
        recorder=EventRecorder(client, instance="test", monotonic=clock.monotonic),
        metrics=metrics or AnnotatorMetrics(),
        status_namespace="loadsched-system",
        quota_admits=quota_admits,
        clock=clock,
        monotonic=clock.monotonic,
        sleep=sleep or advance,
    )


async def rounds(controller: Rebalancer, nodes: Nodes, clock: Clock, n: int) -> list[Any]:
    plans: list[Any] = []
    for _ in range(n):
        nodes.sample()
        plans = await controller.round()
        clock.advance(60)
    return plans


async def test_after_n_rounds_the_fewest_pods_move_mark_first() -> None:
    clock = Clock()
    clock.advance(0.25)  # the mark, and the cooldown, are whole seconds
    nodes = Nodes(clock)
    # hot is 0.80 of 8 cores: 1.2 cores over 0.65. Measured: big 1.5, small 0.4, tiny 0.1
    api = FakeAPI([pod("big", "1"), pod("small", "1"), pod("tiny", "1")])
    usage = {("web", "big"): 1.5, ("web", "small"): 0.4, ("web", "tiny"): 0.1}
    controller = rebalancer(api, clock, nodes, usage)
    first = await rounds(controller, nodes, clock, 1)
    assert first == [] and not api.calls()[:-1]  # one round above high: waiting
    plans = await rounds(controller, nodes, clock, 1)
    assert [(m.pod.key, m.target) for m in plans[0].moves] == [("web/big", "quiet")]
    writes = [c for c in api.calls() if "configmaps" not in c[1]]
    assert writes == [
        ("PATCH", "/api/v1/nodes/hot"),
        ("POST", "/api/v1/namespaces/web/pods/big/eviction"),
    ]
    mark = next(b for m, p, b in api.requests if p == "/api/v1/nodes/hot")
    assert json.loads(mark["metadata"]["annotations"][REBALANCED_FROM_ANNOTATION]) == {
        "web/ReplicaSet/big-rs": "2026-11-22T12:16:00Z"  # the second round + 15m cooldown
    }
    # in the same patch, what big used: its replacement is asked for room for that much
    assert json.loads(mark["metadata"]["annotations"][REBALANCED_USAGE_ANNOTATION]) == {
        # no memory sample: estimated as for a pod without a memory request (200Mi)
        "web/ReplicaSet/big-rs": {"cpu": 1.5, "memory": 200 * 2**20}
    }
    kinds = {(kind, reason) for kind, reason, _ in api.events()}
    assert kinds == {("Pod", "Rebalanced"), ("Node", "Rebalanced")}
    message = api.events()[0][2]
    assert "cpu_usage_avg_5m 0.800 above 0.65 for 2 rounds" in message
    assert "uses 1.5 cores (measured)" in message and "node quiet" in message
    # the node is held: the next rounds move nothing while its metric cannot show it
    before = len(api.calls())
    await rounds(controller, nodes, clock, 3)
    assert [c for c in api.calls()[before:] if "eviction" in c[1]] == []


async def test_when_no_node_takes_the_covering_pod_the_pods_a_node_takes_move_instead(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    nodes = Nodes(clock)
    nodes.cpu["quiet"] = 0.50  # big's 1.5 cores would take it to 0.6875, over 0.65
    metrics = AnnotatorMetrics()
    api = FakeAPI([pod("big", "1"), pod("small", "1"), pod("tiny", "1")])
    usage = {("web", "big"): 1.5, ("web", "small"): 0.4, ("web", "tiny"): 0.1}
    controller = rebalancer(api, clock, nodes, usage, metrics)
    with caplog.at_level(logging.INFO, logger="annotator.rebalance.controller"):
        plans = await rounds(controller, nodes, clock, 2)
    # small and tiny fall short of the 1.2 cores over high, but still lower hot by 0.5
    assert [(m.pod.key, m.target) for m in plans[0].moves] == [
        ("web/small", "quiet"),
        ("web/tiny", "quiet"),
    ]
    assert plans[0].unplaced == (("web/big", "no node takes it (1 would-overload)"),)
    evicted = sorted(p for m, p in api.calls() if p.endswith("/eviction"))
    assert evicted == [
        "/api/v1/namespaces/web/pods/small/eviction",
        "/api/v1/namespaces/web/pods/tiny/eviction",
    ]
    assert metrics.rebalance_skipped.labels("no-target")._value.get() == 1
    assert "2 other pod(s) move instead: web/big: no node takes it" in caplog.text


async def test_a_pod_without_a_sample_counts_at_its_request_times_the_factor() -> None:
    clock = Clock()
    nodes = Nodes(clock)
    api = FakeAPI([pod("a", "1"), pod("b", "2")])
    # Prometheus is down: a counts 0.85, b 1.7 cores; b alone covers 1.2
    controller = rebalancer(api, clock, nodes, usage=None)
    plans = await rounds(controller, nodes, clock, 2)
    move = plans[0].moves[0]
    assert (move.pod.key, move.pod.usage, move.pod.measured) == ("web/b", 1.7, False)


async def test_a_disruption_budget_blocks_and_is_counted() -> None:
    clock = Clock()
    nodes = Nodes(clock)
    metrics = AnnotatorMetrics()
    api = FakeAPI([pod("big", "2")], eviction_status=429)
    controller = rebalancer(api, clock, nodes, {("web", "big"): 1.5}, metrics)
    await rounds(controller, nodes, clock, 2)
    blocked = metrics.rebalance_evictions.labels("blocked", CPU)._value.get()
    assert blocked == 1
    assert ("Pod", "RebalanceBlocked") in {(k, r) for k, r, _ in api.events()}
    # the mark written before the eviction is withdrawn, with its usage: nothing moved
    marks = [
        (
            b["metadata"]["annotations"][REBALANCED_FROM_ANNOTATION],
            b["metadata"]["annotations"][REBALANCED_USAGE_ANNOTATION],
        )
        for m, p, b in api.requests
        if p == "/api/v1/nodes/hot"
    ]
    assert None not in marks[0] and marks[-1] == (None, None)
    # nothing was evicted: the node is not held, the next round asks again
    await rounds(controller, nodes, clock, 1)
    assert metrics.rebalance_evictions.labels("blocked", CPU)._value.get() == 2


async def test_the_loop_runs_a_round_each_period_until_cancelled() -> None:
    clock = Clock()
    nodes = Nodes(clock)
    metrics = AnnotatorMetrics()
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 3:
            raise asyncio.CancelledError

    controller = rebalancer(FakeAPI([]), clock, nodes, {}, metrics, sleep=sleep)
    with pytest.raises(asyncio.CancelledError):
        await controller.run()
    assert slept == [60.0, 60.0, 60.0]  # the policy's period
    assert metrics.rebalance_rounds._value.get() == 3


async def test_a_blocked_eviction_leaves_no_fresh_mark_over_an_expired_one() -> None:
    """The node still shows an expired mark of big-rs (the writes that would clear it did not
    land): big-rs may move again, its eviction is blocked, and the mark refreshed for it is
    withdrawn, not kept as if big-rs had moved."""
    clock = Clock()
    nodes = Nodes(clock)
    nodes.extra["hot"] = {
        REBALANCED_FROM_ANNOTATION: '{"web/ReplicaSet/big-rs":"2026-11-22T11:00:00Z"}'
    }
    api = FakeAPI([pod("big", "2")], eviction_status=429, node_misses=2)
    controller = rebalancer(api, clock, nodes, {("web", "big"): 1.5})
    await rounds(controller, nodes, clock, 2)
    assert [c for c in api.calls() if "eviction" in c[1]]
    written = [
        b["metadata"]["annotations"][REBALANCED_FROM_ANNOTATION]
        for m, p, b in api.requests
        if p == "/api/v1/nodes/hot"
    ]
    assert "big-rs" in written[-2] and written[-1] is None
    assert REBALANCED_FROM_ANNOTATION not in nodes.extra["hot"]


async def test_an_eviction_a_budget_blocked_gives_its_share_of_the_limits_back() -> None:
    """Half a token a minute: an eviction tried uses the one token saved; blocked by its budget,
    it gives it back, so the next round (half a token later) may try again."""
    clock = Clock()
    nodes = Nodes(clock)
    metrics = AnnotatorMetrics()
    api = FakeAPI([pod("big", "2")], eviction_status=429)
    limits = {"perMinute": 0.5}
    controller = rebalancer(api, clock, nodes, {("web", "big"): 1.5}, metrics, limits=limits)
    await rounds(controller, nodes, clock, 3)
    assert metrics.rebalance_evictions.labels("blocked", CPU)._value.get() == 2
    assert metrics.rebalance_evictions.labels("throttled", CPU)._value.get() == 0
    # evicted, it keeps it spent: the node is held, and the rate limit holds the next one
    api.eviction_status = 201
    await rounds(controller, nodes, clock, 1)
    assert metrics.rebalance_evictions.labels("evicted", CPU)._value.get() == 1


async def test_dry_run_shows_the_plan_and_evicts_nothing() -> None:
    clock = Clock()
    nodes = Nodes(clock)
    api = FakeAPI([pod("big", "2")])
    controller = rebalancer(api, clock, nodes, {("web", "big"): 1.5}, dryRun=True)
    await rounds(controller, nodes, clock, 3)
    writes = {c for c in api.calls() if "configmaps" not in c[1]}
    assert writes == set()
    assert {r for _, r, _ in api.events()} == {"Rebalancing"}
    status = controller.status.as_json()
    assert status["dryRun"] is True
    assert status["plans"][0]["moves"][0]["target"] == "quiet"
    assert status["lastEvictions"][0]["result"] == "dry-run"
    published = [b for m, p, b in api.requests if "configmaps" in p]
    assert json.loads(published[-1]["data"]["status.json"])["plans"][0]["node"] == "hot"


async def test_stale_metrics_stop_all_action() -> None:
    clock = Clock()
    nodes = Nodes(clock)
    api = FakeAPI([pod("big", "2")])
    metrics = AnnotatorMetrics()
    controller = rebalancer(api, clock, nodes, {("web", "big"): 1.5}, metrics)
    await rounds(controller, nodes, clock, 1)
    clock.advance(600)  # no new sample for 10 minutes: the 3m metric is stale
    for _ in range(3):
        await controller.round()
        clock.advance(60)
    assert [c for c in api.calls() if "eviction" in c[1]] == []
    assert metrics.rebalance_nodes.labels("stale")._value.get() == 2
    # every round counted: the first one's nodes fresh, the three after it stale
    stale = metrics.registry.get_sample_value(
        "loadsched_annotator_rebalance_node_rounds_total", {"state": "stale"}
    )
    assert stale == 2 * 3


async def test_pods_that_may_not_move_are_skipped_and_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    nodes = Nodes(clock)
    metrics = AnnotatorMetrics()
    api = FakeAPI(
        [
            pod("bare", "2", owners=[]),
            pod("agent", "2", owners=[{"kind": "DaemonSet", "name": "agent"}]),
            pod("kept", "2", annotations={"loadsched.io/evict": "false"}),
            with_spec(pod("apart", "2"), affinity={"podAntiAffinity": REQUIRED}),
        ]
    )
    controller = rebalancer(api, clock, nodes, {}, metrics)
    with caplog.at_level("DEBUG", logger="annotator.rebalance.controller"):
        await rounds(controller, nodes, clock, 2)
    assert "pod/web/apart not moved: it asks for required podAntiAffinity" in caplog.text
    skipped = {
        reason: metrics.rebalance_skipped.labels(reason)._value.get()
        for reason in ("no-controller", "daemonset", "opted-out", "unjudged-constraint")
    }
    assert skipped == {
        "no-controller": 1,
        "daemonset": 1,
        "opted-out": 1,
        "unjudged-constraint": 1,
    }
    assert [c for c in api.calls() if "eviction" in c[1]] == []


async def test_one_pod_per_workload_and_per_node_limits() -> None:
    clock = Clock()
    nodes = Nodes(clock)
    nodes.cpu["hot"] = 0.95  # 2.4 cores over: three pods of 1 core needed
    same = [{"kind": "ReplicaSet", "name": "api"}]
    api = FakeAPI([pod(f"api-{i}", "1", owners=same) for i in range(3)] + [pod("other", "1")])
    usage = {("web", f"api-{i}"): 1.0 for i in range(3)} | {("web", "other"): 1.0}
    controller = rebalancer(api, clock, nodes, usage, limits={"perNode": 2})
    await rounds(controller, nodes, clock, 2)
    evicted = sorted(p for m, p in api.calls() if p.endswith("/eviction"))
    # at most one pod of the api ReplicaSet, and two pods from the node
    assert len(evicted) == 2
    assert sum("/pods/api-" in p for p in evicted) == 1


async def test_marks_are_cleared_once_the_node_is_under_low() -> None:
    clock = Clock()
    nodes = Nodes(clock)
    api = FakeAPI([])
    nodes.extra["quiet"] = {
        REBALANCED_FROM_ANNOTATION: '{"web/ReplicaSet/x":"2026-11-22T13:00:00Z"}'
    }
    y, z = '"web/ReplicaSet/y":{"cpu":2.5,"memory":0}', '"web/ReplicaSet/z":{"cpu":1,"memory":0}'
    nodes.extra["hot"] = {
        REBALANCED_FROM_ANNOTATION: '{"web/ReplicaSet/y":"2026-11-22T13:00:00Z"}',
        REBALANCED_USAGE_ANNOTATION: "{" + y + "," + z + "}",  # z's mark is gone
    }
    controller = rebalancer(api, clock, nodes, {})
    await rounds(controller, nodes, clock, 1)
    patches = [(p, b) for m, p, b in api.requests if m == "PATCH" and "/nodes/" in p]
    # quiet (0.20) is under its low (0.52): its mark goes; hot (0.80) keeps its own, and the
    # usage of its own only
    both = (REBALANCED_FROM_ANNOTATION, REBALANCED_USAGE_ANNOTATION)
    assert sorted(patches) == [
        (
            "/api/v1/nodes/hot",
            {
                "metadata": {
                    "annotations": {
                        REBALANCED_FROM_ANNOTATION: '{"web/ReplicaSet/y":"2026-11-22T13:00:00Z"}',
                        REBALANCED_USAGE_ANNOTATION: "{" + y + "}",
                    }
                }
            },
        ),
        ("/api/v1/nodes/quiet", {"metadata": {"annotations": dict.fromkeys(both)}}),
    ]
    # written as it should be: the next round writes nothing
    before = len(api.requests)
    await rounds(controller, nodes, clock, 1)
    assert not [r for r in api.requests[before:] if r[0] == "PATCH" and "/nodes/" in r[1]]


def test_bound_pods_follow_the_watch() -> None:
    clock = Clock()
    chosen = policy()
    store = BoundPods(LoadRules.from_policy(chosen), clock)
    from shared.pods import POD_DECODER

    decoded = [POD_DECODER.decode(msgspec.json.encode(pod(n, "1"))) for n in ("a", "b")]
    store.replace(decoded)
    assert [b.uid for b in store.on("hot")] == ["uid-a", "uid-b"]
    store.apply("DELETED", decoded[0])
    assert [b.uid for b in store.on("hot")] == ["uid-b"]


def test_the_rate_limit_lets_through_what_it_has_and_one_under_one_a_minute() -> None:
    clock = Clock()
    bucket = TokenBucket(1.0, clock.monotonic)
    assert bucket.take_up_to(2) == 1 and bucket.take_up_to(2) == 0
    clock.advance(60)
    assert bucket.take_up_to(2) == 1
    slow = TokenBucket(0.5, clock.monotonic)
    assert slow.take(1) and not slow.take(1)
    clock.advance(120)
    assert slow.take(1)
    slow.give_back(5)  # never more than it saves up
    assert slow.take(1) and not slow.take(1)


async def test_nothing_is_evicted_until_the_node_watch_shows_the_mark() -> None:
    """The extender reads the mark through its own node watch: evicting before a watch shows
    it could let the replacement be placed back. A watch that never shows it moves nothing,
    and the mark is withdrawn."""
    clock = Clock()
    nodes = Nodes(clock)
    nodes.watched = False
    api = FakeAPI([pod("big", "2")])
    controller = rebalancer(api, clock, nodes, {("web", "big"): 1.5})
    await rounds(controller, nodes, clock, 2)
    assert [c for c in api.calls() if "eviction" in c[1]] == []
    written = [
        b["metadata"]["annotations"][REBALANCED_FROM_ANNOTATION]
        for m, p, b in api.requests
        if p == "/api/v1/nodes/hot"
    ]
    assert written[0] is not None and written[-1] is None


async def test_a_new_leader_keeps_the_cooldowns_the_marks_name() -> None:
    clock = Clock()
    nodes = Nodes(clock)
    # the last leader moved a pod of big-rs off quiet ten minutes ago, until 12:05
    nodes.extra["quiet"] = {
        REBALANCED_FROM_ANNOTATION: '{"web/ReplicaSet/big-rs":"2026-11-22T12:05:00Z"}'
    }
    api = FakeAPI([pod("big", "2")])
    controller = rebalancer(api, clock, nodes, {("web", "big"): 1.5})
    await rounds(controller, nodes, clock, 3)
    assert [c for c in api.calls() if "eviction" in c[1]] == []
    assert controller.moved["web/ReplicaSet/big-rs"].strftime("%H:%M") == "12:05"


async def test_a_pod_whose_replacement_its_quota_would_refuse_stays() -> None:
    clock = Clock()
    nodes = Nodes(clock)
    metrics = AnnotatorMetrics()
    api = FakeAPI([pod("big", "2"), pod("small", "1")])
    asked: list[tuple[str, str]] = []

    def admits(candidate: Any, request: Any) -> Admission:
        asked.append((candidate.key, str(request["cpu"])))
        return Admission(candidate.metadata.name != "big", rule="max")

    usage = {("web", "big"): 1.5, ("web", "small"): 1.3}
    controller = rebalancer(api, clock, nodes, usage, metrics, quota_admits=admits)
    plans = await rounds(controller, nodes, clock, 2)
    assert ("web/big", "2") in asked  # asked for the replacement's request, in its place
    assert metrics.rebalance_skipped.labels("quota")._value.get() >= 1
    assert [m.pod.key for m in plans[0].moves] == ["web/small"]


async def test_a_replica_that_stops_leading_exports_no_node_counts() -> None:
    clock = Clock()
    nodes = Nodes(clock)
    metrics = AnnotatorMetrics()
    controller = rebalancer(FakeAPI([]), clock, nodes, {}, metrics, sleep=asyncio.sleep)
    task = asyncio.create_task(controller.run())
    while metrics.rebalance_nodes.labels("under")._value.get() == 0:
        await asyncio.sleep(0.01)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert (
        metrics.registry.get_sample_value("loadsched_annotator_rebalance_nodes", {"state": "under"})
        is None
    )
