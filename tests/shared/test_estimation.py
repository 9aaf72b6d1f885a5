"""Estimation of just-placed pods: what a sample misses of the pods bound to its node, the
policy's fields, per-node limits, and Trimaran's prediction of a pod's CPU."""

from dataclasses import replace
from datetime import datetime, timedelta
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml

from shared.annotations import encode_metric
from shared.crane_policy import AVERAGE_DELAY, MAXIMUM_DELAY
from shared.errors import ConfigError
from shared.estimation import (
    Need,
    NodeSize,
    Placement,
    estimated_share,
    pod_estimate,
    predicted_cpu,
    still_held,
    uncovered,
)
from shared.load_model import WITH_POD, LoadRules, NodeLoad, evaluate, refusal_for
from shared.placement_policy import EstimationPolicy, TargetLoadPacking
from shared.policy import default_policy, load_policy, parse_policy
from tests.fakes.clock import NOW

MIN = timedelta(minutes=1)
SEC = timedelta(seconds=1)
GiB = 2**30


@pytest.mark.parametrize(
    ("bound_before_sample", "window", "part"),
    [
        (timedelta(seconds=-30), 5 * MIN, 1.0),  # bound after the sample: missing entirely
        (timedelta(0), 5 * MIN, 1.0),
        (1 * MIN, 5 * MIN, 0.8),  # in the 5-minute average for 1 of its 5 minutes
        (4 * MIN, 5 * MIN, 0.2),
        (5 * MIN, 5 * MIN, 0.0),  # the window covers it
        (10 * MIN, 5 * MIN, 0.0),
        (30 * 1 / 60 * MIN, 1 * MIN, 0.5),
    ],
)
def test_uncovered(bound_before_sample: timedelta, window: timedelta, part: float) -> None:
    assert uncovered(NOW - bound_before_sample, NOW, window) == pytest.approx(part)


def pod(bound_at: datetime, cpu: float = 0.0, memory: float = 0.0) -> Placement:
    return Placement(uid=str(bound_at), bound_at=bound_at, cpu=cpu, memory=memory)


def test_estimated_share_worked_example() -> None:
    """An 8-core node sampled at NOW; defaults 85 % CPU, startup 30 s; three pods of 2 cores
    each, none Ready: one bound after the sample (1.7 cores), one 1 minute before (taken as
    started 30 s later: 1.7 × 0.9), one 6 minutes before (covered):
    (1.7 + 1.53) / 8 = 0.40375."""
    pods = [pod(NOW + MIN, cpu=2), pod(NOW - MIN, cpu=2), pod(NOW - 6 * MIN, cpu=2)]
    share = estimated_share(
        pods, resource="cpu", sample_at=NOW, window=5 * MIN, size=8, policy=EstimationPolicy()
    )
    assert share == pytest.approx(0.40375)
    # with no startup allowance the window covers each pod from its binding: 1.7 × 0.8
    at_binding = EstimationPolicy.model_validate({"startup": "0s"})
    share = estimated_share(
        pods, resource="cpu", sample_at=NOW, window=5 * MIN, size=8, policy=at_binding
    )
    assert share == pytest.approx((1.7 + 1.36) / 8)


@pytest.mark.parametrize(
    ("started", "gone", "held"),
    [
        (-10 * MIN, -2 * MIN, 0.6),  # ran through the window until 2 of its 5 minutes ago
        (-10 * MIN, -6 * MIN, 0.0),  # left before the window
        (-3 * MIN, -1 * MIN, 0.4),  # started within the window, left within it
        (-10 * MIN, 1 * MIN, 1.0),  # left after the sample: the sample holds it whole
        (-1 * MIN, -2 * MIN, 0.0),  # left before it started
    ],
)
def test_still_held(started: timedelta, gone: timedelta, held: float) -> None:
    assert still_held(NOW + started, NOW + gone, NOW, 5 * MIN) == pytest.approx(held)


