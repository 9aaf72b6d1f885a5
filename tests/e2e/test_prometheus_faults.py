"""The annotator against the real Prometheus behind a fault-injecting proxy
(:mod:`sandbox.prometheus_faults`), on the real API server: for every fault, nothing fake is
written while it lasts (the annotations stay as they were, so they age out per
``staleData``; ``NaN`` and negative values are written ``0.00000``, as the annotation
contract says), and once Prometheus is healthy again every node has fresh values from the
first round that starts after it (within one period: counted in the annotator's rounds, so
the figure is no bound in seconds). ``bench/prometheus_faults.py`` prints the same as a table.

Two metrics on a 1 s period, the query timeout 1 s (the slow fault answers after 2.5 s).
"While faulty" is counted in the annotator's own rounds (``rounds_total``), not in seconds:
two rounds after the switch every round started under the fault, and the next two rounds
are the ones that must write nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from sandbox.cluster import Sandbox
from sandbox.metrics_stack import MetricsStack
from sandbox.processes import wait_for
from sandbox.prometheus_faults import Fault, PrometheusFaults
from sandbox.specs import NodeSpec
from shared.annotations import Sample, decode
from shared.load_model import LoadRules, NodeLoad, evaluate
from shared.policy import parse_policy
from tests.e2e.conftest import NODES
from tests.e2e.objects import meta_of
from tests.e2e.scrape import exported

pytestmark = pytest.mark.e2e

PERIOD = 1.0
QUERY_TIMEOUT = 1.0
SLOW_SECONDS = 2.5
KEYS = ("cpu_usage_avg_5m", "mem_usage_avg_5m")
POLICY = {
    "apiVersion": "scheduler.policy.crane.io/v1alpha1",
    "kind": "DynamicSchedulerPolicy",
    "spec": {
        "syncPolicy": [{"name": key, "period": f"{PERIOD:g}s"} for key in KEYS],
        "predicate": [{"name": key, "maxLimitPecent": 0.65} for key in KEYS],
        "priority": [{"name": key, "weight": 0.5} for key in KEYS],
        "hotValue": [{"timeRange": "5m", "count": 5}],
    },
}
RULES = LoadRules.from_policy(parse_policy(POLICY, source="test"))
WRITES_ZERO = {Fault.NAN, Fault.NEGATIVE}
"""Faults whose values the contract writes, as ``0.00000``; every other writes nothing."""
FAULTS = [f for f in Fault if f is not Fault.HEALTHY]

Values = dict[str, dict[str, str | None]]


def metric_values(sandbox: Sandbox, nodes: list[NodeSpec]) -> Values:
    out: Values = {}
    for node in nodes:
        found = meta_of(sandbox.core.read_node(node.name)).annotations or {}
        out[node.name] = {key: found.get(key) for key in KEYS}
    return out


def rounds(url: str) -> float:
    """The annotator's metric rounds so far (each ends after its patches are written)."""
    return exported(url, "loadsched_annotator_rounds_total", kind="metrics")


def wait_rounds(url: str, count: int) -> None:
    start = rounds(url)
    wait_for(
        lambda: rounds(url) >= start + count,
        timeout=count * (PERIOD + SLOW_SECONDS) + 10,
        what=f"{count} annotator rounds",
        interval=0.1,
    )


def fresh_since(values: Values, moment: datetime) -> bool:
    """Every value a real usage (above 0) measured at or after ``moment`` (to the second)."""
    floor = moment.replace(microsecond=0)
    readings = [decode(text) for per_node in values.values() for text in per_node.values()]
    return all(isinstance(r, Sample) and r.value > 0 and r.timestamp >= floor for r in readings)


@dataclass
class Outcome:
    fault: Fault
    queries: int
    """Instant queries the proxy answered under the fault (0 for ``down``: refused)."""
    changed: int
    """Annotation values that changed over two rounds under the fault."""
    zeros: int
    """Values ``0.00000`` after those rounds (the contract's NaN and negative)."""
    values: int
    stale_later: bool
    """The values left in place are stale one period + 5 minutes after they were measured."""
    recovery: float | None
    """Seconds from healthy to fresh real values on every node; ``None``: not all fresh by
    the end of the first round that started after Prometheus was healthy (the second round
    to end: the first may have been under way, under the fault)."""

    @property
    def nothing_fake(self) -> bool:
        if self.fault in WRITES_ZERO:
            return self.zeros == self.values
        return self.changed == 0 and self.zeros == 0 and self.stale_later


