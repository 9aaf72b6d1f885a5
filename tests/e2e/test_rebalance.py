"""The rebalancer on the real control plane: pods kwok really runs, their usage served as the
kubelet's cAdvisor series by the synthetic exporter and scraped by Prometheus, each node's
usage following the pods on it, the annotator (two replicas, one leader) syncing it and
evicting through the real Eviction API, kube-scheduler placing the replacements through the
extender.

Three hungry pods of one ReplicaSet (1.2 cores each, 500m requested) are stacked on node-1
(the other nodes cordoned while they are created), which puts it at 0.15 + 3 × 1.2 / 8 = 0.60
of its CPU, above the rebalancer's high threshold 0.5. The pods prefer node-1 and each other
(preferred node and pod affinity), so kube-scheduler would place a replacement back there:
only the rebalancer's mark keeps it off. In order: values older than their freshness (Prometheus
gone, node-1 still reading overloaded) stop all action; dry-run plans and evicts nothing; a
PodDisruptionBudget at its limit blocks and is counted; without it one pod (the fewest that
cover 0.8 cores over) is evicted by the leader alone, its replacement lands elsewhere, node-1
drops under 0.5, and nothing more moves."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from sandbox import kwok
from sandbox.cluster import Sandbox
from sandbox.metrics_stack import MetricsStack
from sandbox.processes import wait_for
from shared.annotation_keys import REBALANCED_FROM_ANNOTATION, REBALANCED_USAGE_ANNOTATION
from shared.annotations import Sample, decode, encode_metric
from tests.e2e.conftest import NODES
from tests.e2e.objects import meta_of, name_of, sent_as, spec_of, status_of
from tests.e2e.scrape import exported

pytestmark = pytest.mark.e2e

NAMESPACE = "rebalance"
SOURCE = "node-1"
LEASE = "loadsched-annotator-e2e"
WORKLOAD = f"{NAMESPACE}/ReplicaSet/hungry"
BASE = 0.15
HUNGRY_CORES = 1.2
CPUS = 8
METRIC = "cpu_usage_active"
POLICY: dict[str, Any] = {
    "apiVersion": "scheduler.policy.crane.io/v1alpha1",
    "kind": "DynamicSchedulerPolicy",
    "spec": {
        # the instantaneous usage (a 30 s irate): the test sees a move within a minute
        "syncPolicy": [
            {"name": METRIC, "period": "2s", "resource": "cpu", "window": "30s", "delay": "5s"}
        ],
        "predicate": [{"name": METRIC, "maxLimitPecent": 0.9}],
        "rebalance": {
            "enabled": True,
            "period": "2s",
            "consecutiveRounds": 3,
            "cooldown": "3m",
            "namespaces": {"include": [NAMESPACE]},
            "thresholds": [{"metric": METRIC, "high": 0.5, "low": 0.35}],
            "limits": {"perNode": 2, "perRound": 4, "perMinute": 60},
        },
    },
}


@pytest.fixture(scope="module")
def namespace(sandbox: Sandbox) -> Iterator[str]:
    sandbox.core.create_namespace(sent_as(k8s.V1Namespace, {"metadata": {"name": NAMESPACE}}))
    yield NAMESPACE
    sandbox.core.delete_namespace(NAMESPACE)


class World(threading.Thread):
    """Every second: each node's CPU is its base plus the cores of the hungry pods kwok runs
    on it, and each of those pods is served at 1.2 cores."""

    def __init__(self, sandbox: Sandbox, stack: MetricsStack) -> None:
        super().__init__(daemon=True)
        self.sandbox, self.stack = sandbox, stack
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(1.0):
            pods: dict[str, dict[str, dict[str, float]]] = {n.name: {} for n in NODES}
            for pod in running(self.sandbox):
                node = spec_of(pod).node_name
                if node in pods:
                    pods[node][f"{NAMESPACE}/{name_of(pod)}"] = {"cpu": HUNGRY_CORES, "mem": 2e8}
            self.stack.set_loads(
                {
                    node: {
                        "cpu": BASE + sum(p["cpu"] for p in on.values()) / CPUS,
                        "mem": 0.2,
                        "pods": on,
                    }
                    for node, on in pods.items()
                }
            )


@pytest.fixture(scope="module")
def world(sandbox: Sandbox, namespace: str) -> Iterator[MetricsStack]:
    stack = MetricsStack(sandbox, NODES, loads={n.name: {"cpu": BASE, "mem": 0.2} for n in NODES})
    stack.start()
    mover = World(sandbox, stack)
    mover.start()
    yield stack
    mover.stopped.set()
    mover.join()
    stack.stop()
    for node in NODES:
        sandbox.annotate_node(node.name, {METRIC: None, REBALANCED_FROM_ANNOTATION: None})


def running(sandbox: Sandbox) -> list[k8s.V1Pod]:
    found = sandbox.core.list_namespaced_pod(NAMESPACE, label_selector="app=hungry").items
    return [
        p for p in found if status_of(p).phase == "Running" and not meta_of(p).deletion_timestamp
    ]


def hungry() -> dict[str, Any]:
    labels = {"app": "hungry"}
    prefer = {"weight": 100}
    return {
        "metadata": {"name": "hungry"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels, "annotations": kwok.lifecycle(stops_after="500ms")},
                "spec": {
                    "schedulerName": "loadsched",
                    "affinity": {
                        "nodeAffinity": {
                            "preferredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    **prefer,
                                    "preference": {
                                        "matchExpressions": [
                                            {
                                                "key": "kubernetes.io/hostname",
                                                "operator": "In",
                                                "values": [SOURCE],
                                            }
                                        ]
                                    },
                                }
                            ]
                        },
                        "podAffinity": {
                            "preferredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    **prefer,
                                    "podAffinityTerm": {
                                        "labelSelector": {"matchLabels": labels},
                                        "topologyKey": "kubernetes.io/hostname",
                                    },
                                }
                            ]
                        },
                    },
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": "500m", "memory": "64Mi"}},
                        }
                    ],
                },
            },
        },
    }


def cordon(sandbox: Sandbox, nodes: list[str], cordoned: bool) -> None:
    for node in nodes:
        sandbox.core.patch_node(node, {"spec": {"unschedulable": cordoned}})


def evictions(url: str, result: str) -> float:
    return exported(url, "loadsched_annotator_rebalance_evictions_total", result=result)


def status(sandbox: Sandbox) -> dict[str, Any]:
    try:
        found = sandbox.core.read_namespaced_config_map("loadsched-rebalance", "default")
    except k8s.ApiException:
        return {}
    data = found.data or {}
    loaded: dict[str, Any] = json.loads(data.get("status.json", "{}"))
    return loaded


def marks(sandbox: Sandbox, key: str = REBALANCED_FROM_ANNOTATION) -> dict[str, Any]:
    raw = (meta_of(sandbox.core.read_node(SOURCE)).annotations or {}).get(key)
    found: dict[str, Any] = json.loads(raw) if raw else {}
    return found


def usage_of(sandbox: Sandbox, node: str) -> float | None:
    reading = decode((meta_of(sandbox.core.read_node(node)).annotations or {}).get(METRIC))
    return reading.value if isinstance(reading, Sample) else None


def events(sandbox: Sandbox, reason: str) -> list[k8s.CoreV1Event]:
    return [e for e in sandbox.core.list_namespaced_event(NAMESPACE).items if e.reason == reason]


def annotator(sandbox: Sandbox, prometheus: str, name: str, policy: Path) -> str:
    return sandbox.start_annotator(
        prometheus_url=prometheus,
        name=name,
        args=["--policy", str(policy), "--lease-name", LEASE, "--lease-namespace", "default"],
    )


def test_a_stacked_node_is_spread_by_the_fewest_evictions_and_never_refilled(
    sandbox: Sandbox,
    schedulers: dict[str, str],
    namespace: str,
    world: MetricsStack,
    tmp_path: Path,
) -> None:
    live = tmp_path / "policy.yaml"
    live.write_text(yaml.safe_dump(POLICY))
    dry = tmp_path / "dry-run.yaml"
    dry_policy = json.loads(json.dumps(POLICY))
    dry_policy["spec"]["rebalance"]["dryRun"] = True
    dry.write_text(yaml.safe_dump(dry_policy))
    apps = k8s.AppsV1Api(sandbox.api)
    others = [n.name for n in NODES if n.name != SOURCE]

    # three hungry pods stacked on node-1 (the others cordoned while they are placed)
    cordon(sandbox, others, True)
    try:
        apps.create_namespaced_replica_set(namespace, sent_as(k8s.V1ReplicaSet, hungry()))
        wait_for(lambda: len(running(sandbox)) == 3, timeout=60, what="3 hungry pods running")
    finally:
        cordon(sandbox, others, False)
    first = {name_of(p) for p in running(sandbox)}
    assert {spec_of(p).node_name for p in running(sandbox)} == {SOURCE}

    # stale: Prometheus gone, every node's last value older than its freshness (2 s + 5 m),
    # node-1's still far above its threshold: every node is counted stale, nothing is planned
    aged = datetime.now(UTC) - timedelta(minutes=6)
    for node in NODES:
        value = 0.9 if node.name == SOURCE else BASE
        sandbox.annotate_node(node.name, {METRIC: encode_metric(value, aged)})
    # nothing listens on port 9: no value is ever refreshed
    stale_url = annotator(sandbox, "http://127.0.0.1:9", "rebalancer-stale", dry)
    try:
        rounds = "loadsched_annotator_rebalance_rounds_total"
        enough = 2 * POLICY["spec"]["rebalance"]["consecutiveRounds"]
        wait_for(
            lambda: exported(stale_url, rounds) >= enough,
            timeout=60,
            what=f"{enough} rebalancer rounds on stale values",
            interval=1,
        )
        gauge = "loadsched_annotator_rebalance_nodes"
        assert exported(stale_url, gauge, state="stale") == len(NODES)
        assert exported(stale_url, gauge, state="over") == 0
        assert status(sandbox)["nodes"]["stale"] == len(NODES)
        assert status(sandbox)["plans"] == []
        assert exported(stale_url, "loadsched_annotator_rebalance_evictions_total") == 0
        assert not events(sandbox, "Rebalancing") and marks(sandbox) == {}
        assert usage_of(sandbox, SOURCE) == 0.9  # still there, never refreshed
    finally:
        sandbox.supervisor.stop_named("rebalancer-stale")

    # dry run: the plan is published and shown in events; nothing is evicted
    dry_url = annotator(sandbox, world.prometheus.url, "rebalancer-dry", dry)
    try:
        wait_for(
            lambda: any(p["moves"] for p in status(sandbox).get("plans", [])),
            timeout=90,
            what="a dry-run plan",
            interval=1,
        )
        (plan,) = status(sandbox)["plans"]
        assert plan["node"] == SOURCE and plan["metric"] == METRIC
        (move,) = plan["moves"]  # 0.8 cores over: one pod of 1.2 measured covers it
        assert move["measured"] and move["usage"] == pytest.approx(HUNGRY_CORES, rel=0.1)
        assert move["target"] != SOURCE
        assert status(sandbox)["dryRun"] is True
        assert evictions(dry_url, "dry-run") >= 1 and evictions(dry_url, "evicted") == 0
        assert events(sandbox, "Rebalancing")
        assert marks(sandbox) == {}
    finally:
        sandbox.supervisor.stop_named("rebalancer-dry")
    assert {name_of(p) for p in running(sandbox)} == first

    # a budget at its limit: the leader asks, is refused, counts it; nothing moves
    policy_api = k8s.PolicyV1Api(sandbox.api)
    budget = {
        "metadata": {"name": "hungry"},
        "spec": {"minAvailable": 3, "selector": {"matchLabels": {"app": "hungry"}}},
    }
    policy_api.create_namespaced_pod_disruption_budget(
        namespace, sent_as(k8s.V1PodDisruptionBudget, budget)
    )
    wait_for(
        lambda: (
            status_of(
                policy_api.read_namespaced_pod_disruption_budget("hungry", namespace)
            ).current_healthy
            == 3
        ),
        timeout=30,
        what="the budget to count the pods",
    )
    urls = {
        name: annotator(sandbox, world.prometheus.url, name, live)
        for name in ("rebalancer-a", "rebalancer-b")
    }
    try:
        wait_for(
            lambda: any(evictions(url, "blocked") >= 1 for url in urls.values()),
            timeout=90,
            what="an eviction the budget blocks",
            interval=1,
        )
        assert {name_of(p) for p in running(sandbox)} == first
        assert events(sandbox, "RebalanceBlocked")

        # no budget: one pod moves, by the leader alone, and not back
        policy_api.delete_namespaced_pod_disruption_budget("hungry", namespace)
        wait_for(
            lambda: sum(evictions(url, "evicted") for url in urls.values()) >= 1,
            timeout=90,
            what="an eviction",
            interval=1,
        )
        evicted = {name: evictions(url, "evicted") for name, url in urls.items()}
        assert sorted(evicted.values()) == [0, 1], evicted
        leader = max(evicted, key=lambda name: evicted[name])
        lease = k8s.CoordinationV1Api(sandbox.api).read_namespaced_lease(LEASE, "default")
        assert spec_of(lease).holder_identity == leader
        assert WORKLOAD in marks(sandbox)
        # with what the pod used (1.2 cores of its 500m): its replacement is asked for as much
        carried = marks(sandbox, REBALANCED_USAGE_ANNOTATION)[WORKLOAD]
        assert 1.0 < carried["cpu"] < 1.4, carried

        def replaced() -> bool:
            pods = running(sandbox)
            return len(pods) == 3 and len({name_of(p) for p in pods} - first) == 1

        wait_for(replaced, timeout=60, what="the replacement running", interval=0.5)
        (replacement,) = [p for p in running(sandbox) if name_of(p) not in first]
        assert spec_of(replacement).node_name != SOURCE
        # node-1 follows its pods: 0.15 + 2 x 1.2 / 8 = 0.45, under 0.5
        wait_for(
            lambda: (usage_of(sandbox, SOURCE) or 1.0) < 0.5,
            timeout=60,
            what="node-1 under its threshold",
            interval=1,
        )
        # held while its metric could still show the pod (30 s window + 5 s delay), then
        # under: nothing more moves, and the replacement stays where it is
        deadline = time.monotonic() + 50
        while time.monotonic() < deadline:
            time.sleep(2)
            assert sum(evictions(url, "evicted") for url in urls.values()) == 1
        assert status(sandbox)["nodes"]["over"] == 0
        (event,) = [e for e in events(sandbox, "Rebalanced") if e.involved_object.kind == "Pod"]
        message = event.message or ""
        assert METRIC in message and "(measured)" in message
        assert event.reporting_instance == leader
        assert (
            spec_of(replacement).node_name
            == spec_of(sandbox.core.read_namespaced_pod(name_of(replacement), namespace)).node_name
        )
    finally:
        for name in urls:
            sandbox.supervisor.stop_named(name)
        apps.delete_namespaced_replica_set("hungry", namespace)
