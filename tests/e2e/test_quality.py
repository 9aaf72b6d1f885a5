"""The short version of bench/quality.py: one burst of 30 pods, before any metric can move,
through crane's hot value alone and through loadsched's estimation, on the real control plane
with real Prometheus, annotator and extender.

Node load is still (no pod uses anything: the burst is placed long before a pod would start),
so only what each strategy infers about just-placed pods tells the nodes apart. node-1 is the
least loaded by far. With the hot value alone the burst piles onto node-1 until the hot value
the annotator writes catches up; with estimation no node receives more pods than its headroom
under the 70 % limit allows (each pod's estimate is 85 % of its 500m request on 8 cores): once
no node has room for a pod, each node under the limit on its own takes one more
(``whenNoNodeHasRoom: place``), and once every node is over it the pods wait.

kube-scheduler binds in the background and decides the next pods meanwhile, so a node may take
as many pods more as were decided before one binding reached the extender: the extender counts
them (``loadsched_extender_filters_before_binding``), and each bound allows the most of the
burst.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import NamedTuple

import httpx
import pytest

from bench.quality_strategies import BY_KEY, CPU_LIMIT, RULES, Strategy
from extender.scheduling.metrics import OVERTAKEN_BUCKETS
from sandbox.cluster import Sandbox
from sandbox.metrics_stack import MetricsStack
from sandbox.processes import wait_for
from sandbox.specs import ExtenderSpec, pod_body
from shared.annotations import Sample, decode
from tests.e2e.conftest import NODES, chart_sandbox
from tests.e2e.objects import meta_of, spec_of, status_of
from tests.e2e.scrape import exported_in

pytestmark = pytest.mark.e2e

QUIET = "node-1"
CPU = {n.name: 0.60 for n in NODES} | {QUIET: 0.35}
MEMORY = {n.name: 0.50 for n in NODES} | {QUIET: 0.10}
BURST, REQUEST, CORES = 30, 0.5, 8
ESTIMATE = 0.85 * REQUEST / CORES


class Burst(NamedTuple):
    placed: dict[str, int]
    """Pods per node once every pod is bound or refused."""
    in_flight: float
    """The most pods decided before one binding reached the extender (with the bind verb it
    counts a pod as its binding reaches it): how far past its room a node may go."""


def room(node: str) -> int:
    """Pods a node has room for: each is admitted while the node's value with the pods already
    there and this one is at most the limit."""
    return math.floor((CPU_LIMIT - CPU[node]) / ESTIMATE + 1e-9)


def headroom(node: str) -> int:
    """Pods a node takes with ``whenNoNodeHasRoom: place``: once no node has room, one more
    while the node's value with the pods already there is at most the limit."""
    return room(node) + 1


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    """A control plane of this module's own: the room each node has depends on every pod bound
    to it lately, and the shared one's other modules leave pods their controllers may recreate
    and bind at any time."""
    with chart_sandbox() as box:
        yield box


@pytest.fixture(scope="module")
def stack(sandbox: Sandbox) -> Iterator[MetricsStack]:
    loads = {n.name: {"cpu": CPU[n.name], "mem": MEMORY[n.name]} for n in NODES}
    stack = MetricsStack(sandbox, NODES, loads=loads)
    stack.prometheus.rules = RULES
    stack.start()
    wait_for(
        lambda: len(stack.prometheus.query("cpu_usage_avg_1m")) == len(NODES),
        timeout=60,
        what="1-minute averages for every node",
        interval=1,
    )
    yield stack
    stack.stop()


def annotated_since(sandbox: Sandbox, since: datetime) -> bool:
    for node in sandbox.core.list_node().items:
        reading = decode((meta_of(node).annotations or {}).get("cpu_usage_avg_1m"))
        if not (isinstance(reading, Sample) and reading.timestamp >= since):
            return False
    return True


def in_flight(extender: str) -> float:
    """The least bucket of ``loadsched_extender_filters_before_binding`` that holds every
    binding (infinite past the last)."""
    name = "loadsched_extender_filters_before_binding"
    response = httpx.get(f"{extender}/metrics", timeout=10)
    response.raise_for_status()
    bindings = exported_in(response.text, f"{name}_count")
    for bound in OVERTAKEN_BUCKETS:
        if exported_in(response.text, f"{name}_bucket", le=str(float(bound))) >= bindings:
            return bound
    return math.inf


