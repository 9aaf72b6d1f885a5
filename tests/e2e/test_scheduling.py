"""The stock kube-scheduler with loadsched's extender in front of it, on a real control plane."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable

import pytest

from sandbox.cluster import Sandbox
from sandbox.processes import wait_for
from sandbox.specs import ExtenderSpec, pod_body
from tests.e2e.conftest import LOADS, NODES, OVERLOADED
from tests.e2e.objects import status_of

pytestmark = pytest.mark.e2e

_names = itertools.count()


def schedule(
    sandbox: Sandbox, scheduler: str, count: int = 1, *, timeout: float = 60
) -> dict[str, str]:
    batch = f"b{next(_names)}"
    sandbox.create_pods(
        pod_body(f"{batch}-{i}", scheduler_name=scheduler, labels={"batch": batch})
        for i in range(count)
    )
    try:
        return sandbox.wait_bound(f"batch={batch}", count, timeout=timeout)
    finally:
        sandbox.delete_pods(f"batch={batch}")


def test_overloaded_nodes_are_avoided_and_the_least_loaded_wins(
    sandbox: Sandbox, schedulers: dict[str, str], set_loads: Callable[[dict[str, float]], None]
) -> None:
    set_loads(LOADS)
    time.sleep(1)  # the extender's node watch sees the annotations
    placed = schedule(sandbox, "loadsched", 16)
    assert not set(placed.values()) & OVERLOADED, placed
    single = schedule(sandbox, "loadsched")
    assert list(single.values()) == ["node-5"]
    # the plain scheduler, on the same load, does not look at it
    plain = schedule(sandbox, "default-scheduler", 16)
    assert set(plain.values()) & OVERLOADED


def test_both_node_cache_modes_place_alike(
    sandbox: Sandbox, schedulers: dict[str, str], set_loads: Callable[[dict[str, float]], None]
) -> None:
    rotations = [
        dict(zip(LOADS, list(LOADS.values())[i:] + list(LOADS.values())[:i], strict=True))
        for i in range(0, 8, 3)
    ]
    for loads in rotations:
        set_loads(loads)
        time.sleep(1)
        best = min((usage, name) for name, usage in loads.items())[1]
        names_only = schedule(sandbox, "loadsched")
        full = schedule(sandbox, "loadsched-full")
        assert list(names_only.values()) == list(full.values()) == [best], loads


def test_extender_down(
    sandbox: Sandbox,
    schedulers: dict[str, str],
    extender_port: int,
    set_loads: Callable[[dict[str, float]], None],
) -> None:
    set_loads(LOADS)
    sandbox.supervisor.stop_named("extender")
    try:
        # ignorable: true -> kube-scheduler skips the extender and schedules anyway
        placed = schedule(sandbox, "loadsched", 4)
        assert len(placed) == 4
        # ignorable: false -> the pod waits while the extender is down
        sandbox.create_pods(
            [pod_body("strict-0", scheduler_name="loadsched-strict", labels={"batch": "strict"})]
        )
        time.sleep(8)
        assert sandbox.placements("batch=strict") == {"strict-0": None}
    finally:
        sandbox.start_extender(port=extender_port)
    # ... and is scheduled once it is back, on a node that is not overloaded
    placed = sandbox.wait_bound("batch=strict", 1, timeout=120)
    assert placed["strict-0"] not in OVERLOADED
    sandbox.delete_pods("batch=strict")


def test_nodes_the_extender_cannot_fit(
    sandbox: Sandbox, schedulers: dict[str, str], set_loads: Callable[[dict[str, float]], None]
) -> None:
    """Every node overloaded: the pod stays Pending, with loadsched's reasons in its event."""
    set_loads({node.name: 0.95 for node in NODES})
    time.sleep(1)
    sandbox.create_pods(
        [pod_body("nowhere-0", scheduler_name="loadsched", labels={"batch": "nowhere"})]
    )
    try:
        deadline = time.monotonic() + 30
        message = ""
        while time.monotonic() < deadline and "is above 0.65" not in message:
            events = sandbox.core.list_namespaced_event(
                "default", field_selector="involvedObject.name=nowhere-0"
            ).items
            message = " ".join(e.message or "" for e in events if e.reason == "FailedScheduling")
            time.sleep(0.5)
        assert "Load[cpu_usage_avg_5m]=0.95000 of node[node-" in message
        assert sandbox.placements("batch=nowhere") == {"nowhere-0": None}
    finally:
        sandbox.delete_pods("batch=nowhere")


def test_per_reason_messages_count_the_nodes(
    sandbox: Sandbox, schedulers: dict[str, str], set_loads: Callable[[dict[str, float]], None]
) -> None:
    """Every node overloaded, the same pod through two extenders: with crane's per-node
    messages kube-scheduler's PodScheduled condition names every node; with ``per-reason`` it
    counts them under one reason."""
    url = sandbox.start_extender(
        name="extender-per-reason", args=["--filter-messages", "per-reason"]
    )

    def unschedulable(name: str) -> str:
        pod = sandbox.core.read_namespaced_pod(name, "default")
        for condition in status_of(pod).conditions or ():
            if condition.type == "PodScheduled" and "nodes are available" in (
                condition.message or ""
            ):
                return str(condition.message)
        return ""

    try:
        sandbox.start_scheduler(
            "per-reason", scheduler_name="per-reason", extender=ExtenderSpec(url)
        )
        set_loads({node.name: 0.95 for node in NODES})
        time.sleep(1)
        sandbox.create_pods(
            pod_body(f"nowhere-{scheduler}", scheduler_name=scheduler, labels={"batch": "nowhere"})
            for scheduler in ("loadsched", "per-reason")
        )
        messages: dict[str, str] = {}

        def both() -> bool:
            for scheduler in ("loadsched", "per-reason"):
                messages[scheduler] = unschedulable(f"nowhere-{scheduler}")
            return all(messages.values())

        wait_for(both, timeout=30, what="both pods' PodScheduled condition")
        each, counted = messages["loadsched"], messages["per-reason"]
        for node in NODES:
            assert f"1 Load[cpu_usage_avg_5m]=0.95000 of node[{node.name}] is above 0.65" in each
            assert node.name not in counted
        assert f"{len(NODES)} node(s) with Load[cpu_usage_avg_5m] above 0.65" in counted
        assert len(counted) < len(each)
    finally:
        sandbox.delete_pods("batch=nowhere")
        if "per-reason" in sandbox.schedulers:
            sandbox.stop_scheduler("per-reason")
        sandbox.supervisor.stop_named("extender-per-reason")