def test_a_pod_gone_is_taken_off_for_the_part_of_the_window_it_still_holds() -> None:
    """An 8-core node sampled at NOW: a 2-core pod bound an hour ago left 2 minutes before the
    sample (its 5-minute window holds it for 3 minutes: 1.7 × 0.6), and a 2-core pod bound after
    the sample (1.7): (1.7 - 1.02) / 8 = 0.085. Without ``subtractDeparted`` its index keeps no
    gone pods, so only the newcomer counts."""
    gone = replace(pod(NOW - 60 * MIN, cpu=2), ready_at=NOW - 59 * MIN, gone_at=NOW - 2 * MIN)
    pods = [gone, pod(NOW + MIN, cpu=2)]
    share = estimated_share(
        pods, resource="cpu", sample_at=NOW, window=5 * MIN, size=8, policy=EstimationPolicy()
    )
    assert share == pytest.approx(0.085)
    # never Ready, or a value that does not let go of it (a maximum): not taken off
    for others, releases in (([replace(gone, ready_at=None)], True), ([gone], False)):
        share = estimated_share(
            [*others, pods[1]],
            resource="cpu",
            sample_at=NOW,
            window=5 * MIN,
            size=8,
            policy=EstimationPolicy(),
            releases=releases,
        )
        assert share == pytest.approx(1.7 / 8)
    rules = policy(estimation={"enabled": True}, delay="0s")
    load = NodeLoad.from_annotations("n1", node(0.7), rules, SIZE)
    verdict = evaluate(load, rules, NOW + 3 * MIN, [gone])  # 0.70 - 0.1275 = 0.5725
    assert verdict.overload is None and verdict.placed == 0
    assert verdict.terms[0].estimated == pytest.approx(-0.1275)
    over = evaluate(NodeLoad.from_annotations("n1", node(0.8), rules, SIZE), rules, NOW, [gone])
    assert over.overload == (
        "Load[cpu_usage_avg_5m]=0.67250 of node[n1] is above 0.65 "
        "(0.80000 measured - 0.12750 estimated for pods gone that the sample still shows)"
    )
    little = evaluate(NodeLoad.from_annotations("n1", node(0.05), rules, SIZE), rules, NOW, [gone])
    assert little.terms[0].value == 0.0, "never below nothing"


@pytest.mark.parametrize(
    ("delay", "arrived", "departed"),
    [
        # window ending at the timestamp: the pods started a minute into it (covered 1/5), the
        # pod gone left 2 minutes before its end (held 3/5)
        ("0s", 2 * 0.85 * 0.8 / 8, 1.7 * 0.6 / 8),
        # ending 75 s before: the pods started after it, the pod gone left 45 s before its end
        # (held from its start: 4m15s of 5m)
        ("75s", 2 * 0.85 / 8, 1.7 * 0.85 / 8),
        # the default (43 s): the pods started 17 s before its end, the pod gone 77 s before
        (None, 2 * 0.85 * (1 - 17 / 300) / 8, 1.7 * (223 / 300) / 8),
        # ending 4 minutes before: the pod gone ran through all of it
        ("4m", 2 * 0.85 / 8, 1.7 / 8),
    ],
)
def test_a_sample_is_taken_as_ending_its_delay_before_its_timestamp(
    delay: str | None, arrived: float, departed: float
) -> None:
    """An 8-core node whose 5-minute average is stamped NOW: two 1-core pods Ready a minute
    before NOW, and a 2-core pod that left 2 minutes before NOW after an hour's run. The value
    was computed from usage up to ``delay`` before its stamp (scrape, rules, query), so the
    pods are held until the window really covers them, and the pod gone for as long as the
    window really holds it."""
    rules = policy(estimation={"enabled": True}, delay=delay)
    assert AVERAGE_DELAY == 43 * SEC, "the default case's figures are worked for 43 s"
    arrivals = [
        replace(pod(NOW - 70 * SEC, cpu=1), uid=f"p{i}", ready_at=NOW - MIN) for i in range(2)
    ]
    gone = replace(pod(NOW - 60 * MIN, cpu=2), ready_at=NOW - 59 * MIN, gone_at=NOW - 2 * MIN)
    load = NodeLoad.from_annotations("n1", node(0.5), rules, SIZE)
    assert evaluate(load, rules, NOW, arrivals).terms[0].estimated == pytest.approx(arrived)
    assert evaluate(load, rules, NOW, [gone]).terms[0].estimated == pytest.approx(-departed)
    # nothing depends on the time of reading
    later = evaluate(load, rules, NOW + 2 * MIN, arrivals).terms[0].estimated
    assert later == pytest.approx(arrived)


