"""Trimaran's strategies: TargetLoadPacking and LoadVariationRiskBalancing, worked by hand from
their published definitions (scheduler-plugins pkg/trimaran, KEP 61), edge cases included."""

import math

import pytest

from shared.placement_policy import LoadVariationRiskBalancing
from shared.scoring import ResourceUse, go_round, risk_balancing, risk_score, target_load_packing


@pytest.mark.parametrize(
    ("percent", "target", "score"),
    [
        # at or under the target: (100 - T)·U/T + T, from T (empty) up to 100 (at the target)
        (0, 40, 40),
        (10, 40, 55),
        (20, 40, 70),
        (40, 40, 100),
        (15, 40, 63),  # 62.5 rounds half away from zero, as Go's math.Round does
        # a 50 % target: empty 50, at the target 100, then down to 0 when full (75 %: 25)
        (0, 50, 50),
        (50, 50, 100),
        (75, 50, 25),
        (100, 50, 0),
        # above the target: T·(100 - U)/(100 - T), down to 0 when full
        (50, 40, 33),
        (70, 40, 20),
        (100, 40, 0),
        # above 100 %: the minimum score
        (100.5, 40, 0),
        (250, 40, 0),
        (math.inf, 40, 0),
        (math.nan, 40, 0),
    ],
)
def test_target_load_packing(percent: float, target: float, score: int) -> None:
    assert target_load_packing(percent, target) == score


def test_packing_prefers_the_node_nearest_under_the_target() -> None:
    scores = {u: target_load_packing(u, 40) for u in (5, 25, 39, 45, 80)}
    assert max(scores, key=scores.__getitem__) == 39
    assert scores[45] < scores[25] < scores[39]  # over the target falls off steeply


def settings(margin: float = 1, sensitivity: float = 1) -> LoadVariationRiskBalancing:
    return LoadVariationRiskBalancing(margin=margin, sensitivity=sensitivity)


@pytest.mark.parametrize(
    ("use", "demand", "margin", "sensitivity", "score"),
    [
        # μ = (avg + request)/size, σ = stddev/size; risk = (μ + margin·σ^(1/sensitivity))/2
        (ResourceUse(2, 1, 10), 0, 1, 1, 85.0),  # μ .2, σ .1: risk .15
        (ResourceUse(2, 1, 10), 1, 1, 1, 80.0),  # the request adds to μ: .3
        # the README's recommended sensitivity 2: σ .16 → √ .4; μ .3 → risk .35
        (ResourceUse(3, 1.6, 10), 0, 1, 2, 65.0),
        (ResourceUse(2, 1, 10), 0, 2, 1, 80.0),  # margin 2 doubles σ: risk .2
        (ResourceUse(2, 8, 10), 0, 2, 1, 40.0),  # margin·σ 1.6 is clamped to 1: risk .6
        (ResourceUse(12, 0, 10), 0, 1, 1, 50.0),  # average above size: μ clamped to 1
        (ResourceUse(9, 0, 10), 5, 1, 1, 50.0),  # average + request above size: μ 1
        (ResourceUse(-3, -1, 10), 0, 1, 1, 100.0),  # negatives are clamped to 0
        (ResourceUse(0, 0, 10), 0, 1, 1, 100.0),  # idle node, no variation
        (ResourceUse(5, 2, 0), 0, 1, 1, 0.0),  # zero size: invalid capacity, 0
        (ResourceUse(5, 2, -4), 0, 1, 1, 0.0),
        (ResourceUse(5, 2, math.nan), 0, 1, 1, 0.0),
    ],
)
def test_risk_score(
    use: ResourceUse, demand: float, margin: float, sensitivity: float, score: float
) -> None:
    assert risk_score(use, demand, settings(margin, sensitivity)) == pytest.approx(score)


def test_risk_balancing_takes_the_worse_resource_when_both_are_known() -> None:
    cpu = ResourceUse(2, 1, 10)  # 85
    memory = ResourceUse(6, 2, 10)  # μ .6 σ .2: risk .4 → 60
    assert risk_balancing(cpu, memory, 0, 0, settings()) == 60
    assert risk_balancing(cpu, None, 0, 0, settings()) == 85  # only one known: that one
    assert risk_balancing(None, memory, 0, 0, settings()) == 60
    assert risk_balancing(None, None, 0, 0, settings()) == 0  # no metrics: minimum


def test_risk_balancing_rounds_like_go() -> None:
    # μ .25, σ .0: risk .125 → 87.5 → 88 (Python's round() would give 88 too; 0.5 cases:)
    assert risk_balancing(ResourceUse(2.5, 0, 10), None, 0, 0, settings()) == 88
    # μ .05: risk .025 → 97.5 → 98 (round half to even would give 98; 96.5 → 97 below)
    assert risk_balancing(ResourceUse(0.7, 0, 10), None, 0, 0, settings()) == 97  # 96.5
    assert go_round(96.5) == 97 and round(96.5) == 96
