"""Kubernetes resource quantities (``500m``, ``2Gi``, ``1.5``, ``1e3``) as exact fractions, and
resource lists with the arithmetic quotas need. Pure; no I/O."""

from __future__ import annotations

import re
from collections.abc import Mapping
from fractions import Fraction

_SUFFIXES: dict[str, Fraction] = {
    "": Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}
_QUANTITY = re.compile(
    r"([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)"
)

ResourceList = dict[str, Fraction]


def parse_quantity(text: str | int | float) -> Fraction:
    """Parse a quantity exactly. Raises ``ValueError`` naming what is wrong."""
    if isinstance(text, bool):
        raise ValueError(f"invalid quantity {text!r}")
    if isinstance(text, int):
        return Fraction(text)
    if isinstance(text, float):
        return Fraction(str(text))
    match = _QUANTITY.fullmatch(text.strip())
    if match is None:
        raise ValueError(
            f"invalid quantity {text!r}: expected a number with an optional suffix, "
            "such as 500m or 2Gi"
        )
    number, exponent, suffix = match.groups()
    value = Fraction(number)
    if exponent:
        return value * Fraction(10) ** int(exponent[1:])
    return value * _SUFFIXES[suffix or ""]


def parse_resources(data: Mapping[str, object] | None, *, where: str) -> ResourceList:
    """A ``{resource: quantity}`` mapping; ``ValueError`` names ``where`` and the resource."""
    out: ResourceList = {}
    for name, raw in (data or {}).items():
        if not isinstance(raw, str | int | float):
            raise ValueError(f"{where}.{name}: invalid quantity {raw!r}")
        try:
            value = parse_quantity(raw)
        except ValueError as e:
            raise ValueError(f"{where}.{name}: {e}") from e
        if value < 0:
            raise ValueError(f"{where}.{name}: must not be negative, got {raw!r}")
        out[name] = value
    return out


def add(*lists: Mapping[str, Fraction]) -> ResourceList:
    total: ResourceList = {}
    for resources in lists:
        for name, value in resources.items():
            total[name] = total.get(name, Fraction(0)) + value
    return total


def subtract(have: Mapping[str, Fraction], take: Mapping[str, Fraction]) -> ResourceList:
    out = dict(have)
    for name, value in take.items():
        out[name] = out.get(name, Fraction(0)) - value
    return out


def to_quantity(value: Fraction) -> str:
    """The canonical Kubernetes spelling: whole numbers plain, else milli (``500m``), micro or
    nano units, rounded up to a whole nano."""
    for suffix, scale in (("", 1), ("m", 10**3), ("u", 10**6)):
        scaled = value * scale
        if scaled.denominator == 1:
            return f"{scaled.numerator}{suffix}"
    nano = value * 10**9
    return f"{-(-nano.numerator // nano.denominator)}n"


def format_quantity(name: str, value: Fraction) -> str:
    """Readable: CPU in cores or millicores, memory-like resources in Gi/Mi, others plain."""
    if name == "cpu":
        milli = value * 1000
        return (
            f"{milli.numerator // milli.denominator}m"
            if milli.denominator == 1 and milli % 1000
            else f"{float(value):g}"
        )
    if name in ("memory", "ephemeral-storage") or name.startswith("hugepages-"):
        for unit, size in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if value >= size:
                return f"{float(value / size):g}{unit}"
    return f"{float(value):g}"
