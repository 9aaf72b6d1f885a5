"""Requeue: a refusal that no longer holds becomes one Node annotation write, and only then."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import httpx
import msgspec
import pytest

from extender.scheduling.metrics import ExtenderMetrics
from extender.scheduling.node_cache import NodeLoadCache
from extender.scheduling.quota_gate import QuotaGate
from extender.scheduling.requeue import (
    REMEMBER_SECONDS,
    REQUEUE_ANNOTATION,
    Requeuer,
    RequeueTracker,
)
from extender.scheduling.verbs import LoadAwareExtender
from extender.scheduling.wire import ARGS_DECODER, Node, NodeMeta, PodInfo
from shared.annotations import encode_metric
from shared.estimation import Need
from shared.load_model import LoadRules
from shared.nodes import NodeStatus
from shared.pods import POD_DECODER
from shared.policy import default_policy, parse_policy
from shared.quota_ledger import QUOTA_DECODER, QuotaLedger
from tests import payloads
from tests.fakes.clock import NOW, Clock
from tests.quota_objects import elastic_quota, quota_pod

pytestmark = pytest.mark.anyio

RULES = LoadRules.from_policy(default_policy())


def node(name: str, usage: float | None, at: datetime = NOW) -> Node:
    annotations = {}
    if usage is not None:
        annotations = {
            k: encode_metric(usage, at) for k in ("cpu_usage_avg_5m", "mem_usage_avg_5m")
        }
    return Node(metadata=NodeMeta(name=name, annotations=annotations))


class Rig:
    """An extender's decisions and its requeuer over one node cache, with a recording API."""

    def __init__(
        self,
        nodes: list[Node],
        *,
        rules: LoadRules = RULES,
        quota: QuotaGate | None = None,
        status: int = 200,
    ) -> None:
        self.cache = NodeLoadCache(rules)
        self.cache.replace(nodes)
        self.clock = Clock()
        self.metrics = ExtenderMetrics()
        self.tracker = RequeueTracker()
        self.decide = LoadAwareExtender(
            rules=rules,
            clock=self.clock,
            metrics=self.metrics,
            node_cache=self.cache,
            quota=quota,
            requeue=self.tracker,
        )
        self.requeuer = Requeuer(
            tracker=self.tracker,
            node_cache=self.cache,
            quota=quota,
            fail_closed=rules.fail_closed,
            metrics=self.metrics,
            clock=self.clock,
            period=0.5,
            min_interval=1.0,
        )
        self.patches: list[tuple[str, dict[str, Any]]] = []
        self.status = status

        def handle(request: httpx.Request) -> httpx.Response:
            self.patches.append((request.url.path, json.loads(request.content)))
            assert request.headers["content-type"] == "application/merge-patch+json"
            if self.status != 200:
                return httpx.Response(self.status, json={"code": self.status, "message": "no"})
            return httpx.Response(200, json={})

        self.client = httpx.AsyncClient(
            transport=httpx.MockTransport(handle), base_url="https://api.test"
        )

    def filter(self, names: list[str], the_pod: dict[str, Any] | None = None) -> list[str]:
        args = ARGS_DECODER.decode(payloads.encode(payloads.names_args(names, the_pod)))
        assert args.Pod is not None
        answer = self.decide.filter(args.Pod, args)
        if isinstance(answer, msgspec.Raw):
            passing: list[str] = json.loads(bytes(answer))["NodeNames"]
            return passing
        return list(answer.NodeNames or ())

    async def step(self) -> None:
        """One pass of the requeue loop."""
        due = self.requeuer.due()
        if due is not None:
            await self.requeuer.write(self.client, *due)

    def counted(self, name: str, **labels: str) -> float:
        return self.metrics.registry.get_sample_value(name, labels) or 0.0


NAMES = ["n1", "n2", "n3"]


