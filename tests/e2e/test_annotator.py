"""The annotator on the real control plane, with real Prometheus scraping the synthetic
exporter: values, leader election, Prometheus outages, hot values."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from kubernetes import client as k8s

from sandbox.cluster import Sandbox
from sandbox.metrics_stack import MetricsStack
from sandbox.processes import wait_for
from sandbox.specs import pod_body
from shared.annotations import Sample, decode
from shared.load_model import LoadRules, NodeLoad, evaluate
from shared.policy import load_policy
from tests.e2e.conftest import NODES, RULES
from tests.e2e.objects import meta_of, spec_of
from tests.e2e.scrape import exported

pytestmark = pytest.mark.e2e

POLICY = Path(__file__).with_name("policy-fast.yaml")
FAST_RULES = LoadRules.from_policy(load_policy(POLICY))
# node-1 is by far the least loaded; node-7 and node-8 are above the 0.65 cpu limit.
CPU = [0.05, 0.40, 0.45, 0.50, 0.55, 0.60, 0.75, 0.85]
LOADS = {
    n.name: {"cpu": cpu, "mem": 0.05 if n.name == "node-1" else 0.4}
    for n, cpu in zip(NODES, CPU, strict=True)
}
OVERLOADED = {"node-7", "node-8"}
LEASE = "loadsched-annotator-e2e"


@pytest.fixture(scope="module")
def stack(sandbox: Sandbox) -> Iterator[MetricsStack]:
    stack = MetricsStack(sandbox, NODES, loads=LOADS).start()
    yield stack
    stack.stop()


URLS: dict[str, str] = {}


@pytest.fixture(scope="module")
def annotators(sandbox: Sandbox, stack: MetricsStack) -> Iterator[list[str]]:
    names = ["annotator-a", "annotator-b"]
    for name in names:
        URLS[name] = sandbox.start_annotator(
            prometheus_url=stack.prometheus.url,
            name=name,
            args=["--policy", str(POLICY), "--lease-name", LEASE, "--lease-namespace", "default"],
        )
    yield names
    for name in names:
        sandbox.supervisor.stop_named(name)
    for node in NODES:
        sandbox.annotate_node(node.name, dict.fromkeys(RULES.keys))


def node_annotations(sandbox: Sandbox, node: str) -> dict[str, str]:
    return meta_of(sandbox.core.read_node(node)).annotations or {}


def value(sandbox: Sandbox, node: str, key: str) -> float | None:
    reading = decode(node_annotations(sandbox, node).get(key))
    return reading.value if isinstance(reading, Sample) else None


def patches_written(url: str) -> float:
    return exported(url, "loadsched_annotator_node_patches_total", kind="annotations")


def holder(sandbox: Sandbox) -> str | None:
    lease = k8s.CoordinationV1Api(sandbox.api).read_namespaced_lease(LEASE, "default")
    return spec_of(lease).holder_identity


def test_annotations_follow_the_exporter(sandbox: Sandbox, annotators: list[str]) -> None:
    def written() -> bool:
        return all(
            abs((value(sandbox, n.name, "cpu_usage_avg_5m") or -1) - LOADS[n.name]["cpu"]) < 0.03
            and abs((value(sandbox, n.name, "mem_usage_avg_5m") or -1) - LOADS[n.name]["mem"])
            < 0.01
            for n in NODES
        )

    wait_for(written, timeout=90, what="annotations with the exporter's load", interval=1)
    metric_keys = [k for k in FAST_RULES.keys if k != "node_hot_value"]
    wait_for(
        lambda: all(set(metric_keys) <= set(node_annotations(sandbox, n.name)) for n in NODES),
        timeout=60,
        what="every metric on every node",
        interval=1,
    )
    for node in NODES:
        found = node_annotations(sandbox, node.name)
        for key in FAST_RULES.keys:
            if key != "node_hot_value":
                text = found[key]
                value_text, stamp = text.split(",")
                assert len(value_text.split(".")[1]) == 5, text
                assert datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(
                    tzinfo=UTC
                ) > datetime.now(UTC) - timedelta(minutes=1)


def test_a_burst_spreads_because_the_hot_value_rises(
    sandbox: Sandbox, annotators: list[str], schedulers: dict[str, str]
) -> None:
    """Without the hot value every pod would go to node-1 (score 10 against 6 and less)."""
    bodies = [
        pod_body(f"spread-{i}", scheduler_name="loadsched", labels={"batch": "spread"})
        for i in range(30)
    ]
    try:
        for body in bodies:  # a burst at about 3 pods/s, much faster than any metric period
            sandbox.create_pods([body])
            time.sleep(0.3)
        placed = sandbox.wait_bound("batch=spread", 30)
        per_node = {node: list(placed.values()).count(node) for node in set(placed.values())}
        assert not set(per_node) & OVERLOADED, per_node
        assert len(per_node) >= 3, per_node
        assert per_node.get("node-1", 0) < 20, per_node
    finally:
        sandbox.delete_pods("batch=spread")


def test_the_whole_loop_keeps_pods_off_loaded_nodes(
    sandbox: Sandbox, annotators: list[str], schedulers: dict[str, str]
) -> None:
    """exporter load → Prometheus → annotator → annotations → extender → kube-scheduler."""
    bodies = [
        pod_body(f"loop-{i}", scheduler_name=name, labels={"batch": "loop"})
        for i, name in enumerate(["loadsched", "loadsched-full"] * 6)
    ]
    sandbox.create_pods(bodies)
    try:
        placed = sandbox.wait_bound("batch=loop", len(bodies))
        assert not set(placed.values()) & OVERLOADED, placed
    finally:
        sandbox.delete_pods("batch=loop")


def test_a_burst_of_bindings_raises_the_hot_value(sandbox: Sandbox, annotators: list[str]) -> None:
    target = "node-8"  # overloaded: no scheduled pod lands there, so only these count
    bodies = [
        pod_body(f"burst-{i}", scheduler_name="none", labels={"batch": "burst"}) for i in range(10)
    ]
    for body in bodies:
        body["spec"]["nodeName"] = target  # created already bound
    started = time.monotonic()
    sandbox.create_pods(bodies)
    try:
        # 10 bindings: floor(10/5) for the 5m window + floor(10/2) for the 1m window
        wait_for(
            lambda: value(sandbox, target, "node_hot_value") == 7,
            timeout=20,
            what="hot value 7 on node-8",
            interval=0.5,
        )
        assert time.monotonic() - started < 10
    finally:
        sandbox.delete_pods("batch=burst")


def test_one_writer_and_failover_within_20s(sandbox: Sandbox, annotators: list[str]) -> None:
    wait_for(lambda: holder(sandbox) in annotators, timeout=30, what="a lease holder")
    leader = holder(sandbox)
    follower = next(n for n in annotators if n != leader)
    # only the leader writes
    assert patches_written(URLS[str(leader)]) > 0
    assert patches_written(URLS[follower]) == 0
    assert "standby" in urllib.request.urlopen(f"{URLS[follower]}/readyz").read().decode()
    sandbox.supervisor.kill_named(str(leader))  # a crash: the lease is not released
    killed_at = time.monotonic()
    wait_for(
        lambda: holder(sandbox) == follower,
        timeout=25,
        what="the follower to take the lease",
        interval=0.5,
    )
    assert time.monotonic() - killed_at < 20
    before = node_annotations(sandbox, "node-1")["cpu_usage_avg_5m"]
    wait_for(
        lambda: node_annotations(sandbox, "node-1")["cpu_usage_avg_5m"] != before,
        timeout=20,
        what="the new leader to write",
    )
    annotators.remove(str(leader))


def test_prometheus_down_leaves_old_values_that_age_out(
    sandbox: Sandbox, stack: MetricsStack, annotators: list[str]
) -> None:
    stack.prometheus.stop()
    try:
        time.sleep(2)
        before = {n.name: node_annotations(sandbox, n.name) for n in NODES}
        time.sleep(12)  # more than two 5 s periods
        after = {n.name: node_annotations(sandbox, n.name) for n in NODES}
        metric_keys = [k for k in FAST_RULES.keys if k != "node_hot_value"]
        for node in NODES:
            assert {k: after[node.name][k] for k in metric_keys} == {
                k: before[node.name][k] for k in metric_keys
            }
        # the untouched values go stale after period + 5m: the filter then skips them
        sample = decode(after["node-1"]["cpu_usage_avg_5m"])
        assert isinstance(sample, Sample)
        load = NodeLoad.from_annotations("node-1", after["node-1"], FAST_RULES)
        fresh = evaluate(load, FAST_RULES, sample.timestamp + timedelta(minutes=5))
        stale = evaluate(load, FAST_RULES, sample.timestamp + timedelta(minutes=5, seconds=5))
        assert ("cpu_usage_avg_5m", "stale") not in fresh.unknown
        assert ("cpu_usage_avg_5m", "stale") in stale.unknown
    finally:
        stack.prometheus.start(stack.targets())
