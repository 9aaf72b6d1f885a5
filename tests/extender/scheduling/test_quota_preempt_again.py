"""A pod that preempts again while the victims named for it are still going: kube-scheduler
retries a preemptor as soon as its victims' deletions are sent (asynchronous preemption), and
with its cache still holding them it preempts again. New victims then would be evicted for
nothing, so an answer names one node, and the same pod gets the same node and victims again."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from extender.scheduling import quota_gate
from extender.scheduling.metrics import ExtenderMetrics
from extender.scheduling.quota_gate import QuotaGate
from shared.pods import POD_DECODER
from shared.quota_ledger import QUOTA_DECODER, QuotaLedger
from tests.quota_objects import elastic_quota, quota_pod

FOUR_CPU = {"cpu": "4", "memory": "32Gi", "pods": "110"}


def decoded(body: dict[str, Any]) -> Any:
    return POD_DECODER.decode(msgspec.json.encode(body))


def low(name: str, node: str, minute: int, priority: int = 0) -> dict[str, Any]:
    created = f"2026-11-22T10:0{minute}:00Z"
    return quota_pod(name, "w", 1, node=node, created=created, priority=priority)


def burst(n2_priority: int = 0) -> tuple[QuotaGate, ExtenderMetrics]:
    """w (min 2, max 20) borrows idle's min: two 4-CPU nodes full of its 1-CPU pods."""
    ledger = QuotaLedger()
    quotas = [
        elastic_quota("w", min={"cpu": 2}, max={"cpu": 20}),
        elastic_quota("idle", min={"cpu": 8}),
    ]
    ledger.quota_store.replace([QUOTA_DECODER.decode(msgspec.json.encode(q)) for q in quotas])
    pods = [low(f"w-0-{i}", "n1", i) for i in range(3)]
    pods += [low(f"w-{n2_priority}-{i}", "n2", i, n2_priority) for i in range(3, 6)]
    pods += [quota_pod(f"w-1000-{i}", "w", 1, node=f"n{i + 1}", priority=1000) for i in range(2)]
    ledger.pod_store.replace([decoded(p) for p in pods])
    metrics = ExtenderMetrics()
    return QuotaGate(ledger, allocatable=lambda _: FOUR_CPU, metrics=metrics), metrics


def victims(answer: Any) -> dict[str, list[str]]:
    return {node: [m.UID for m in v.Pods] for node, v in answer.items()}


def counted(metrics: ExtenderMetrics, outcome: str) -> float:
    return float(metrics.quota_preemptions.labels(outcome)._value.get())


def test_an_answer_names_the_node_kube_scheduler_would_pick() -> None:
    """kube-scheduler picks among the nodes an extender returns (lowest highest priority
    of the victims first): the answer holds that one node only."""
    gate, _ = burst(n2_priority=100)
    preemptor = decoded(quota_pod("w-1000-2", "w", 1, priority=1000))
    proposal = {"n2": (["uid-w-w-100-3"], 0), "n1": (["uid-w-w-0-0"], 0)}
    assert victims(gate.preempt(preemptor, proposal) or {}) == {"n1": ["uid-w-w-0-2"]}


def test_a_preemptor_gets_the_same_victims_while_they_are_going() -> None:
    gate, metrics = burst()
    preemptor = decoded(quota_pod("w-1000-2", "w", 1, priority=1000))
    proposal = {"n1": (["uid-w-w-0-0"], 0), "n2": (["uid-w-w-0-3"], 0)}
    # the newest priority-0 pod of the node with the cheapest set (ties: by name)
    assert victims(gate.preempt(preemptor, proposal) or {}) == {"n1": ["uid-w-w-0-2"]}
    # kube-scheduler deleted w-0-2; its cache (and this watch) still hold it: the same pod
    # asks again, kube-scheduler proposing w-0-2 again, and gets it again, no new victim
    stale = {"n1": (["uid-w-w-0-2"], 0), "n2": (["uid-w-w-0-5"], 0)}
    for _ in range(2):
        assert victims(gate.preempt(preemptor, stale) or {}) == {"n1": ["uid-w-w-0-2"]}
    assert counted(metrics, "repeated") == 2
    # another pod: the room of w-0-2 is not its own, even where kube-scheduler proposes it
    other = decoded(quota_pod("w-1000-3", "w", 1, priority=1000))
    assert victims(gate.preempt(other, stale) or {}) == {"n1": ["uid-w-w-0-1"]}
    # kube-scheduler no longer has w-0-2 (this watch still does): the pod fits on n1 with
    # its own victim gone, so kube-scheduler's view is behind; nothing is taken for it
    assert gate.preempt(preemptor, proposal) == {}
    assert counted(metrics, "repeated") == 2


def test_a_preemptor_may_preempt_afresh_once_the_offer_is_old(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(quota_gate, "OFFERED_FOR", 0.0)
    gate, metrics = burst()
    preemptor = decoded(quota_pod("w-1000-2", "w", 1, priority=1000))
    proposal = {"n1": (["uid-w-w-0-0"], 0)}
    for _ in range(2):
        assert victims(gate.preempt(preemptor, proposal) or {}) == {"n1": ["uid-w-w-0-2"]}
    assert counted(metrics, "repeated") == 0


def test_another_pods_victim_proposed_by_a_stale_scheduler_frees_nothing_for_this_one() -> None:
    """Two pods were admitted and bound, which this watch has not shown yet (each may be on
    either node). A and then B preempted on n1. A is tried again before kube-scheduler sees
    B's victim go: with B nominated there, its view of n1 is full, and it proposes B's victim.
    By this count A fits on n1 (its own victim gone, B's standing in for B): no victims."""
    ledger = QuotaLedger()
    quotas = [
        elastic_quota("w", min={"cpu": 2}, max={"cpu": 20}),
        elastic_quota("idle", min={"cpu": 8}),
    ]
    ledger.quota_store.replace([QUOTA_DECODER.decode(msgspec.json.encode(q)) for q in quotas])
    pods = [low("w-0-0", "n1", 0), low("w-0-1", "n1", 1), low("w-100-0", "n1", 2, 100)]
    pods += [low("w-0-2", "n2", 3), low("w-0-3", "n2", 4), low("w-100-1", "n2", 5, 100)]
    ledger.pod_store.replace([decoded(p) for p in pods])
    gate = QuotaGate(ledger, allocatable=lambda _: FOUR_CPU, metrics=ExtenderMetrics())
    for name in ("w-1000-0", "w-1000-2"):
        admitted = decoded(quota_pod(name, "w", 1, priority=1000))
        gate.assume(admitted, gate.request_of(admitted))
    a = decoded(quota_pod("w-1000-1", "w", 1, priority=1000))
    b = decoded(quota_pod("w-1000-3", "w", 1, priority=1000))
    first = victims(gate.preempt(a, {"n1": (["uid-w-w-0-0"], 0), "n2": (["uid-w-w-0-2"], 0)}))
    assert first == {"n1": ["uid-w-w-0-1"]}
    second = victims(gate.preempt(b, {"n1": (["uid-w-w-0-0"], 0), "n2": (["uid-w-w-0-2"], 0)}))
    assert second == {"n1": ["uid-w-w-0-0"]}
    assert gate.preempt(a, {"n1": (["uid-w-w-0-0"], 0), "n2": (["uid-w-w-0-3"], 0)}) == {}