async def test_a_pod_left_with_no_node_is_requeued_once_a_node_passes() -> None:
    rig = Rig([node(n, 0.95) for n in NAMES])
    assert rig.filter(NAMES) == []
    await rig.step()
    assert rig.patches == [], "nothing passes yet: nothing written"

    rig.cache.apply("MODIFIED", node("n2", 0.20))
    await rig.step()
    assert len(rig.patches) == 1
    path, body = rig.patches[0]
    assert path == "/api/v1/nodes/n2"
    value = body["metadata"]["annotations"][REQUEUE_ANNOTATION]
    assert value.startswith("load,2026-11-22T12:00:00Z")
    assert rig.counted("loadsched_extender_requeue_transitions_total", cause="load") == 1
    assert rig.counted("loadsched_extender_requeue_writes_total", result="written") == 1

    assert not rig.tracker, "one write requeues every refused pod: nothing left to watch"
    rig.clock.advance(5)
    rig.cache.apply("MODIFIED", node("n3", 0.10))
    await rig.step()
    assert len(rig.patches) == 1, "n3 was refused before the write: its pod was requeued by it"
    assert rig.filter(NAMES) == ["n2", "n3"]


async def test_nothing_is_written_when_the_pod_had_a_node() -> None:
    rig = Rig([node("n1", 0.95), node("n2", 0.95), node("n3", 0.10)])
    assert rig.filter(NAMES) == ["n3"]
    rig.cache.apply("MODIFIED", node("n1", 0.20))
    rig.clock.advance(2)
    await rig.step()
    assert rig.patches == []
    assert not rig.tracker


async def test_a_value_going_stale_is_a_transition_with_no_event() -> None:
    """failOpen: an overloaded value that goes stale no longer refuses; only time changed."""
    rig = Rig([node(n, 0.95, at=NOW - timedelta(minutes=7)) for n in NAMES])
    assert rig.filter(NAMES) == []
    await rig.step()
    assert rig.patches == []
    rig.clock.advance(61)  # 3m period + 5m: the 5-minute values go stale after 8 minutes
    await rig.step()
    assert len(rig.patches) == 1
    assert rig.counted("loadsched_extender_requeue_transitions_total", cause="load") == 3


async def test_transitions_in_one_interval_are_coalesced_into_one_write() -> None:
    rig = Rig([node(n, 0.95) for n in NAMES])
    assert rig.filter(NAMES) == []
    rig.cache.apply("MODIFIED", node("n1", 0.20))
    await rig.step()
    assert len(rig.patches) == 1
    assert rig.filter(["n2", "n3"]) == []  # retried after the write, refused again
    rig.cache.apply("MODIFIED", node("n2", 0.20))
    rig.clock.advance(0.3)
    await rig.step()
    rig.cache.apply("MODIFIED", node("n3", 0.20))
    rig.clock.advance(0.3)
    await rig.step()
    assert len(rig.patches) == 1, "within the minimum interval: held back"
    rig.clock.advance(0.5)
    await rig.step()
    assert len(rig.patches) == 2, "both later transitions in one write"
    assert rig.counted("loadsched_extender_requeue_transitions_total", cause="load") == 3
    assert rig.patches[1][0] == "/api/v1/nodes/n2"
    rig.clock.advance(5)
    await rig.step()
    assert len(rig.patches) == 2


async def test_failed_write_is_counted_and_tried_again() -> None:
    rig = Rig([node(n, 0.95) for n in NAMES], status=403)
    assert rig.filter(NAMES) == []
    rig.cache.apply("MODIFIED", node("n1", 0.20))
    await rig.step()
    assert len(rig.patches) == 1
    assert rig.counted("loadsched_extender_requeue_writes_total", result="error") == 1
    rig.status = 200
    rig.clock.advance(0.5)
    await rig.step()
    assert len(rig.patches) == 1, "the minimum interval holds after a failure too"
    rig.clock.advance(0.6)
    await rig.step()
    assert len(rig.patches) == 2
    assert rig.counted("loadsched_extender_requeue_writes_total", result="written") == 1


async def test_refusals_are_forgotten_after_the_schedulers_own_flush() -> None:
    rig = Rig([node(n, 0.95) for n in NAMES])
    assert rig.filter(NAMES) == []
    rig.clock.advance(REMEMBER_SECONDS + 1)
    rig.cache.apply("MODIFIED", node("n1", 0.20, at=rig.clock.now))
    await rig.step()
    assert rig.patches == []
    assert not rig.tracker


