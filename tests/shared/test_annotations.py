from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.annotations import (
    Sample,
    Unknown,
    decode,
    encode_hot_value,
    encode_metric,
    parse_timestamp,
)

T = datetime(2026, 11, 22, 2, 31, 5, tzinfo=UTC)
SHANGHAI = ZoneInfo("Asia/Shanghai")


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.630124, "0.63012,2026-11-22T02:31:05Z"),
        (0.0, "0.00000,2026-11-22T02:31:05Z"),
        (1.0, "1.00000,2026-11-22T02:31:05Z"),
        (1.234567, "1.23457,2026-11-22T02:31:05Z"),
        (float("nan"), "0.00000,2026-11-22T02:31:05Z"),
        (-0.2, "0.00000,2026-11-22T02:31:05Z"),
    ],
)
def test_encode_metric_utc(value: float, text: str) -> None:
    assert encode_metric(value, T) == text


def test_crane_local_time_with_literal_z() -> None:
    text = encode_metric(0.5, T, SHANGHAI)
    assert text == "0.50000,2026-11-22T10:31:05Z"
    assert decode(text, SHANGHAI) == Sample(0.5, T)
    # Read as UTC it is eight hours in the future: the zone must match the writer's.
    assert decode(text).timestamp - T == timedelta(hours=8)  # type: ignore[union-attr]


def test_hot_value() -> None:
    assert encode_hot_value(2, T) == "2,2026-11-22T02:31:05Z"
    assert encode_hot_value(-1, T) == "0,2026-11-22T02:31:05Z"
    assert decode("2,2026-11-22T02:31:05Z") == Sample(2.0, T)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (None, "missing"),
        ("", "malformed"),
        ("0.5", "malformed"),
        ("0.5,", "malformed"),
        (",2026-11-22T02:31:05Z", "malformed"),
        ("0.5,2026-11-22T02:31:05Z,x", "malformed"),
        ("abc,2026-11-22T02:31:05Z", "malformed"),
        ("1_0,2026-11-22T02:31:05Z", "malformed"),
        ("0x1p-2,2026-11-22T02:31:05Z", "malformed"),
        (" 0.5,2026-11-22T02:31:05Z", "malformed"),
        ("0.5,2026-11-22 02:31:05", "malformed"),
        ("0.5,2026-11-22T02:31:05+00:00", "malformed"),
        ("0.5,2026-13-22T02:31:05Z", "malformed"),
        ("0.5,2026-02-30T02:31:05Z", "malformed"),
        ("0.5,2026-11-22T25:31:05Z", "malformed"),
        ("-0.1,2026-11-22T02:31:05Z", "negative"),
        ("NaN,2026-11-22T02:31:05Z", "not-finite"),
        ("+Inf,2026-11-22T02:31:05Z", "not-finite"),
    ],
)
def test_bad_values_are_unknown(raw: str | None, reason: str) -> None:
    result = decode(raw)
    assert isinstance(result, Unknown)
    assert result.reason == reason


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("1e-3,2026-11-22T02:31:05Z", 0.001),
        ("+0.5,2026-11-22T02:31:05Z", 0.5),
        ("2.,2026-11-22T02:31:05Z", 2.0),
    ],
)
def test_go_float_forms(raw: str, value: float) -> None:
    assert decode(raw) == Sample(value, T)


@given(st.text(max_size=80))
def test_decode_never_raises(raw: str) -> None:
    assert isinstance(decode(raw), Sample | Unknown)


@given(
    st.floats(min_value=0, max_value=10, allow_nan=False),
    st.datetimes(
        min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
    ),
)
def test_round_trip_to_five_decimals(value: float, moment: datetime) -> None:
    decoded = decode(encode_metric(value, moment))
    assert isinstance(decoded, Sample)
    assert decoded.value == pytest.approx(value, abs=5e-6)
    assert decoded.timestamp == moment.replace(microsecond=0)


def test_parse_timestamp_zone() -> None:
    assert parse_timestamp("2026-11-22T10:31:05Z", SHANGHAI) == T
    assert parse_timestamp("2026-11-22T10:31:05") is None
