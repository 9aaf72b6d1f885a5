"""The elastic-quota part of ``/v1/explain``: for each rule, the rule named is the one the
admission filter decided by (the ledger's own decision, not a second derivation), with the
numbers behind it: the namespace's use, min, max, what the pod would borrow, the pool."""

from __future__ import annotations

import json
from typing import Any

import pytest

from extender.scheduling.explain import explain_quota
from extender.scheduling.metrics import ExtenderMetrics
from extender.scheduling.quota_gate import QuotaGate
from shared.pods import POD_DECODER
from shared.quota_ledger import QUOTA_DECODER, QuotaLedger
from tests.quota_objects import elastic_quota, quota_pod

QUOTAS = [
    elastic_quota("team", min={"cpu": 2}, max={"cpu": 4}),
    elastic_quota("lender", min={"cpu": 4}),
]
"""Pool of min: 6 CPU. ``team`` may borrow up to its max of 4."""


def gate_with(bound: dict[str, int]) -> QuotaGate:
    """A gate whose ledger has the quotas and, per namespace, that many 1-CPU pods bound."""
    ledger = QuotaLedger(clock=lambda: 0.0)
    for body in QUOTAS:
        ledger.quota_store.apply("ADDED", QUOTA_DECODER.decode(json.dumps(body)))
    pods = [
        POD_DECODER.decode(json.dumps(quota_pod(f"{ns}-{i}", ns, 1, node="n1")))
        for ns, count in bound.items()
        for i in range(count)
    ]
    ledger.pod_store.replace(pods)
    return QuotaGate(ledger, allocatable=lambda _: {"cpu": "8"}, metrics=ExtenderMetrics())


CASES: list[tuple[str, dict[str, int], str, int, bool, dict[str, Any]]] = [
    # rule, bound pods, namespace asking, CPU asked, admitted, numbers
    ("within-min", {"team": 1}, "team", 1, True, {"used": "1", "after": "2", "borrowed": "0"}),
    ("borrowing", {"team": 2}, "team", 1, True, {"used": "2", "after": "3", "borrowed": "1"}),
    ("max", {"team": 4}, "team", 1, False, {"used": "4", "after": "5", "borrowed": "3"}),
    (
        "pool",
        {"team": 3, "lender": 3},
        "team",
        1,
        False,
        {"used": "3", "after": "4", "borrowed": "2", "pool_used": "7"},
    ),
    (
        "reclaiming",
        {"team": 4, "lender": 1},
        "lender",
        2,
        False,
        {"used": "1", "after": "3", "borrowed": "0", "pool_used": "7", "max": None},
    ),
]


@pytest.mark.parametrize(("rule", "bound", "namespace", "cpu", "admitted", "numbers"), CASES)
def test_the_rule_is_the_filters_decision_with_its_numbers(
    rule: str,
    bound: dict[str, int],
    namespace: str,
    cpu: int,
    admitted: bool,
    numbers: dict[str, Any],
) -> None:
    gate = gate_with(bound)
    pod = POD_DECODER.decode(json.dumps(quota_pod("asking", namespace, cpu)))
    decision = gate.admit(pod, gate.request_of(pod))
    explained = explain_quota(gate, pod)
    assert (decision.admitted, decision.rule) == (admitted, rule)
    assert (explained.admitted, explained.rule) == (admitted, rule)
    assert explained.message == (decision.message or "admitted")
    assert explained.governed and explained.enforced
    (cpu_row,) = explained.resources
    expected = {
        "resource": "cpu",
        "request": str(cpu),
        "min": "2" if namespace == "team" else "4",
        "max": "4" if namespace == "team" else None,
        "pool_min": "6",
        **numbers,
    }
    assert {k: getattr(cpu_row, k) for k in expected} == expected


def test_a_namespace_without_a_quota_is_not_governed() -> None:
    gate = gate_with({"team": 1})
    pod = POD_DECODER.decode(json.dumps(quota_pod("free", "elsewhere", 1)))
    explained = explain_quota(gate, pod)
    assert (explained.governed, explained.admitted, explained.rule) == (False, True, "no-quota")
    assert explained.resources == []
    off = explain_quota(None, pod)
    assert (off.enforced, off.rule) == (False, "no-quota")