async def test_the_same_answer_handed_out_again_keeps_its_nodes_remembered() -> None:
    rig = Rig([node(n, 0.95) for n in NAMES])
    assert rig.filter(NAMES) == []
    rig.clock.advance(REMEMBER_SECONDS - 10)
    assert rig.filter(list(reversed(NAMES))) == []  # the kept answer, asked again later
    rig.clock.advance(20)  # past the first refusal's memory, within the second's
    rig.cache.apply("MODIFIED", node("n3", 0.20, at=rig.clock.now))
    await rig.step()
    assert [p for p, _ in rig.patches] == ["/api/v1/nodes/n3"]


async def test_fail_closed_stale_refreshed_and_node_added() -> None:
    policy = parse_policy(
        {
            "apiVersion": "scheduler.policy.crane.io/v1alpha1",
            "kind": "DynamicSchedulerPolicy",
            "spec": {
                "staleData": "failClosed",
                "syncPolicy": [{"name": "cpu_usage_avg_5m", "period": "3m"}],
                "predicate": [{"name": "cpu_usage_avg_5m", "maxLimitPecent": 0.65}],
                "priority": [{"name": "cpu_usage_avg_5m", "weight": 1}],
            },
        }
    )
    rules = LoadRules.from_policy(policy)
    stale = NOW - timedelta(minutes=20)
    rig = Rig([node("n1", 0.30, at=stale)], rules=rules)
    assert rig.filter(["n2"]) == []  # not cached yet
    rig.cache.apply("ADDED", node("n2", 0.30))
    await rig.step()
    assert rig.filter(["n1"]) == []  # stale
    rig.clock.advance(1.1)
    rig.cache.apply("MODIFIED", node("n1", 0.30, at=rig.clock.now))
    await rig.step()
    assert [p for p, _ in rig.patches] == ["/api/v1/nodes/n2", "/api/v1/nodes/n1"]
    assert rig.counted("loadsched_extender_requeue_transitions_total", cause="node-added") == 1
    assert rig.counted("loadsched_extender_requeue_transitions_total", cause="stale") == 1


def quota_gate(ledger: QuotaLedger, metrics: ExtenderMetrics) -> QuotaGate:
    return QuotaGate(ledger, allocatable=lambda _: {"cpu": "8"}, metrics=metrics)


def put_quota(ledger: QuotaLedger, body: dict[str, Any], event: str = "ADDED") -> None:
    ledger.quota_store.apply(event, QUOTA_DECODER.decode(json.dumps(body)))


async def test_a_pod_refused_by_its_quota_is_requeued_when_max_is_raised() -> None:
    ledger = QuotaLedger(clock=lambda: 0.0)
    metrics = ExtenderMetrics()
    put_quota(ledger, elastic_quota("team", min={"cpu": 1}, max={"cpu": 1}))
    put_quota(ledger, elastic_quota("lender", min={"cpu": 4}))
    ledger.pod_store.replace([POD_DECODER.decode(json.dumps(quota_pod("a", "team", 1, node="n1")))])
    rig = Rig([node(n, 0.10) for n in NAMES], quota=quota_gate(ledger, metrics))
    waiting = quota_pod("b", "team", 1)
    assert rig.filter(NAMES, waiting) == []
    await rig.step()
    assert rig.patches == []

    put_quota(ledger, elastic_quota("team", min={"cpu": 1}, max={"cpu": 2}, rv=2), "MODIFIED")
    await rig.step()
    assert [p for p, _ in rig.patches] == ["/api/v1/nodes/n1"], "any node: the first by name"
    assert rig.patches[0][1]["metadata"]["annotations"][REQUEUE_ANNOTATION].startswith("quota,")
    assert rig.counted("loadsched_extender_requeue_transitions_total", cause="quota") == 1
    assert rig.filter(NAMES, waiting) == NAMES


async def test_a_refused_pod_bound_meanwhile_needs_no_requeue() -> None:
    ledger = QuotaLedger(clock=lambda: 0.0)
    put_quota(ledger, elastic_quota("team", min={"cpu": 1}, max={"cpu": 1}))
    put_quota(ledger, elastic_quota("lender", min={"cpu": 4}))
    first = quota_pod("a", "team", 1, node="n1")
    ledger.pod_store.replace([POD_DECODER.decode(json.dumps(first))])
    rig = Rig([node(n, 0.10) for n in NAMES], quota=quota_gate(ledger, ExtenderMetrics()))
    waiting = quota_pod("b", "team", 1)
    assert rig.filter(NAMES, waiting) == []
    # the waiting pod gets bound (say, by another scheduler) and the first one leaves
    ledger.pod_store.apply(
        "MODIFIED", POD_DECODER.decode(json.dumps(quota_pod("b", "team", 1, node="n2")))
    )
    ledger.pod_store.apply("DELETED", POD_DECODER.decode(json.dumps(first)))
    await rig.step()
    assert rig.patches == []
    assert not rig.tracker


