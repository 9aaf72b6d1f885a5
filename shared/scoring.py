"""Trimaran's scoring strategies (scheduler-plugins ``pkg/trimaran``, KEP 61) on loadsched's
annotations. Pure; scores are on kube-scheduler's 0..100 scale.

TargetLoadPacking, with ``U`` the node's predicted CPU use in percent (its measured average,
plus the pods bound since the metric's sample or within ``REPORTING_INTERVAL`` before it,
plus the pod being placed, each as Trimaran predicts a pod's CPU) and ``T`` the target::

    U ≤ T:        round((100 - T) · U / T + T)      rising from T (empty) to 100 (at target)
    T < U ≤ 100:  round(T · (100 - U) / (100 - T))  falling from T to 0 (full)
    U > 100:      0

A node without the metric scores 0 (Trimaran avoids it). The node's size is its CPU capacity,
else its allocatable (:meth:`shared.estimation.NodeSize.capacity`); a node with neither scores
0, where Trimaran, reading capacity only, scores it as if empty (``T``).

LoadVariationRiskBalancing, per resource with ``μ = (average used + pod's request) / size``
and ``σ = stddev / size``, both clamped to [0, 1]::

    risk = (μ + clamp(margin · σ^(1/sensitivity), 0, 1)) / 2,  score = (1 - risk) · 100

The node's score is the lower of the CPU and memory scores when both are known, the one known
otherwise, 0 when neither is; rounded half away from zero (Go's ``math.Round``). The size is
the allocatable, else the capacity; a resource with neither, or with no fresh average, is left
out (:func:`shared.strategies.strategy_inputs`), where Trimaran scores the first 0 and reads the
second as an average of 0. The request counts sidecars as kube-scheduler does; Trimaran takes
the largest of the containers' sum and each init container. A zero size given here scores 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta

from shared.placement_policy import LoadVariationRiskBalancing

MAX_SCORE = 100
REPORTING_INTERVAL = timedelta(seconds=60)
"""Trimaran's ``metricsAgentReportingIntervalSeconds``: a pod bound this long before a sample
may still be missing from it."""


def go_round(value: float) -> int:
    """Go's ``math.Round``: half away from zero (Python's ``round`` goes half to even)."""
    return int(math.floor(abs(value) + 0.5)) * (1 if value >= 0 else -1)


def target_load_packing(predicted_percent: float, target: float) -> int:
    """TargetLoadPacking's score of a node whose predicted CPU use is ``predicted_percent``."""
    if not math.isfinite(predicted_percent):
        return 0
    if predicted_percent > target:
        if predicted_percent > MAX_SCORE:
            return 0
        return go_round(target * (MAX_SCORE - predicted_percent) / (MAX_SCORE - target))
    return go_round((MAX_SCORE - target) * predicted_percent / target + target)


@dataclass(frozen=True, slots=True)
class ResourceUse:
    """One resource of a node as LoadVariationRiskBalancing reads it (absolute units)."""

    average: float
    stddev: float
    size: float


def risk_score(use: ResourceUse, request: float, settings: LoadVariationRiskBalancing) -> float:
    """LoadVariationRiskBalancing's score of one resource, before rounding."""
    size = use.size
    if not (math.isfinite(size) and size > 0):
        return 0.0
    average = _clamp(use.average, 0.0, size)
    stddev = _clamp(use.stddev, 0.0, size)
    mu = _clamp((average + max(request, 0.0)) / size, 0.0, 1.0)
    sigma = _clamp(stddev / size, 0.0, 1.0)
    sigma = sigma ** (1 / settings.sensitivity)
    sigma = _clamp(sigma * settings.margin, 0.0, 1.0)
    risk = (mu + sigma) / 2
    return (1.0 - risk) * MAX_SCORE


def risk_balancing(
    cpu: ResourceUse | None,
    memory: ResourceUse | None,
    request_cpu: float,
    request_memory: float,
    settings: LoadVariationRiskBalancing,
) -> int:
    """LoadVariationRiskBalancing's node score: the lower resource score of those known."""
    scores = []
    if cpu is not None:
        scores.append(risk_score(cpu, request_cpu, settings))
    if memory is not None:
        scores.append(risk_score(memory, request_memory, settings))
    if not scores:
        return 0
    return go_round(min(scores))


def _clamp(value: float, low: float, high: float) -> float:
    if math.isnan(value):
        return low
    return max(min(value, high), low)
