"""The reservations written on an ElasticQuota: admissions and promises, and what a reader
skips."""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

import msgspec
import pytest

from shared.quota_objects import (
    ADMITTED_ANNOTATION,
    QUOTA_DECODER,
    QuotaObject,
    Reservation,
    encode_reservations,
    reservations_of,
)


def quota_with(text: str) -> QuotaObject:
    body = {"metadata": {"name": "quota", "annotations": {ADMITTED_ANNOTATION: text}}}
    return QUOTA_DECODER.decode(msgspec.json.encode(body))


def test_admissions_and_promises_round_trip() -> None:
    written = {
        "u1": Reservation(100.5, {"cpu": Fraction(1, 2)}),
        "u2": Reservation(200.0, {"cpu": Fraction(2), "memory": Fraction(2**30)}, priority=7),
    }
    text = encode_reservations(written)
    assert json.loads(text) == {
        "u1": [100.5, {"cpu": "500m"}],
        "u2": [200.0, {"cpu": "2", "memory": "1073741824"}, 7],
    }
    assert reservations_of(quota_with(text)) == written


@pytest.mark.parametrize(
    "entry",
    [
        [100, {"cpu": "1"}, "high"],
        [100, {"cpu": "1"}, True],
        [100, {"cpu": "1"}, 1, 2],
        [100, {"cpu": "lots"}],
        ["soon", {"cpu": "1"}],
        [100],
        "100",
    ],
)
def test_a_malformed_entry_is_skipped_and_the_others_kept(entry: Any) -> None:
    text = json.dumps({"bad": entry, "good": [100, {"cpu": "1"}, 0]})
    assert reservations_of(quota_with(text)) == {
        "good": Reservation(100.0, {"cpu": Fraction(1)}, priority=0)
    }


@pytest.mark.parametrize(
    ("promised", "deciding", "holds"),
    [
        (None, 10, True),  # an admission holds against every pod
        (None, None, True),
        (5, 5, True),  # equal priority: first come, first served
        (5, 0, True),
        (5, 6, False),  # a higher priority is not held back
        (5, None, True),  # no priority given: counted
    ],
)
def test_what_a_reservation_holds_against(
    promised: int | None, deciding: int | None, holds: bool
) -> None:
    reservation = Reservation(100.0, {"cpu": Fraction(1)}, priority=promised)
    assert reservation.holds_against(deciding) is holds
