"""Go-style durations (``30s``, ``3m``, ``1h30m``, ``1.5h``, ``250ms``), as ``time.ParseDuration``
accepts them and crane's policy files use them."""

from __future__ import annotations

import re
from datetime import timedelta

_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,  # Go accepts both micro signs
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_WHOLE = re.compile(r"[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+")


def parse_duration(text: str) -> timedelta:
    """Parse a Go duration string. Raises ``ValueError`` naming what is wrong."""
    if text in ("0", "+0", "-0"):
        return timedelta(0)
    if not _WHOLE.fullmatch(text):
        raise ValueError(
            f"invalid duration {text!r}: expected a Go duration such as 30s, 3m, 1h30m"
        )
    sign = -1.0 if text.startswith("-") else 1.0
    seconds = sum(float(num) * _UNIT_SECONDS[unit] for num, unit in _PART.findall(text))
    return timedelta(seconds=sign * seconds)
