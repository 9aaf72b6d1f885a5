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


GO_DURATION_PATTERN = r"^[-+]?(0|((\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h))+)$"
"""What :func:`parse_duration` accepts, as a JSON Schema ``pattern`` (ECMA-262)."""


def format_duration(value: timedelta) -> str:
    """``value`` as the shortest Go duration that reads back to it (millisecond precision):
    ``30s``, ``5m``, ``1h30m``, ``1.5s``, ``250ms``, ``0s``."""
    total = round(value.total_seconds() * 1000)
    sign, total = ("-" if total < 0 else ""), abs(total)
    hours, total = divmod(total, 3_600_000)
    minutes, total = divmod(total, 60_000)
    seconds, millis = divmod(total, 1000)
    parts = [f"{hours}h" if hours else "", f"{minutes}m" if minutes else ""]
    if seconds and millis:
        parts.append(f"{seconds}.{millis:03d}".rstrip("0") + "s")
    elif seconds:
        parts.append(f"{seconds}s")
    elif millis:
        parts.append(f"{millis}ms")
    return sign + ("".join(parts) or "0s")