def burst(
    sandbox: Sandbox,
    stack: MetricsStack,
    tmp_path_factory: pytest.TempPathFactory,
    strategy: Strategy,
) -> Burst:
    """Place one burst with ``strategy``."""
    reason = strategy.cannot_run()
    if reason is not None:
        pytest.skip(f"{strategy.key}: {reason}")
    extender_policy, annotator_policy = strategy.write(tmp_path_factory.mktemp(strategy.key))
    for node in NODES:
        sandbox.annotate_node(node.name, {"node_hot_value": None})
    since = datetime.now(UTC).replace(microsecond=0)
    sandbox.start_annotator(
        prometheus_url=stack.prometheus.url,
        name=f"annotator-{strategy.key}",
        args=["--policy", str(annotator_policy), "--no-leader-elect"],
    )
    scheduler = f"quality-{strategy.key}"
    try:
        wait_for(lambda: annotated_since(sandbox, since), timeout=30, what="fresh annotations")
        url = sandbox.start_extender(
            name=f"extender-{strategy.key}", args=["--policy", str(extender_policy)]
        )
        sandbox.start_scheduler(
            scheduler, scheduler_name=scheduler, extender=ExtenderSpec(url, bind=True)
        )
        sandbox.create_pods(
            pod_body(
                f"{strategy.key}-{i}",
                scheduler_name=scheduler,
                cpu=f"{int(REQUEST * 1000)}m",
                labels={"burst": strategy.key},
            )
            for i in range(BURST)
        )

        def settled() -> bool:
            pods = sandbox.core.list_namespaced_pod(
                "default", label_selector=f"burst={strategy.key}"
            ).items
            refused = [
                p
                for p in pods
                if not spec_of(p).node_name
                and any(
                    c.type == "PodScheduled" and c.reason == "Unschedulable"
                    for c in status_of(p).conditions or ()
                )
            ]
            return len(pods) == BURST and all(
                spec_of(p).node_name for p in pods if p not in refused
            )

        wait_for(settled, timeout=60, what=f"{strategy.key}: every pod bound or refused")
        placed = sandbox.placements(f"burst={strategy.key}")
        overtaken = in_flight(url)
    finally:
        if scheduler in sandbox.schedulers:
            sandbox.stop_scheduler(scheduler)
        for name in (f"extender-{strategy.key}", f"annotator-{strategy.key}"):
            if sandbox.supervisor.running(name):
                sandbox.supervisor.stop_named(name)
        sandbox.delete_pods(f"burst={strategy.key}")
    counts = dict.fromkeys((n.name for n in NODES), 0)
    for placed_on in placed.values():
        if placed_on:
            counts[placed_on] += 1
    return Burst(counts, overtaken)


@pytest.fixture(scope="module")
def bursts(
    sandbox: Sandbox, stack: MetricsStack, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], Burst]:
    """One burst through a strategy, placed once per module."""
    placed: dict[str, Burst] = {}

    def of(key: str) -> Burst:
        if key not in placed:
            placed[key] = burst(sandbox, stack, tmp_path_factory, BY_KEY[key])
        return placed[key]

    return of


def test_estimation_spreads_a_burst_that_the_hot_value_piles_onto_one_node(
    bursts: Callable[[str], Burst],
) -> None:
    estimation, hot_only = bursts("estimation"), bursts("hot-only").placed
    allowed = {node: headroom(node) + estimation.in_flight for node in estimation.placed}
    over = {node: n for node, n in estimation.placed.items() if n > allowed[node]}
    assert not over, f"estimation placed more than the headroom {allowed}: {estimation}"
    assert sum(hot_only.values()) == BURST, f"hot value only: {hot_only}"
    assert hot_only[QUIET] > allowed[QUIET], (
        f"hot value only should pile onto {QUIET} beyond its headroom: {hot_only}; "
        f"with estimation: {estimation}"
    )


def test_when_no_node_has_room_place_fills_each_node_one_past_it_and_wait_stops_at_it(
    bursts: Callable[[str], Burst],
) -> None:
    """30 pods, room for 13 (6 on the quiet node, 1 on each other): with ``place`` every node
    then takes one more while it is under the limit on its own, and the rest wait; with
    ``wait`` (Koordinator) each node stops at its room and 17 wait."""
    placing, waiting = bursts("estimation"), bursts("estimation-wait")
    placed, waited = placing.placed, waiting.placed
    for node in placed:
        assert headroom(node) <= placed[node] <= headroom(node) + placing.in_flight, (
            node,
            placing,
        )
        assert room(node) <= waited[node] <= room(node) + waiting.in_flight, (node, waiting)
    assert sum(placed.values()) >= sum(map(headroom, placed)) > sum(map(room, placed))
