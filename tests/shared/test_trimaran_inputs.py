"""Where loadsched reads Trimaran's inputs as Trimaran does, and where it reads them as
kube-scheduler does, each decision a hand-worked case (scheduler-plugins ``pkg/trimaran``; the
list is in docs/configure.md, "Inputs read differently from Trimaran")."""

import json
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from typing import Any

import pytest

from shared.annotations import Sample, Unknown
from shared.estimation import NodeSize, Placement, predicted_cpu
from shared.placement_policy import TargetLoadPacking
from shared.pods import POD_DECODER, Pod
from shared.policy import parse_policy
from shared.rules import LoadRules, MetricRule
from shared.strategies import (
    Packed,
    _risk_use,
    demand_of,
    in_reporting_window,
    pod_score,
    strategy_inputs,
)

SAMPLE_AT = datetime.fromtimestamp(1000, UTC)


def packing(target: float = 40) -> LoadRules:
    spec: dict[str, Any] = {
        "syncPolicy": [{"name": "cpu_usage_avg_5m", "period": "3m"}],
        "predicate": [{"name": "cpu_usage_avg_5m", "maxLimitPecent": 0.9}],
        "priority": [{"name": "cpu_usage_avg_5m", "weight": 1}],
        "scoring": {"targetLoadPacking": {"targetUtilization": target}},
    }
    return LoadRules.from_policy(parse_policy({"spec": spec}))


def pod_with(*, cpu_limit: str) -> Pod:
    body = {
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": cpu_limit}}}]},
    }
    return POD_DECODER.decode(json.dumps(body))


# Kept as kube-scheduler reads it (not as Trimaran does) ------------------------------------


def test_a_node_without_capacity_is_sized_by_its_allocatable_for_packing() -> None:
    """Capacity missing, allocatable 4 cores, 50 % used, the pod predicted 0.5 core, T = 40.
    Trimaran reads capacity only: it predicts 0 % and scores the node as if empty, 40 (the
    node would draw pods while its size is unknown). loadsched falls back to allocatable:
    (2 + 0.5) / 4 = 62.5 % → round(40 · 37.5 / 60) = 25."""
    rules = packing()
    size = NodeSize(capacity_cpu=None, allocatable_cpu=4)
    read = {"cpu_usage_avg_5m": (Sample(0.5, SAMPLE_AT), 0.0)}
    strategy = strategy_inputs(size, rules, [], read)
    assert strategy == Packed(used=2.0, capacity=4.0)
    demand = demand_of(pod_with(cpu_limit="500m"), rules)
    assert demand.predicted_cpu == 0.5
    assert pod_score(strategy, 0, 0.0, rules, demand) == 25


def test_a_node_with_no_size_at_all_scores_0_for_packing() -> None:
    """Neither capacity nor allocatable: Trimaran scores T (40), loadsched 0 (no node known
    to be empty is preferred to one whose size is unknown)."""
    rules = packing()
    read = {"cpu_usage_avg_5m": (Sample(0.5, SAMPLE_AT), 0.0)}
    strategy = strategy_inputs(NodeSize(), rules, [], read)
    assert pod_score(strategy, 0, 0.0, rules, demand_of(pod_with(cpu_limit="1"), rules)) == 0


AVERAGE = MetricRule("cpu_usage_avg_5m", 0.0, timedelta(minutes=5), "cpu")
STDDEV = MetricRule("cpu_usage_stddev_5m", 0.0, timedelta(minutes=5), "cpu")


def test_risk_reads_allocatable_then_capacity_and_no_average_leaves_the_resource_out() -> None:
    """LoadVariationRiskBalancing: allocatable reads 0, capacity 4 cores, 50 % ± 10 %.
    Trimaran scores the resource 0 (and so the node); loadsched sizes it by its capacity:
    μ = 2 cores of 4, σ = 0.4 core. A standard deviation of 60 % with no fresh average:
    Trimaran takes the average as 0 (μ = the request alone, the node looks idle); loadsched
    leaves the resource out, so the other resource decides."""
    read = {
        AVERAGE.name: (Sample(0.5, SAMPLE_AT), 0.0),
        STDDEV.name: (Sample(0.1, SAMPLE_AT), 0.0),
    }
    size = NodeSize.from_status({"cpu": "4"}, {"cpu": "0"})
    use = _risk_use((AVERAGE, STDDEV), size.allocatable("cpu"), read)
    assert use is not None
    assert (use.average, round(use.stddev, 9), use.size) == (2.0, 0.4, 4.0)
    missing: dict[str, tuple[Sample | Unknown, float]] = {
        AVERAGE.name: (Unknown("stale"), 0.0),
        STDDEV.name: (Sample(0.6, SAMPLE_AT), 0.0),
    }
    assert _risk_use((AVERAGE, STDDEV), 4.0, missing) is None


