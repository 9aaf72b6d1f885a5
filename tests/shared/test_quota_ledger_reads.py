"""The ledger reads a quota again only when its spec changes: a reservation written on one
ElasticQuota (every admission, with shared admission) updates that namespace's reservations and
nothing else, and is as exact as reading every object again."""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

import pytest

from shared.quota import ElasticQuota
from shared.quota_ledger import QUOTA_DECODER, QuotaLedger
from shared.quota_objects import ADMITTED_ANNOTATION, QuotaObject, Reservation, encode_reservations
from tests.quota_objects import elastic_quota


def quota_object(
    namespace: str, *, cpu_max: str = "2", reserved: str | None = None, rv: int = 1
) -> QuotaObject:
    body: dict[str, Any] = elastic_quota(namespace, min={"cpu": "1"}, max={"cpu": cpu_max}, rv=rv)
    if reserved is not None:
        body["metadata"]["annotations"] = {ADMITTED_ANNOTATION: reserved}
    return QUOTA_DECODER.decode(json.dumps(body))


def reserved(uid: str, cpu: str) -> str:
    """The annotation of one live reservation (until the year 2096) of ``cpu`` cores."""
    return encode_reservations({uid: Reservation(4e9, {"cpu": Fraction(cpu)}, None)})


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The namespaces whose quota is read from its object, in order."""
    seen: list[str] = []
    original = ElasticQuota.from_object.__func__  # type: ignore[attr-defined]

    def counted(cls: type[ElasticQuota], obj: dict[str, Any]) -> ElasticQuota:
        seen.append(obj["metadata"]["namespace"])
        return original(cls, obj)  # type: ignore[no-any-return]

    monkeypatch.setattr(ElasticQuota, "from_object", classmethod(counted))
    return seen


def test_a_reservation_written_reads_no_quota_again(reads: list[str]) -> None:
    ledger = QuotaLedger(shared_admission=True)
    ledger.set_quota_objects([quota_object(f"team-{i}") for i in range(50)], replace=True)
    assert len(reads) == 50
    pool_min, quotas = ledger.pool_min, dict(ledger.quotas)
    reads.clear()

    ledger.set_quota_objects(
        [quota_object("team-7", reserved=reserved("p1", "1/2"), rv=2)], replace=False
    )

    assert reads == []
    assert ledger.quotas == quotas and ledger.pool_min is pool_min
    assert set(ledger.reservations["team-7"]) == {"p1"}
    assert all(not ledger.reservations[f"team-{i}"] for i in range(50) if i != 7)


def test_a_spec_change_reads_that_quota_again(reads: list[str]) -> None:
    ledger = QuotaLedger(shared_admission=True)
    ledger.set_quota_objects([quota_object(f"team-{i}") for i in range(5)], replace=True)
    reads.clear()

    ledger.set_quota_objects([quota_object("team-3", cpu_max="3", rv=2)], replace=False)

    assert reads == ["team-3"]
    assert ledger.quotas["team-3"].max == {"cpu": Fraction(3)}


@pytest.mark.parametrize("shared", [True, False])
def test_changes_one_by_one_end_as_reading_everything_again(shared: bool) -> None:
    changes = [
        quota_object("a", reserved=reserved("p1", "1"), rv=2),
        quota_object("b", cpu_max="5", rv=2),
        quota_object("a", reserved=reserved("p2", "1/4"), rv=3),
        quota_object("c", rv=1),
        quota_object("b", cpu_max="5", reserved="not json", rv=3),
    ]
    step = QuotaLedger(shared_admission=shared)
    step.set_quota_objects([quota_object("a"), quota_object("b")], replace=True)
    for change in changes:
        step.set_quota_objects([change], replace=False)

    whole = QuotaLedger(shared_admission=shared)
    whole.set_quota_objects(list(step.objects.values()), replace=True)

    assert step.quotas == whole.quotas
    assert step.pool_min == whole.pool_min
    assert step.pool_used == whole.pool_used
    assert step.reservations == whole.reservations
    assert step.invalid == whole.invalid
