"""Node annotation codec, byte-compatible with crane-scheduler.

A metric annotation is ``"<fraction with 5 decimals>,<YYYY-MM-DDTHH:MM:SSZ>"``; the hot value
annotation ``node_hot_value`` is ``"<integer>,<timestamp>"``. loadsched writes true UTC by default;
crane writes local wall time in its ``$TZ`` with a literal ``Z``, so the zone is a parameter.

Decoding never raises: a bad value decodes to :class:`Unknown` with a reason. What Go's
``strconv.ParseFloat`` and ``time.Parse`` refuse (crane's readers) is ``malformed`` here too:
digits are ASCII only, and a number beyond float64's range is refused, not read as infinite.
``+Inf`` itself is a value (above every limit); NaN is ``not-finite``. Whether a timestamp is
``stale`` or in the ``future`` depends on the time of reading: the load model decides that.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import Literal

UnknownReason = Literal["missing", "malformed", "negative", "not-finite", "stale", "future"]

# ASCII only: Python's \d and int() also take other scripts' digits ("٠.٩"); Go refuses them.
_TIMESTAMP = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})Z", re.ASCII)
# What Go's strconv.ParseFloat takes in base 10, less hex floats and underscores: a sign is
# allowed before "inf"/"infinity", not before "nan".
_FLOAT = re.compile(
    r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[+-]?(?i:infinity|inf)|(?i:nan)", re.ASCII
)
_INFINITY = re.compile(r"[+-]?(?i:infinity|inf)", re.ASCII)


@dataclass(frozen=True, slots=True)
class Sample:
    """A decoded annotation: the value and when it was measured (timezone-aware)."""

    value: float
    timestamp: datetime


@dataclass(frozen=True, slots=True)
class Unknown:
    """An annotation that cannot be used, and why."""

    reason: UnknownReason
    detail: str = ""


Reading = Sample | Unknown


def format_timestamp(moment: datetime, zone: tzinfo = UTC) -> str:
    """``moment`` as wall time in ``zone`` with a literal ``Z`` (crane's layout)."""
    return moment.astimezone(zone).strftime("%Y-%m-%dT%H:%M:%SZ")


def encode_metric(value: float, moment: datetime, zone: tzinfo = UTC) -> str:
    """Encode a usage fraction. NaN and negative values are written as ``0.00000``."""
    return stamped_metric(value, format_timestamp(moment, zone))


def stamped_metric(value: float, stamp: str) -> str:
    """:func:`encode_metric` with the timestamp already formatted (:func:`format_timestamp`):
    an annotator round stamps every node's values with one moment, formatted once."""
    if math.isnan(value) or value < 0:
        value = 0.0
    return f"{value:.5f},{stamp}"


def encode_hot_value(count: int, moment: datetime, zone: tzinfo = UTC) -> str:
    """Encode the integer hot value."""
    return stamped_hot_value(count, format_timestamp(moment, zone))


def stamped_hot_value(count: int, stamp: str) -> str:
    """:func:`encode_hot_value` with the timestamp already formatted."""
    return f"{max(count, 0)},{stamp}"


def parse_timestamp(text: str, zone: tzinfo = UTC) -> datetime | None:
    """Parse crane's timestamp layout as wall time in ``zone``; ``None`` if malformed."""
    match = _TIMESTAMP.fullmatch(text)
    if match is None:
        return None
    try:
        year, month, day, hour, minute, second = (int(g) for g in match.groups())
        return datetime(year, month, day, hour, minute, second, tzinfo=zone)
    except ValueError:
        return None


def parse_value(text: str) -> float | Unknown:
    """The number as Go's ``strconv.ParseFloat`` reads it, or why it cannot be used.

    ``+Inf`` is a value; NaN, negative numbers and anything ParseFloat refuses (including a
    finite spelling beyond float64's range, such as ``1e400``) are unknown.
    """
    if not _FLOAT.fullmatch(text):
        return Unknown("malformed", f"value {text[:32]!r} is not a number")
    try:
        value = float(text)
    except (ValueError, OverflowError):  # not expected after the pattern; never raise anyway
        return Unknown("malformed", f"value {text[:32]!r} is not a number")
    if math.isnan(value):
        return Unknown("not-finite", f"value {text[:32]!r}")
    if math.isinf(value) and not _INFINITY.fullmatch(text):
        return Unknown("malformed", f"value {text[:32]!r} is out of float64 range")
    if value < 0:
        return Unknown("negative", f"value {text[:32]!r}")
    return value


def decode(raw: str | None, zone: tzinfo = UTC) -> Reading:
    """Decode a metric or hot value annotation. Never raises."""
    if raw is None:
        return Unknown("missing")
    value_text, sep, stamp_text = raw.partition(",")
    if not sep or "," in stamp_text:
        return Unknown("malformed", f"expected '<value>,<timestamp>', got {raw[:64]!r}")
    value = parse_value(value_text)
    if isinstance(value, Unknown):
        return value
    stamp = parse_timestamp(stamp_text, zone)
    if stamp is None:
        return Unknown("malformed", f"timestamp {stamp_text[:32]!r} is not YYYY-MM-DDTHH:MM:SSZ")
    return Sample(value, stamp)