@pytest.mark.parametrize(
    ("ready_after_binding", "started_after_binding"),
    [
        (None, timedelta(seconds=30)),  # not Ready: the allowance
        (timedelta(seconds=12), timedelta(seconds=12)),  # Ready within it: then
        (timedelta(seconds=90), timedelta(seconds=30)),  # Ready later: the allowance still
        (timedelta(seconds=-5), timedelta(0)),  # a Ready time before the binding: the binding
    ],
)
def test_a_pod_starts_when_ready_at_the_latest_the_startup_after_binding(
    ready_after_binding: timedelta | None, started_after_binding: timedelta
) -> None:
    bound = NOW - MIN
    placed = Placement(
        uid="a",
        bound_at=bound,
        cpu=2,
        memory=0,
        ready_at=None if ready_after_binding is None else bound + ready_after_binding,
    )
    assert placed.started_at(timedelta(seconds=30)) == bound + started_after_binding
    # a 2-core pod on an 8-core node, 1-minute window sampled at NOW
    share = estimated_share(
        [placed], resource="cpu", sample_at=NOW, window=MIN, size=8, policy=EstimationPolicy()
    )
    missed = 1 - (MIN - started_after_binding) / MIN
    assert share == pytest.approx(1.7 * missed / 8)


def test_a_pod_that_requests_nothing_is_estimated_at_the_default() -> None:
    policy = EstimationPolicy.model_validate({"defaultRequest": {"memory": "1Gi"}})
    share = estimated_share(
        [pod(NOW + MIN)],
        resource="memory",
        sample_at=NOW,
        window=5 * MIN,
        size=4 * GiB,
        policy=policy,
    )
    assert share == pytest.approx(0.25)
    cpu = estimated_share(
        [pod(NOW + MIN)], resource="cpu", sample_at=NOW, window=5 * MIN, size=1, policy=policy
    )
    assert cpu == pytest.approx(0.25)  # 250m by default


@pytest.mark.parametrize(
    ("basis", "requested", "limit", "estimate"),
    [
        ("request", 1.0, 2.0, 0.85),  # the default reads the request only
        ("limit", 1.0, 2.0, 1.7),  # Koordinator: a pod allowed to burst is taken to burst
        ("limit", 1.0, 1.0, 0.85),
        ("limit", 1.0, 0.0, 0.85),  # unbounded: the request
        ("limit", 0.0, 0.0, 0.25),  # neither: the default
        ("limit", 0.0, 2.0, 1.7),
        ("limit", 0.9, 1.0, 0.85),  # 1.0 × 0.85 is below the limit and above the request
    ],
)
def test_the_estimate_from_request_or_limit(
    basis: str, requested: float, limit: float, estimate: float
) -> None:
    placed = Placement(uid="p", bound_at=NOW, cpu=requested, memory=0, cpu_limit=limit)
    policy = EstimationPolicy.model_validate({"basis": basis})
    assert pod_estimate(placed, "cpu", policy) == pytest.approx(estimate)


def test_a_factor_above_one_never_estimates_more_than_the_limit() -> None:
    placed = Placement(uid="p", bound_at=NOW, cpu=1.0, cpu_limit=1.2, memory=GiB)
    policy = EstimationPolicy.model_validate({"basis": "limit", "factors": {"cpu": 1.5}})
    assert pod_estimate(placed, "cpu", policy) == pytest.approx(1.2)
    assert pod_estimate(placed, "memory", policy) == pytest.approx(0.7 * GiB)


def test_zero_size_adds_nothing() -> None:
    share = estimated_share(
        [pod(NOW, cpu=1)],
        resource="cpu",
        sample_at=NOW,
        window=MIN,
        size=0,
        policy=EstimationPolicy(),
    )
    assert share == 0


def test_node_size_reads_capacity_then_allocatable() -> None:
    size = NodeSize.from_status({"cpu": "8", "memory": "32Gi"}, {"cpu": "7500m"})
    assert size.capacity("cpu") == 8 and size.allocatable("cpu") == 7.5
    assert size.allocatable("memory") == 32 * GiB  # no allocatable memory: capacity
    broken = NodeSize.from_status({"cpu": "lots", "memory": "0"}, None)
    assert broken.capacity("cpu") is None and broken.capacity("memory") is None


