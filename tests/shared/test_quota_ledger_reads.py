"""The ledger reads a quota again only when its spec changes: a reservation written on one
ElasticQuota (every admission, with shared admission) updates that namespace's reservations and
nothing else, and is as exact as reading every object again."""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from shared.pods import POD_DECODER
from shared.quota import ElasticQuota
from shared.quota_ledger import QUOTA_DECODER, QuotaLedger
from shared.quota_objects import ADMITTED_ANNOTATION, QuotaObject, Reservation, encode_reservations
from tests.quota_objects import elastic_quota, quota_pod


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


KEYS = [("a", "q1"), ("a", "q2"), ("b", "q1")]
"""Two objects in one namespace (the first by name carries its reservations, valid or not)."""
SPECS = [
    {"min": {"cpu": "1"}, "max": {"cpu": "2"}},
    {"min": {"cpu": "1"}, "max": {"cpu": "5"}},
    {"min": {"cpu": "lots"}},  # invalid: ignored, and reported
]
NOTES = [None, reserved("p1", "1"), reserved("p2", "1/4"), "not json"]
PODS = [
    POD_DECODER.decode(json.dumps(quota_pod(f"pod-{ns}", ns, "1", node="n1", uid=f"uid-{ns}")))
    for ns in ("a", "b")
]

operations = st.lists(
    st.one_of(
        st.tuples(
            st.just("set"),
            st.sampled_from(KEYS),
            st.integers(0, len(SPECS) - 1),
            st.integers(0, len(NOTES) - 1),
        ),
        st.tuples(st.just("delete"), st.sampled_from(KEYS), st.just(0), st.just(0)),
    ),
    max_size=12,
)


def an_object(key: tuple[str, str], spec: int, note: int, rv: int) -> QuotaObject:
    meta: dict[str, Any] = {"namespace": key[0], "name": key[1], "resourceVersion": str(rv)}
    if NOTES[note] is not None:
        meta["annotations"] = {ADMITTED_ANNOTATION: NOTES[note]}
    return QUOTA_DECODER.decode(json.dumps({"metadata": meta, "spec": SPECS[spec]}))


@settings(max_examples=500, deadline=None)
@given(operations, st.booleans())
@example(  # an invalid first object carries the reservations of the valid second one's quota
    [("set", ("a", "q1"), 2, 0), ("set", ("a", "q2"), 0, 0), ("set", ("a", "q1"), 2, 1)], True
)
def test_changes_one_by_one_end_as_reading_everything_again(
    steps: list[tuple[str, tuple[str, str], int, int]], shared: bool
) -> None:
    """Whatever objects come and go (two per namespace, invalid ones, reservations written
    on either, deletions), with pods counted throughout, the ledger updated event by event
    holds what one that reads every object at once holds."""
    step = QuotaLedger(shared_admission=shared)
    step.pod_store.replace(PODS)
    for rv, (op, key, spec, note) in enumerate(steps, start=2):
        if op == "set":
            step.set_quota_objects([an_object(key, spec, note, rv)], replace=False)
        elif key in step.objects:
            step.delete_quota_object(step.objects[key])

    whole = QuotaLedger(shared_admission=shared)
    whole.set_quota_objects(list(step.objects.values()), replace=True)
    whole.pod_store.replace(PODS)

    assert step.quotas == whole.quotas
    assert step.invalid == whole.invalid
    assert step.pool_min == whole.pool_min
    assert step.pool_used == whole.pool_used
    assert step.used == whole.used
    assert step.reservations == whole.reservations
