import math
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
        ("nan,2026-11-22T02:31:05Z", "not-finite"),
        # Go's ParseFloat takes no sign before NaN
        ("-NaN,2026-11-22T02:31:05Z", "malformed"),
        ("-Inf,2026-11-22T02:31:05Z", "negative"),
        ("-1e308,2026-11-22T02:31:05Z", "negative"),
        # beyond float64: ParseFloat answers ErrRange, so crane does not use the value
        ("1e400,2026-11-22T02:31:05Z", "malformed"),
        ("-1e400,2026-11-22T02:31:05Z", "malformed"),
        ("9" * 400 + ",2026-11-22T02:31:05Z", "malformed"),
        # digits of other scripts: Python's \d, int() and float() take them, Go does not
        ("\u0660.\u0669,2026-11-22T02:31:05Z", "malformed"),
        ("0.5,\u0662\u0660\u0662\u0666-11-22T02:31:05Z", "malformed"),
        ("0.5,2026-11-22T02:31:\uff10\uff15Z", "malformed"),
        ("\u0131nf,2026-11-22T02:31:05Z", "malformed"),  # dotless i: no Unicode case folding
        ("0.5,0000-01-01T00:00:00Z", "malformed"),
        ("0.5 ,2026-11-22T02:31:05Z", "malformed"),
        ("0.5,2026-11-22T02:31:05Z\n", "malformed"),
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


@pytest.mark.parametrize("text", ["+Inf", "inf", "Infinity", "+INFINITY"])
def test_infinity_is_a_value(text: str) -> None:
    # crane's ParseFloat reads it, and it is above every limit (the load model rejects the node)
    assert decode(f"{text},2026-11-22T02:31:05Z") == Sample(math.inf, T)


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("1e308,2026-11-22T02:31:05Z", 1e308),
        ("1e-400,2026-11-22T02:31:05Z", 0.0),  # underflow is no error to ParseFloat either
        ("-0,2026-11-22T02:31:05Z", 0.0),
    ],
)
def test_extreme_but_valid_numbers(raw: str, value: float) -> None:
    assert decode(raw) == Sample(value, T)


@pytest.mark.parametrize(
    ("stamp", "moment"),
    [
        ("9999-12-31T23:59:59Z", datetime(9999, 12, 31, 23, 59, 59, tzinfo=SHANGHAI)),
        ("0001-01-01T00:00:00Z", datetime(1, 1, 1, tzinfo=SHANGHAI)),
    ],
)
def test_timestamps_at_the_ends_of_the_calendar(stamp: str, moment: datetime) -> None:
    # decoded as written; whether they can be used is the load model's question (future, stale)
    assert decode(f"0.5,{stamp}", SHANGHAI) == Sample(0.5, moment)


STAMPS = st.datetimes(min_value=datetime(1000, 1, 1), max_value=datetime(9999, 12, 31)).map(
    lambda moment: moment.strftime("%Y-%m-%dT%H:%M:%SZ")
)
ANNOTATIONS = st.one_of(
    st.text(max_size=80),
    st.builds(
        "{},{}".format,
        st.one_of(
            st.floats(min_value=0).map(repr),
            st.floats().map(repr),
            st.text("0123456789.eE+-InfatyN", max_size=8),
        ),
        st.one_of(STAMPS, STAMPS, st.text("0123456789-:TZ", max_size=22), st.text(max_size=22)),
    ),
)


@given(ANNOTATIONS)
def test_decode_never_raises_and_reads_what_the_text_says(raw: str) -> None:
    result = decode(raw)
    value_text, _, stamp_text = raw.partition(",")
    if isinstance(result, Unknown):
        # only the codec's reasons ("missing" is for no annotation; stale and future are the
        # load model's), with a detail quoting the part that is wrong
        assert result.reason in ("malformed", "negative", "not-finite")
        quoted = (repr(raw[:64]), repr(value_text[:32]), repr(stamp_text[:32]))
        assert any(q in result.detail for q in quoted), result.detail
    else:
        # a Sample is the number before the one comma and the UTC time after it, exactly
        assert result.value == float(value_text) and result.value >= 0
        assert "," not in stamp_text
        assert result.timestamp == datetime.strptime(stamp_text, "%Y-%m-%dT%H:%M:%SZ").replace(
            tzinfo=UTC
        )


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
