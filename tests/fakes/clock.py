"""The instant unit tests run at, and the clock they inject: time is passed in, never slept on."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

NOW = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)
"""When every unit test takes place, unless it moves a :class:`Clock`."""


class Clock:
    """A clock that stands still at ``now`` until the test moves it (:meth:`advance`, or by
    setting ``now``). Called, it is the wall clock as a datetime; :meth:`time` and
    :meth:`monotonic` read the same instant as seconds, for the seams that take
    ``time.time`` or ``time.monotonic``: all three advance together."""

    def __init__(self, now: datetime = NOW) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    def time(self) -> float:
        """Seconds since the epoch, as ``time.time``."""
        return self.now.timestamp()

    def monotonic(self) -> float:
        """Seconds as ``time.monotonic`` counts them: only their differences mean anything."""
        return self.now.timestamp()