def exercise(
    sandbox: Sandbox, nodes: list[NodeSpec], annotator: str, proxy: PrometheusFaults, fault: Fault
) -> Outcome:
    """``fault`` for four rounds, then healthy until every node is fresh again."""
    queries = proxy.answered[fault]
    proxy.set(fault)
    wait_rounds(annotator, 2)
    during = metric_values(sandbox, nodes)
    wait_rounds(annotator, 2)
    after = metric_values(sandbox, nodes)
    texts = [t for per_node in after.values() for t in per_node.values()]
    changed = sum(during[n][k] != after[n][k] for n in after for k in KEYS)
    zeros = sum(1 for t in texts if t is not None and t.startswith("0.00000,"))
    stale_later = _stale_later(after)
    proxy.set(Fault.HEALTHY)
    healed = datetime.now(UTC)
    started = time.monotonic()
    ended = rounds(annotator)
    fresh_at: list[float] = []

    def second_round_ended() -> bool:
        if not fresh_at and fresh_since(metric_values(sandbox, nodes), healed):
            fresh_at.append(time.monotonic() - started)
        return rounds(annotator) >= ended + 2

    wait_for(
        second_round_ended,
        timeout=2 * (PERIOD + SLOW_SECONDS) + 10,
        what=f"two rounds after {fault}",
        interval=0.05,
    )
    if not fresh_at and fresh_since(metric_values(sandbox, nodes), healed):
        fresh_at.append(time.monotonic() - started)
    recovery = fresh_at[0] if fresh_at else None
    return Outcome(
        fault,
        proxy.answered[fault] - queries,
        changed,
        zeros,
        len(texts),
        stale_later,
        recovery,
    )


def _stale_later(values: Values) -> bool:
    """Each node's values, read one period + 5 minutes after they were measured, are
    unknown (stale) to the load model: what stays in place ages out."""
    for name, per_node in values.items():
        written = {key: text for key, text in per_node.items() if text is not None}
        load = NodeLoad.from_annotations(name, written, RULES)
        readings = [decode(t) for t in per_node.values()]
        stamps = [r.timestamp for r in readings if isinstance(r, Sample)]
        if len(stamps) != len(KEYS):
            return False
        later = max(stamps) + timedelta(seconds=PERIOD + 1, minutes=5)
        stale = {key for key, why in evaluate(load, RULES, later).unknown if why == "stale"}
        if stale != set(KEYS):
            return False
    return True


def start_annotator(sandbox: Sandbox, proxy: PrometheusFaults, workdir: Path) -> str:
    """The annotator on the proxy, alone (no election); its health URL."""
    policy = workdir / "policy-faults.yaml"
    policy.write_text(yaml.safe_dump(POLICY))
    return sandbox.start_annotator(
        prometheus_url=proxy.url,
        name="annotator-faults",
        args=[
            "--policy",
            str(policy),
            "--no-leader-elect",
            "--prometheus-timeout",
            f"{QUERY_TIMEOUT:g}",
        ],
    )


LOADS = {n.name: {"cpu": 0.1 + 0.05 * i, "mem": 0.3} for i, n in enumerate(NODES)}


@pytest.fixture(scope="module")
def faults_setup(
    sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, PrometheusFaults]]:
    stack = MetricsStack(sandbox, NODES, loads=LOADS).start()
    with PrometheusFaults(stack.prometheus.url, slow_seconds=SLOW_SECONDS) as proxy:
        url = start_annotator(sandbox, proxy, tmp_path_factory.mktemp("faults"))
        begun = datetime.now(UTC)
        wait_for(
            lambda: fresh_since(metric_values(sandbox, NODES), begun),
            timeout=120,
            what="real values on every node",
            interval=1,
        )
        yield url, proxy
        sandbox.supervisor.stop_named("annotator-faults")
    stack.stop()


@pytest.mark.parametrize("fault", FAULTS, ids=str)
def test_nothing_fake_is_written_and_values_return_within_a_period(
    sandbox: Sandbox, faults_setup: tuple[str, PrometheusFaults], fault: Fault
) -> None:
    url, proxy = faults_setup
    outcome = exercise(sandbox, NODES, url, proxy, fault)
    assert outcome.queries > 0 or fault is Fault.DOWN, outcome
    if fault in WRITES_ZERO:
        assert outcome.zeros == outcome.values, outcome
    else:
        assert outcome.changed == 0 and outcome.zeros == 0, outcome
        assert outcome.stale_later, outcome
    assert outcome.recovery is not None, outcome