@pytest.mark.parametrize(
    ("containers", "millicores"),
    [
        ([({"cpu": Fraction(1, 2)}, {"cpu": Fraction(2)})], 2000),  # the limit wins
        ([({"cpu": Fraction(1, 2)}, {})], 750),  # request × 1.5
        ([({}, {})], 1000),  # neither: the default, 1 core
        ([({"memory": Fraction(GiB)}, {"memory": Fraction(GiB)})], 1000),  # no CPU at all
        ([({"cpu": Fraction(1, 3)}, {})], 501),  # MilliValue rounds 333.3m up: 334 × 1.5 = 501
    ],
)
def test_trimaran_predicted_cpu(containers: Any, millicores: int) -> None:
    assert predicted_cpu(containers, {}, TargetLoadPacking()) == pytest.approx(millicores / 1000)


def test_trimaran_predicted_cpu_adds_overhead_and_sums_containers() -> None:
    containers = [({"cpu": Fraction(1)}, {}), ({}, {"cpu": Fraction(1, 4)})]
    assert predicted_cpu(containers, {"cpu": Fraction(1, 10)}, TargetLoadPacking()) == (
        pytest.approx(1.5 + 0.25 + 0.1)
    )


def policy(delay: str | None = None, **spec: Any) -> LoadRules:
    """Crane's 5-minute averages; ``delay`` sets each one's ``syncPolicy[].delay``."""
    sync: list[dict[str, Any]] = [
        {"name": "cpu_usage_avg_5m", "period": "3m"},
        {"name": "mem_usage_avg_5m", "period": "3m"},
    ]
    base: dict[str, Any] = {
        "syncPolicy": [s if delay is None else {**s, "delay": delay} for s in sync],
        "predicate": [
            {"name": "cpu_usage_avg_5m", "maxLimitPecent": 0.65},
            {"name": "mem_usage_avg_5m", "maxLimitPecent": 0.65},
        ],
        "priority": [{"name": "cpu_usage_avg_5m", "weight": 1}],
    }
    base.update(spec)
    return LoadRules.from_policy(parse_policy({"spec": base}))


SIZE = NodeSize(capacity_cpu=8, capacity_memory=32 * GiB)


def node(cpu: float, mem: float = 0.1, **extra: str) -> dict[str, str]:
    return {
        "cpu_usage_avg_5m": encode_metric(cpu, NOW),
        "mem_usage_avg_5m": encode_metric(mem, NOW),
        **extra,
    }


def test_estimation_rejects_a_node_its_sample_shows_below_the_limit() -> None:
    """0.50 measured + 2 pods of 1 core bound since: 2 × 0.85 / 8 = 0.2125 → 0.7125 > 0.65."""
    rules = policy(estimation={"enabled": True})
    load = NodeLoad.from_annotations("n1", node(0.5), rules, SIZE)
    placed = [pod(NOW + MIN, cpu=1), pod(NOW + 2 * MIN, cpu=1)]
    verdict = evaluate(load, rules, NOW + 3 * MIN, placed)
    assert verdict.overload == (
        "Load[cpu_usage_avg_5m]=0.71250 of node[n1] is above 0.65 "
        "(0.50000 measured + 0.21250 estimated for pods the sample does not show yet)"
    )
    assert verdict.placed == 2
    cpu = verdict.terms[0]
    assert (cpu.measured, cpu.decided) == (0.5, True)
    assert cpu.estimated == pytest.approx(0.2125)
    # score: (1 - 0.7125) × 100 = 28
    assert verdict.score == 28


