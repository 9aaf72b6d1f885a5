"""Statistics the benchmarks print beside their medians."""

from __future__ import annotations

import math
from collections.abc import Sequence


def median_interval(values: Sequence[float], least: float = 0.9) -> tuple[float, float, float]:
    """A distribution-free interval for the median of what ``values`` sample: the k-th
    smallest and k-th largest value, k as large as keeps the chance that the median lies
    between them at ``least`` or more (the binomial sign test); with that chance. Rounds are
    independent draws of one ratio, so the interval says how far this run's median may be from
    the ratio itself; with few rounds it is their whole range."""
    ordered, n = sorted(values), len(values)
    if not n:
        raise ValueError("no values")
    low, high, cover = ordered[0], ordered[-1], 1 - 2 * 0.5**n
    for k in range(2, n // 2 + 1):
        outside = 2 * sum(math.comb(n, i) for i in range(k)) / 2**n
        if 1 - outside < least:
            break
        low, high, cover = ordered[k - 1], ordered[n - k], 1 - outside
    return low, high, cover
