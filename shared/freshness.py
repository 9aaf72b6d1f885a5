"""Freshness of annotation values: a metric value is fresh iff ``now < ts + period + 5m``; the
hot value for 5m. A timestamp more than :data:`MAX_CLOCK_SKEW` ahead of ``now`` is never fresh
(``future``). Datetime arithmetic is done on differences, so no timestamp (year 1 or 9999) can
overflow. Time is always passed in."""

from __future__ import annotations

from datetime import datetime, timedelta

from shared.annotations import Reading, Sample, Unknown

MAX_CLOCK_SKEW = timedelta(minutes=1)
"""A timestamp up to this far ahead of ``now`` reads as current (the annotator's clock may run
a little ahead of the extender's); further ahead it is unknown (``future``), never fresh. A value
written in local time and read as UTC east of Greenwich lands hours ahead: that is a
``spec.timestampZone`` mismatch, not clock skew."""
_LONGEST_VALIDITY = timedelta(days=1)
"""A verdict is re-evaluated at least this often, so that a future timestamp or an absurdly long
sync period never needs a datetime beyond year 9999."""


def future_detail(timestamp: datetime, ahead: timedelta) -> str:
    """Why a timestamp ``ahead`` of now is not used, pointing at the likely cause."""
    minutes = int(ahead.total_seconds()) // 60
    return (
        f"timestamp {timestamp.strftime('%Y-%m-%dT%H:%M:%SZ')} read in {timestamp.tzinfo} is "
        f"{minutes // 60}h{minutes % 60:02d}m ahead of now: annotations written in local time? "
        "set spec.timestampZone"
    )


def fresh_value(
    reading: Reading, window: timedelta, now: datetime
) -> tuple[Sample | Unknown, datetime | None]:
    """The reading if it is a sample inside its freshness window, else why not; and when the
    passing of time changes that (``None``: never).

    Only differences of datetimes are taken (``now - timestamp``, never ``timestamp + window``):
    a timedelta spans any two datetimes, a datetime plus a timedelta may leave year 1..9999.
    """
    if isinstance(reading, Unknown):
        return reading, None
    age = now - reading.timestamp
    if -age > MAX_CLOCK_SKEW:
        ahead = -age
        return (
            Unknown("future", future_detail(reading.timestamp, ahead)),
            now + min(ahead - MAX_CLOCK_SKEW, _LONGEST_VALIDITY),
        )
    if age < window:
        return reading, now + min(window - age, _LONGEST_VALIDITY)
    return Unknown("stale", f"measured at {reading.timestamp.isoformat()}"), None