def test_the_pod_being_placed_must_fit_in_the_room_left() -> None:
    """0.40 measured + 1 pod of 1 core bound since (0.10625) leaves 0.65 - 0.50625 = 0.14375
    of 8 cores, 1.15 cores: a pod estimated at 1.15 fits (the limit is strict), one at 1.16
    does not; memory leaves (0.65 - 0.1) × 32 GiB less the pod's default 200Mi."""
    rules = policy(estimation={"enabled": True})
    load = NodeLoad.from_annotations("n1", node(0.4), rules, SIZE)
    verdict = evaluate(load, rules, NOW + MIN, [pod(NOW + MIN, cpu=1)])
    assert verdict.overload is None
    rooms = {room.resource: room for room in verdict.headrooms}
    assert rooms["cpu"].left == pytest.approx(1.15)
    assert rooms["memory"].left == pytest.approx(0.55 * 32 * GiB - 200 * 2**20)
    assert refusal_for(verdict, Need(1.15 - 1e-9, GiB), "n1") is None
    message, reason = refusal_for(verdict, Need(1.16, GiB), "n1") or ("", ("", ""))
    assert reason == ("cpu_usage_avg_5m", WITH_POD)
    assert message == (
        "Load[cpu_usage_avg_5m]=0.65125 of node[n1] with this pod is above 0.65 "
        "(0.40000 measured + 0.10625 estimated for pods the sample does not show yet "
        "+ 0.14500 this pod)"
    )
    assert refusal_for(verdict, Need(0.1, 18 * GiB), "n1") is not None  # memory: 0.5625 > 0.55


def test_the_tightest_predicate_of_a_resource_sets_its_room() -> None:
    """Two CPU predicates: 0.30 of 0.65 leaves 2.8 cores, 0.60 of a node's own 0.70 leaves
    0.8; the room is 0.8, and a value that cannot be read leaves no room to check."""
    rules = policy(
        estimation={"enabled": True},
        syncPolicy=[
            {"name": "cpu_usage_avg_5m", "period": "3m"},
            {"name": "cpu_usage_max_avg_1h", "period": "3m"},
            {"name": "mem_usage_avg_5m", "period": "3m"},
        ],
        predicate=[
            {"name": "cpu_usage_avg_5m", "maxLimitPecent": 0.65},
            {"name": "cpu_usage_max_avg_1h", "maxLimitPecent": 0.9},
        ],
    )
    annotations = {
        **node(0.3),
        "cpu_usage_max_avg_1h": encode_metric(0.6, NOW),
        "loadsched.io/predicate-limits": '{"cpu_usage_max_avg_1h": 0.7}',
    }
    verdict = evaluate(NodeLoad.from_annotations("n1", annotations, rules, SIZE), rules, NOW)
    assert [(r.resource, r.metric, r.limit) for r in verdict.headrooms] == [
        ("cpu", "cpu_usage_max_avg_1h", 0.7)
    ]
    assert verdict.headrooms[0].left == pytest.approx(0.8)
    unknown = {**node(0.3), "cpu_usage_max_avg_1h": "garbage"}
    verdict = evaluate(NodeLoad.from_annotations("n1", unknown, rules, SIZE), rules, NOW)
    assert verdict.headrooms[0].metric == "cpu_usage_avg_5m"


def test_no_room_is_kept_without_estimation_or_for_a_refused_node() -> None:
    off = policy()
    assert evaluate(NodeLoad.from_annotations("n1", node(0.4), off, SIZE), off, NOW).headrooms == ()
    on = policy(estimation={"enabled": True})
    over = evaluate(NodeLoad.from_annotations("n1", node(0.7), on, SIZE), on, NOW)
    assert over.overload is not None and over.headrooms == ()
    unsized = evaluate(NodeLoad.from_annotations("n1", node(0.4), on), on, NOW)
    assert unsized.headrooms == ()


def test_estimation_off_ignores_placements() -> None:
    rules = policy()
    load = NodeLoad.from_annotations("n1", node(0.5), rules, SIZE)
    verdict = evaluate(load, rules, NOW, [pod(NOW + MIN, cpu=4)])
    assert verdict.overload is None and verdict.score == 50 and verdict.placed == 0


def test_estimation_needs_the_node_size() -> None:
    rules = policy(estimation={"enabled": True})
    load = NodeLoad.from_annotations("n1", node(0.5), rules)  # size unknown
    assert evaluate(load, rules, NOW, [pod(NOW + MIN, cpu=4)]).overload is None


