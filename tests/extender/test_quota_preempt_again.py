"""A pod that preempts again while the victims named for it are still going: kube-scheduler
retries a preemptor as soon as its victims' deletions are sent (asynchronous preemption), and
with its cache still holding them it preempts again. New victims then would be evicted for
nothing."""

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


def low(name: str, node: str, minute: int) -> dict[str, Any]:
    return quota_pod(name, "w", 1, node=node, created=f"2026-11-22T10:0{minute}:00Z")


def burst() -> tuple[QuotaGate, ExtenderMetrics]:
    """w (min 2, max 20) borrows idle's min: two 4-CPU nodes full of its 1-CPU pods."""
    ledger = QuotaLedger()
    quotas = [
        elastic_quota("w", min={"cpu": 2}, max={"cpu": 20}),
        elastic_quota("idle", min={"cpu": 8}),
    ]
    ledger.quota_store.replace([QUOTA_DECODER.decode(msgspec.json.encode(q)) for q in quotas])
    pods = [low(f"w-0-{i}", "n1" if i < 2 else "n2", i) for i in range(4)]
    pods += [quota_pod(f"w-1000-{i}", "w", 1, node=f"n{i + 1}", priority=1000) for i in range(2)]
    pods += [low(f"w-0-{i}", "n1" if i == 4 else "n2", i) for i in range(4, 6)]
    ledger.pod_store.replace([decoded(p) for p in pods])
    metrics = ExtenderMetrics()
    return QuotaGate(ledger, allocatable=lambda _: FOUR_CPU, metrics=metrics), metrics


def victims(answer: Any) -> dict[str, list[str]]:
    return {node: [m.UID for m in v.Pods] for node, v in answer.items()}


def held(metrics: ExtenderMetrics) -> float:
    return metrics.quota_preemptions.labels("held")._value.get()


def test_a_preemptor_gets_no_new_victims_while_its_own_are_going() -> None:
    gate, metrics = burst()
    preemptor = decoded(quota_pod("w-1000-2", "w", 1, priority=1000))
    proposal = {"n1": (["uid-w-w-0-0"], 0), "n2": (["uid-w-w-0-2"], 0)}
    first = victims(gate.preempt(preemptor, proposal) or {})
    # the newest priority-0 pod of each node
    assert first == {"n1": ["uid-w-w-0-4"], "n2": ["uid-w-w-0-5"]}
    # kube-scheduler chose n1 and deleted w-0-4; its cache (and this watch) still hold it:
    # the same pod asks again, with the same proposal
    assert gate.preempt(preemptor, proposal) == {}
    assert held(metrics) == 2
    # another pod is answered as before: its room is its own
    other = decoded(quota_pod("w-1000-3", "w", 1, priority=1000))
    assert victims(gate.preempt(other, proposal) or {}) == {
        "n1": ["uid-w-w-0-1"],
        "n2": ["uid-w-w-0-3"],
    }
    # the watch shows w-0-4 gone: the pod fits on n1 by this count, and kube-scheduler's
    # stale view does not make its victims stand there; on n2 the named victim is going
    gate.ledger.pod_store.apply("DELETED", decoded(low("w-0-4", "n1", 4)))
    third = gate.preempt(preemptor, {"n1": (["uid-w-w-0-0"], 0)})
    assert third == {}
    assert held(metrics) == 2


def test_a_preemptor_may_preempt_again_once_the_offer_is_old(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(quota_gate, "OFFERED_FOR", 0.0)
    gate, metrics = burst()
    preemptor = decoded(quota_pod("w-1000-2", "w", 1, priority=1000))
    proposal = {"n1": (["uid-w-w-0-0"], 0)}
    for _ in range(2):
        assert victims(gate.preempt(preemptor, proposal) or {}) == {"n1": ["uid-w-w-0-4"]}
    assert held(metrics) == 0
