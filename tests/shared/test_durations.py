from datetime import timedelta

import pytest

from shared.durations import parse_duration


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30s", timedelta(seconds=30)),
        ("3m", timedelta(minutes=3)),
        ("3h", timedelta(hours=3)),
        ("1h30m", timedelta(minutes=90)),
        ("1.5h", timedelta(minutes=90)),
        ("2h45m30s", timedelta(hours=2, minutes=45, seconds=30)),
        ("250ms", timedelta(milliseconds=250)),
        ("1500us", timedelta(microseconds=1500)),
        ("1500µs", timedelta(microseconds=1500)),
        (".5s", timedelta(milliseconds=500)),
        ("0", timedelta(0)),
        ("-3m", timedelta(minutes=-3)),
        ("+3m", timedelta(minutes=3)),
    ],
)
def test_parse_go_durations(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "3", "3 m", "m", "3min", "1d", "1h 30m", "h1", "--3m", "3M"])
def test_reject_what_go_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text)