def test_sidecars_count_in_the_request_risk_balancing_reads() -> None:
    """A 500m container and a 250m sidecar (an init container with restartPolicy Always):
    kube-scheduler requests 750m for the pod, and so does loadsched's risk balancing;
    Trimaran takes max(500m, 250m) = 500m. TargetLoadPacking's prediction reads the regular
    containers only, on both sides (500m × 1.5)."""
    pod = POD_DECODER.decode(
        b'{"metadata":{"name":"p"},"spec":{"containers":[{"name":"app","resources":'
        b'{"requests":{"cpu":"500m"}}}],"initContainers":[{"name":"proxy","restartPolicy":'
        b'"Always","resources":{"requests":{"cpu":"250m"}}}]}}'
    )
    demand = demand_of(pod, packing())
    assert demand.cpu == 0.75
    assert demand.predicted_cpu == 0.75  # 500m × requestsMultiplier 1.5: the sidecar unread


# Read as Trimaran reads it --------------------------------------------------------------


@pytest.mark.parametrize(
    ("requests", "limits", "millicores"),
    [
        ({"cpu": Fraction(3, 1000)}, {}, 5),  # 3m × 1.5 = 4.5: half away from zero, as Go
        ({"cpu": Fraction(5, 1000)}, {}, 8),  # 7.5 → 8
        ({"cpu": Fraction(1, 1000)}, {}, 2),  # 1.5 → 2 (half to even would give 2 too)
        ({"cpu": Fraction(5, 1000)}, {"cpu": Fraction(1, 3000)}, 1),  # a limit, rounded up
    ],
)
def test_predicted_cpu_rounds_as_trimaran(
    requests: dict[str, Fraction], limits: dict[str, Fraction], millicores: int
) -> None:
    settings = TargetLoadPacking()
    assert predicted_cpu([(requests, limits)], {}, settings) * 1000 == pytest.approx(millicores)


@pytest.mark.parametrize(
    ("default", "millicores"), [(0.0005, 1), (0.0012, 2), (0.1, 100), (1.0, 1000)]
)
def test_the_default_request_is_rounded_up_to_a_millicore(default: float, millicores: int) -> None:
    """Trimaran reads ``defaultRequests`` as a quantity's MilliValue: 500u is 1m, 1200u 2m."""
    settings = TargetLoadPacking(defaultRequests=default)
    assert predicted_cpu([({}, {})], {}, settings) * 1000 == pytest.approx(millicores)


@pytest.mark.parametrize(
    ("bound_before", "counted"),
    [
        (timedelta(seconds=-5), True),  # bound after the sample
        (timedelta(seconds=0), True),
        (timedelta(seconds=59), True),
        (timedelta(seconds=59.6), False),  # at 940.4 s: whole seconds 1000 - 940 = 60
        (timedelta(seconds=60), False),
        (timedelta(seconds=58.5), True),  # at 941.5 s: 1000 - 941 = 59
    ],
)
def test_the_reporting_window_is_counted_in_whole_seconds(
    bound_before: timedelta, counted: bool
) -> None:
    """Trimaran counts a pod bound before the sample iff ``End - bind.Unix() < 60``."""
    assert in_reporting_window(SAMPLE_AT - bound_before, SAMPLE_AT) is counted


def test_a_pod_bound_in_the_last_second_of_the_window_is_not_predicted() -> None:
    """Sample at 1000 s, 30 % of 4 cores, a pod predicted 1 core bound at 940.4 s, the next
    pod 0.2 core, T = 40: Trimaran leaves the pod out, 1.4 / 4 = 35 % → 93; so does
    loadsched (counting it would give 2.4 / 4 = 60 % → 27)."""
    rules = packing()
    read = {"cpu_usage_avg_5m": (Sample(0.3, SAMPLE_AT), 0.0)}
    bound = Placement(
        "u1", SAMPLE_AT - timedelta(seconds=59.6), cpu=1.0, memory=0.0, predicted_cpu=1.0
    )
    strategy = strategy_inputs(NodeSize(capacity_cpu=4), rules, [bound], read)
    demand = demand_of(pod_with(cpu_limit="200m"), rules)
    assert pod_score(strategy, 0, 0.0, rules, demand) == 93
