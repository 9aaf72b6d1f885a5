"""Synthetic exporter → Prometheus → recording rules: the values the annotator reads."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sandbox.cluster import Sandbox
from sandbox.metrics_stack import MetricsStack
from sandbox.processes import wait_for
from sandbox.prometheus import SANDBOX_INTERVAL
from tests.e2e.conftest import NODES

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack(sandbox: Sandbox) -> Iterator[MetricsStack]:
    stack = MetricsStack(sandbox, NODES).start()
    yield stack
    stack.stop()


def test_recording_rules_follow_the_exporter(stack: MetricsStack) -> None:
    stack.set_loads({"node-1": {"cpu": 0.8, "mem": 0.4}, "node-2": {"cpu": 0.2, "mem": 0.9}})
    n1, n2 = stack.instance(NODES[0]), stack.instance(NODES[1])
    prometheus = stack.prometheus

    def settled() -> bool:
        cpu = prometheus.query("cpu_usage_active")
        mem = prometheus.query("mem_usage_active")
        return (
            abs(cpu.get(n1, -1) - 80) < 2
            and abs(cpu.get(n2, -1) - 20) < 2
            and abs(mem.get(n1, -1) - 40) < 0.5
            and abs(mem.get(n2, -1) - 90) < 0.5
        )

    wait_for(settled, timeout=90, what="recording rules to reflect the exporter's load", interval=2)
    # Trimaran's load-watcher reads fractions (the chart's load-watcher-rules.yaml)
    wait_for(
        lambda: (
            abs(prometheus.query("instance:node_cpu:ratio").get(n1, -1) - 0.8) < 0.02
            and abs(prometheus.query("instance:node_memory_utilisation:ratio").get(n2, -1) - 0.9)
            < 0.005
        ),
        timeout=30,
        what="load-watcher's series",
    )
    everyone = {stack.instance(n) for n in NODES}
    for rule in (
        "cpu_usage_avg_5m",
        "mem_usage_avg_5m",
        "cpu_usage_max_avg_1h",
        "mem_usage_max_avg_1d",
    ):

        def evaluated(rule: str = rule) -> bool:
            return set(prometheus.query(rule)) == everyone

        wait_for(
            evaluated,
            timeout=30,
            what=f"{rule} for every node",
        )


def test_rules_are_evaluated_at_a_new_interval_after_a_reload(stack: MetricsStack) -> None:
    prometheus = stack.prometheus
    recorded = set(prometheus.query("cpu_usage_avg_5m"))
    assert recorded == {stack.instance(n) for n in NODES}
    try:
        # the annotator bench slows the sandbox's evaluation once every node is covered
        prometheus.evaluate_every("1m")
        assert set(prometheus.rule_intervals().values()) == {60.0}
        assert set(prometheus.query("cpu_usage_avg_5m")) == recorded  # kept across the reload
        prometheus.evaluate_every(None)  # the chart's own intervals
        assert prometheus.rule_intervals() == {
            "cpu_mem_usage_active": 30.0,
            "cpu-usage-5m": 300.0,
            "cpu-usage-1m": 60.0,
            "mem-usage-5m": 300.0,
            "mem-usage-1m": 60.0,
            "load-watcher": 30.0,
        }
    finally:
        prometheus.evaluate_every(SANDBOX_INTERVAL)
    assert set(prometheus.rule_intervals().values()) == {5.0}