def test_the_tracker_reports_each_refusal_once_and_forgets_placed_pods() -> None:
    tracker = RequeueTracker()
    overloaded = lambda _: ("cpu_usage_avg_5m", "overloaded")  # noqa: E731
    tracker.refused_nodes("uid-a", {"n1": "x", "n2": "y"}, overloaded, 0)
    pod = msgspec.json.decode(payloads.encode(quota_pod("p", "ns", 1)), type=PodInfo)
    tracker.refused_pod(pod, {}, 0)
    found = tracker.transitions(passes=lambda n, _: n == "n1", admits=lambda *_: True, now=1)
    assert sorted(found, key=str) == [("load", "n1"), ("quota", None)]
    assert list(tracker.nodes) == ["n2"]
    assert tracker.transitions(passes=lambda n, _: n == "n1", admits=lambda *_: True, now=1) == []
    tracker.placed("uid-a")
    assert not tracker.nodes, "no pod waits on the load filter: its nodes do not matter"
    tracker.placed(pod.metadata.uid)
    assert not tracker


async def test_no_write_when_the_schedulers_own_retry_won_the_race() -> None:
    """The change reached kube-scheduler and the extender alike: the retry was placed."""
    rig = Rig([node(n, 0.95) for n in NAMES])
    assert rig.filter(NAMES) == []
    rig.cache.apply("MODIFIED", node("n2", 0.20))
    assert rig.filter(NAMES) == ["n2"]  # the same pod, retried on the Node event
    await rig.step()
    assert rig.patches == []
    assert rig.counted("loadsched_extender_requeue_transitions_total", cause="load") == 0


async def test_a_transition_found_before_the_pod_was_placed_is_not_written() -> None:
    rig = Rig([node(n, 0.95) for n in NAMES])
    assert rig.filter(NAMES) == []
    rig.cache.apply("MODIFIED", node("n1", 0.20))
    await rig.step()  # written
    assert rig.filter(NAMES) == ["n1"] and rig.filter(["n2", "n3"], payloads.pod("other")) == []
    rig.cache.apply("MODIFIED", node("n2", 0.20))
    rig.clock.advance(0.3)
    await rig.step()  # found, held back by the minimum interval
    assert rig.filter(["n2", "n3"], payloads.pod("other")) == ["n2"]  # placed meanwhile
    rig.clock.advance(1)
    await rig.step()
    assert len(rig.patches) == 1


def estimated(when: str) -> LoadRules:
    """Estimation on; ``when`` no node has room for a pod, it waits or is placed."""
    return LoadRules.from_policy(
        parse_policy(
            {
                "spec": {
                    "syncPolicy": [{"name": "cpu_usage_avg_5m", "period": "3m"}],
                    "predicate": [{"name": "cpu_usage_avg_5m", "maxLimitPecent": 0.65}],
                    "priority": [{"name": "cpu_usage_avg_5m", "weight": 1}],
                    "estimation": {"enabled": True, "whenNoNodeHasRoom": when},
                }
            }
        )
    )


ESTIMATED = estimated("wait")
"""Estimation where a pod no node has room for waits (with ``place`` it never waits for room)."""
PLACED = estimated("place")
"""Estimation where a pod no node has room for goes to a node under its limits on its own."""