def test_a_stale_value_is_not_estimated() -> None:
    """A pod of 8 cores bound after the sample adds 8 × 0.85 / 8 = 0.85 to a fresh value; to a
    stale one it adds nothing (fail-open then skips the value, so the verdict alone would not
    tell)."""
    rules = policy(estimation={"enabled": True})
    load = NodeLoad.from_annotations("n1", node(0.5), rules, SIZE)
    fresh = evaluate(load, rules, NOW + MIN, [pod(NOW + MIN, cpu=8)]).terms[0]
    assert fresh.state == "fresh" and fresh.estimated == pytest.approx(0.85)
    later = NOW + 9 * MIN  # 3m period + 5m: stale
    verdict = evaluate(load, rules, later, [pod(later, cpu=8)])
    cpu = verdict.terms[0]
    assert (cpu.metric, cpu.state) == ("cpu_usage_avg_5m", "stale")
    assert cpu.estimated == 0.0
    assert cpu.value is None
    assert verdict.overload is None


@pytest.mark.parametrize(
    ("limits", "overloaded", "error"),
    [
        ('{"cpu_usage_avg_5m": 0.8}', False, None),  # this node may run hotter
        ('{"cpu_usage_avg_5m": 0.5}', True, None),
        ('{"cpu_usage_avg_5m": 0}', False, None),  # 0: off on this node
        ('{"cpu_usage_avg_1h": 0.8}', True, "is not a predicate metric"),
        ('{"cpu_usage_avg_5m": 1.5}', True, "must be a fraction between 0 and 1"),
        ('{"cpu_usage_avg_5m": "0.8"}', True, "must be a fraction between 0 and 1"),
        ('{"cpu_usage_avg_5m": true}', True, "must be a fraction between 0 and 1"),
        ("[0.8]", True, "must be a JSON object"),
        ("0.8,", True, "not JSON"),
        ('{"cpu_usage_avg_5m": NaN}', True, "must be a fraction between 0 and 1"),
    ],
)
def test_per_node_limits(limits: str, overloaded: bool, error: str | None) -> None:
    rules = policy()
    annotations = {**node(0.7), "loadsched.io/predicate-limits": limits}
    verdict = evaluate(NodeLoad.from_annotations("n1", annotations, rules), rules, NOW)
    assert (verdict.overload is not None) == overloaded
    if error is None:
        assert verdict.limits_error is None
        assert verdict.terms[0].limit_from == "node"
    else:
        assert verdict.limits_error is not None and error in verdict.limits_error
        assert verdict.terms[0].limit_from == "policy"  # ignored as a whole


