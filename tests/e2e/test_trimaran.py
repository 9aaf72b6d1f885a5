"""The real Trimaran beside the sandbox (bench/trimaran.py): scheduler-plugins' own
kube-scheduler reads the series the quality bench records for its load-watcher, and places
pods by them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench import trimaran
from sandbox.cluster import Sandbox
from sandbox.metrics_stack import MetricsStack
from sandbox.processes import wait_for
from sandbox.specs import pod_body
from tests.e2e.conftest import NODES

pytestmark = pytest.mark.e2e

SCHEDULER = "trimaran-tlp"
LABEL = "app=trimaran"


@pytest.fixture(scope="module")
def stack(sandbox: Sandbox) -> Iterator[MetricsStack]:
    """Every node quiet (10 % CPU) but node-3 near TargetLoadPacking's 40 % target, node-5
    far above it."""
    loads = {n.name: {"cpu": 0.10, "mem": 0.2} for n in NODES}
    loads["node-3"]["cpu"], loads["node-5"]["cpu"] = 0.30, 0.85
    stack = MetricsStack(sandbox, NODES, loads=loads)
    stack.prometheus.extra_groups = [trimaran.rule_group(stack, NODES, interval="5s")]
    stack.start()
    yield stack
    stack.stop()


def test_target_load_packing_packs_pods_onto_the_node_nearest_its_target(
    sandbox: Sandbox, stack: MetricsStack
) -> None:
    """TargetLoadPacking scores a node by its CPU plus the pod against the 40 % target: the
    node at 30 % scores highest, the quiet ones less, the one at 85 % least. Without the
    series per Node name every node would score the minimum and the pods would land anywhere;
    the allocation scores it turns off would spread them."""
    names = {n.name for n in NODES}

    def recorded() -> bool:
        cpu = stack.prometheus.query(trimaran.CPU_SERIES)
        return set(cpu) == names and abs(cpu["node-3"] - 0.30) < 0.02

    wait_for(recorded, timeout=90, what="load-watcher's series per Node name", interval=1)
    trimaran.start(
        sandbox,
        SCHEDULER,
        trimaran.TARGET_LOAD_PACKING,
        scheduler_name=SCHEDULER,
        stack=stack,
        nodes=NODES,
        say=print,
    )
    try:
        sandbox.create_pods(
            pod_body(f"tlp-{i}", scheduler_name=SCHEDULER, labels={"app": "trimaran"})
            for i in range(4)
        )
        placed = sandbox.wait_bound(LABEL, 4, timeout=60)
        assert set(placed.values()) == {"node-3"}, placed
    finally:
        sandbox.delete_pods(LABEL)
        sandbox.stop_scheduler(SCHEDULER)