def requesting(name: str, cpu: str) -> dict[str, Any]:
    """A pod requesting ``cpu``."""
    body = payloads.pod(name)
    body["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu}}
    return body


def sized(name: str, usage: float) -> Node:
    """A 4-core node at ``usage`` CPU."""
    return Node(
        metadata=NodeMeta(name=name, annotations={"cpu_usage_avg_5m": encode_metric(usage, NOW)}),
        status=NodeStatus(capacity={"cpu": "4", "memory": "16Gi"}),
    )


async def test_a_pod_refused_for_want_of_room_is_requeued_once_it_fits() -> None:
    """Every node passes on its own at 0.55 of 4 cores, but a 1-core pod (0.85 core, 0.2125)
    would take each past 0.65: nothing is written while that holds (each node passes an
    ordinary pod), and a write follows once n2 has the room."""
    rig = Rig([sized(n, 0.55) for n in NAMES], rules=ESTIMATED)
    one_core = requesting("big", "1")
    small = requesting("small", "100m")
    assert rig.filter(NAMES, one_core) == []
    assert rig.filter(NAMES, small) == NAMES, "a 100m pod fits"
    assert rig.filter(NAMES, one_core) == []  # still waiting
    await rig.step()
    rig.clock.advance(5)
    await rig.step()
    assert rig.patches == [], "no node has room for the pod yet"
    assert rig.counted("loadsched_extender_requeue_transitions_total", cause="load") == 0

    rig.cache.apply("MODIFIED", sized("n2", 0.95))  # overloaded on its own now
    rig.clock.advance(5)
    assert rig.filter(NAMES, one_core) == []
    rig.cache.apply("MODIFIED", sized("n2", 0.60))  # passes on its own, no room for the pod
    await rig.step()
    assert rig.patches == []
    rig.cache.apply("MODIFIED", sized("n2", 0.40))  # 0.40 + 0.2125 fits
    await rig.step()
    assert [path for path, _ in rig.patches] == ["/api/v1/nodes/n2"]
    assert rig.counted("loadsched_extender_requeue_transitions_total", cause="load") == 1
    assert rig.filter(NAMES, one_core) == ["n2"]


async def test_a_node_that_passes_again_without_room_for_the_waiting_pod_is_no_transition() -> None:
    rig = Rig([sized(n, 0.95) for n in NAMES], rules=ESTIMATED)
    one_core = requesting("big", "1")
    assert rig.filter(NAMES, one_core) == []  # every node overloaded on its own
    rig.cache.apply("MODIFIED", sized("n3", 0.60))  # passes on its own, no room for the pod
    await rig.step()
    assert rig.patches == []
    rig.cache.apply("MODIFIED", sized("n3", 0.30))
    await rig.step()
    assert [path for path, _ in rig.patches] == ["/api/v1/nodes/n3"]


async def test_placed_without_room_a_node_under_its_limit_on_its_own_is_retried_at_once() -> None:
    """With ``place`` the pod takes a node that passes on its own even without room for it, so
    that node's return is a transition though the pod does not fit its room."""
    rig = Rig([sized(n, 0.95) for n in NAMES], rules=PLACED)
    one_core = requesting("big", "1")
    assert rig.filter(NAMES, one_core) == []  # every node overloaded on its own
    rig.cache.apply("MODIFIED", sized("n3", 0.60))  # passes on its own, no room for the pod
    await rig.step()
    assert [path for path, _ in rig.patches] == ["/api/v1/nodes/n3"]
    assert rig.filter(NAMES, one_core) == ["n3"]


def test_the_smallest_pod_waiting_for_room_decides_when_a_node_is_retried() -> None:
    tracker = RequeueTracker()
    tight = lambda _: ("cpu_usage_avg_5m", "overloaded-with-pod")  # noqa: E731
    tracker.refused_nodes("uid-a", {"n1": "x"}, tight, 0, Need(2.0, 100.0))
    tracker.refused_nodes("uid-b", {"n1": "x"}, tight, 0, Need(1.0, 300.0))
    assert tracker.nodes["n1"][2] == Need(1.0, 100.0)
    tracker.refused_nodes("uid-c", {"n1": "x", "n2": "y"}, tight, 0)  # no estimate: any pod
    assert tracker.nodes["n1"][2] is None and tracker.nodes["n2"][2] is None
    tracker.refused_nodes("uid-d", {"n1": "x"}, tight, 0, Need(1.0, 100.0))
    assert tracker.nodes["n1"][2] is None, "a pod that fits anywhere passing still waits"
    tracker.nodes["n1"] = (9.0, "load", Need(1.0, 100.0))
    asked: list[Need | None] = []
    tracker.transitions(passes=lambda _, need: asked.append(need) or False, admits=None, now=1)
    assert asked == [Need(1.0, 100.0), None]