@pytest.mark.parametrize(
    ("spec", "path", "message"),
    [
        ({"estimation": {"factors": {"cpu": 5}}}, "spec.estimation.factors.cpu", "less than"),
        ({"estimation": {"factors": {"gpu": 1}}}, "spec.estimation.factors.gpu", "unknown field"),
        (
            {"estimation": {"defaultRequest": {"memory": "lots"}}},
            "spec.estimation.defaultRequest.memory",
            "quantity",
        ),
        (
            {"scoring": {"targetLoadPacking": {"targetUtilization": 100}}},
            "spec.scoring.targetLoadPacking.targetUtilization",
            "less than 100",
        ),
        (
            {"scoring": {"targetLoadPacking": {"metric": "cpu_usage_avg_1h"}}},
            "spec.scoring.targetLoadPacking.metric",
            "no syncPolicy entry",
        ),
        (
            {"scoring": {"targetLoadPacking": {"metric": "mem_usage_avg_5m"}}},
            "spec.scoring.targetLoadPacking.metric",
            "must measure cpu",
        ),
        (
            {"scoring": {"loadVariationRiskBalancing": {"sensitivity": 0}}},
            "spec.scoring.loadVariationRiskBalancing.sensitivity",
            "greater than 0",
        ),
        (
            {"scoring": {"loadVariationRiskBalancing": {}}},
            "spec.scoring.loadVariationRiskBalancing.cpu.stddev",
            "no syncPolicy entry",
        ),
        (
            {"scoring": {"targetLoadPacking": {}, "loadVariationRiskBalancing": {}}},
            "spec.scoring",
            "not both",
        ),
        ({"estimation": {"startup": "2h"}}, "spec.estimation.startup", "between 0s and 1h"),
        ({"estimation": {"startup": "-5s"}}, "spec.estimation.startup", ""),
        ({"estimation": {"startup": 30}}, "spec.estimation.startup", "Go duration"),
        ({"estimation": {"basis": "limits"}}, "spec.estimation.basis", "'request' or 'limit'"),
        (
            {"estimation": {"subtractDeparted": "sometimes"}},
            "spec.estimation.subtractDeparted",
            "valid boolean",
        ),
        (
            {"estimation": {"whenNoNodeHasRoom": "queue"}},
            "spec.estimation.whenNoNodeHasRoom",
            "'place' or 'wait'",
        ),
        (
            {"syncPolicy": [{"name": "cpu_usage_avg_5m", "period": "3m", "window": "0s"}]},
            "spec.syncPolicy[0].window",
            "must be > 0",
        ),
        (
            {"syncPolicy": [{"name": "cpu_usage_avg_5m", "period": "3m", "resource": "gpu"}]},
            "spec.syncPolicy[0].resource",
            "",
        ),
        (
            {"syncPolicy": [{"name": "cpu_usage_avg_5m", "period": "3m", "delay": "-5s"}]},
            "spec.syncPolicy[0].delay",
            "between 0s and 1h",
        ),
        (
            {"syncPolicy": [{"name": "cpu_usage_avg_5m", "period": "3m", "delay": "2h"}]},
            "spec.syncPolicy[0].delay",
            "between 0s and 1h",
        ),
        (
            {"syncPolicy": [{"name": "cpu_usage_avg_5m", "period": "3m", "delay": 75}]},
            "spec.syncPolicy[0].delay",
            "Go duration",
        ),
    ],
)
def test_bad_fields_are_named(spec: dict[str, Any], path: str, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        policy(**spec)
    assert raised.value.field == path
    assert message in str(raised.value)


def test_defaults_read_from_metric_names() -> None:
    rules = policy(estimation={"enabled": True, "factor": 0.5})
    cpu = rules.predicates[0]
    assert (cpu.resource, cpu.coverage) == ("cpu", 5 * MIN)
    assert rules.estimation is not None
    assert rules.estimation.factor_of("cpu") == 0.5  # the earlier single factor still reads
    # retention: the startup allowance + the longest window + period + 5m of the metrics
    assert rules.estimation.startup == timedelta(seconds=30)
    # ... + how long before its timestamp the window ends
    assert cpu.delay == AVERAGE_DELAY
    assert rules.retention == timedelta(seconds=30) + AVERAGE_DELAY + 5 * MIN + 3 * MIN + 5 * MIN
    assert not policy().reads_pods
    assert cpu.releases, "an average lets go of a pod a window after it left"
    crane = LoadRules.from_policy(default_policy())
    held = {r.name: r.releases for r in crane.predicates}
    assert held == {
        "cpu_usage_avg_5m": True,
        "cpu_usage_max_avg_1h": False,  # a maximum holds a pod's peak for an hour
        "mem_usage_avg_5m": True,
        "mem_usage_max_avg_1h": False,
    }
    # crane's maxima are evaluated every 5 minutes over the averages: later than them
    delays = {r.name: r.delay for r in crane.predicates}
    assert delays == {
        "cpu_usage_avg_5m": AVERAGE_DELAY,
        "cpu_usage_max_avg_1h": MAXIMUM_DELAY,
        "mem_usage_avg_5m": AVERAGE_DELAY,
        "mem_usage_max_avg_1h": MAXIMUM_DELAY,
    }
    assert MAXIMUM_DELAY > AVERAGE_DELAY > timedelta(0)
    given = policy(delay="20s", estimation={"enabled": True})
    assert [r.delay for r in given.predicates] == [20 * SEC, 20 * SEC]


ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("path", sorted((ROOT / "examples").glob("policy-*.yaml")), ids=str)
def test_example_policies_load_and_their_metrics_are_recorded(path: Path) -> None:
    loaded = load_policy(path)
    rules = yaml.safe_load((ROOT / "charts/loadsched/files/recording-rules.yaml").read_text())
    recorded = {r["record"] for group in rules["groups"] for r in group["rules"]}
    synced = {s.name for s in loaded.spec.sync_policy if s.promql is None}
    assert synced <= recorded
