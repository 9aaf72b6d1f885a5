from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.annotations import encode_hot_value, encode_metric
from shared.crane_policy import HotValuePolicy
from shared.load_model import (
    MAX_CLOCK_SKEW,
    LoadRules,
    NodeLoad,
    evaluate,
    hot_value,
    ordered_sum,
    to_extender_score,
)
from shared.policy import parse_policy
from tests.fakes.clock import NOW


def rules(
    stale: str = "failOpen", predicate: list[Any] | None = None, priority: list[Any] | None = None
) -> LoadRules:
    spec = {
        "syncPolicy": [{"name": "cpu", "period": "3m"}, {"name": "mem", "period": "15m"}],
        "predicate": predicate
        if predicate is not None
        else [{"name": "cpu", "maxLimitPecent": 0.65}, {"name": "mem", "maxLimitPecent": 0.75}],
        "priority": priority
        if priority is not None
        else [{"name": "cpu", "weight": 0.2}, {"name": "mem", "weight": 0.3}],
        "staleData": stale,
    }
    return LoadRules.from_policy(parse_policy({"spec": spec}))


def at(value: float, age: timedelta = timedelta(0)) -> str:
    return encode_metric(value, NOW - age)


def load(**annotations: str) -> NodeLoad:
    raw = {("node_hot_value" if k == "hot" else k): v for k, v in annotations.items()}
    return NodeLoad.from_annotations("n3", raw, rules())


DEFAULT = rules()
CLOSED = rules("failClosed")


@pytest.mark.parametrize(
    ("annotations", "rule_set", "overload"),
    [
        # strict >: exactly at the limit passes
        ({"cpu": at(0.65), "mem": at(0.1)}, DEFAULT, None),
        (
            {"cpu": at(0.65001), "mem": at(0.1)},
            DEFAULT,
            "Load[cpu]=0.65001 of node[n3] is above 0.65",
        ),
        (
            {"cpu": at(0.812), "mem": at(0.9)},
            DEFAULT,
            "Load[cpu]=0.81200 of node[n3] is above 0.65",
        ),
        ({"cpu": at(0.1), "mem": at(0.9)}, DEFAULT, "Load[mem]=0.90000 of node[n3] is above 0.75"),
        # freshness: fresh iff now < ts + period + 5m (cpu: 3m + 5m = 8m)
        (
            {"cpu": at(0.9, timedelta(minutes=7, seconds=59))},
            DEFAULT,
            "Load[cpu]=0.90000 of node[n3] is above 0.65",
        ),
        ({"cpu": at(0.9, timedelta(minutes=8))}, DEFAULT, None),
        (
            {"mem": at(0.9, timedelta(minutes=19, seconds=59))},
            DEFAULT,
            "Load[mem]=0.90000 of node[n3] is above 0.75",
        ),
        ({"mem": at(0.9, timedelta(minutes=20))}, DEFAULT, None),
        # unknown values are skipped (fail-open) ...
        ({}, DEFAULT, None),
        ({"cpu": "garbage", "mem": "-1,2026-11-22T12:00:00Z"}, DEFAULT, None),
        ({"cpu": at(0.9, timedelta(hours=1))}, DEFAULT, None),
        # ... or reject (fail-closed)
        ({}, CLOSED, "Load[cpu] of node[n3] is missing; staleData is failClosed"),
        ({"cpu": at(0.1), "mem": "x"}, CLOSED, "Load[mem] of node[n3] is malformed"),
        (
            {"cpu": at(0.1, timedelta(minutes=9)), "mem": at(0.1)},
            CLOSED,
            "Load[cpu] of node[n3] is stale",
        ),
        # a limit of 0 turns the predicate off
        ({"cpu": at(0.99)}, rules(predicate=[{"name": "cpu", "maxLimitPecent": 0}]), None),
        (
            {"cpu": at(0.99)},
            rules("failClosed", predicate=[{"name": "cpu", "maxLimitPecent": 0}]),
            None,
        ),
    ],
)
def test_filter_table(
    annotations: dict[str, str], rule_set: LoadRules, overload: str | None
) -> None:
    verdict = evaluate(NodeLoad.from_annotations("n3", annotations, rule_set), rule_set, NOW)
    if overload is None:
        assert verdict.overload is None
    else:
        assert verdict.overload is not None
        assert verdict.overload.startswith(overload)


@pytest.mark.parametrize(
    ("annotations", "score", "extender"),
    [
        # S = (1-.2)*.2*100 + (1-.4)*.3*100 = 16 + 18 = 34; W = .5; int(68.0) = 68
        ({"cpu": at(0.2), "mem": at(0.4)}, 68, 7),
        # invalid metrics keep their weight: S = 16, W = .5 -> 32
        ({"cpu": at(0.2)}, 32, 3),
        ({"cpu": at(0.2), "mem": at(0.4, timedelta(minutes=20))}, 32, 3),
        # int() truncates: S=(1-.333)*.2*100 + (1-.333)*.3*100 = 33.35 -> 66.7 -> 66
        ({"cpu": at(0.333), "mem": at(0.333)}, 66, 7),
        ({}, 0, 0),
        ({"cpu": at(0), "mem": at(0)}, 100, 10),
        # usage above 1 cannot push the score below 0
        ({"cpu": at(3), "mem": at(3)}, 0, 0),
        # hot value: minus int(hot*10), clamped at 0
        ({"cpu": at(0.2), "mem": at(0.4), "hot": encode_hot_value(2, NOW)}, 48, 5),
        ({"cpu": at(0.2), "mem": at(0.4), "hot": encode_hot_value(9, NOW)}, 0, 0),
        # the hot value is fresh for 5m
        (
            {
                "cpu": at(0.2),
                "mem": at(0.4),
                "hot": encode_hot_value(2, NOW - timedelta(minutes=5)),
            },
            68,
            7,
        ),
        (
            {
                "cpu": at(0.2),
                "mem": at(0.4),
                "hot": encode_hot_value(2, NOW - timedelta(minutes=4)),
            },
            48,
            5,
        ),
        # crane parses the hot value as a float
        ({"cpu": at(0.2), "mem": at(0.4), "hot": "1.5,2026-11-22T12:00:00Z"}, 53, 5),
    ],
)
def test_score_table(annotations: dict[str, str], score: int, extender: int) -> None:
    verdict = evaluate(load(**annotations), DEFAULT, NOW)
    assert verdict.score == score
    assert verdict.extender_score == extender


def test_no_priorities_score_zero() -> None:
    rule_set = rules(priority=[])
    verdict = evaluate(NodeLoad.from_annotations("n", {"cpu": at(0.1)}, rule_set), rule_set, NOW)
    assert verdict.score == 0


@pytest.mark.parametrize(
    ("score", "extender"), [(0, 0), (4, 0), (5, 1), (14, 1), (15, 2), (95, 10), (100, 10)]
)
def test_extender_scale_rounds_half_up(score: int, extender: int) -> None:
    assert to_extender_score(score) == extender


def test_valid_until_is_the_first_expiry() -> None:
    verdict = evaluate(load(cpu=at(0.1, timedelta(minutes=2)), mem=at(0.1)), DEFAULT, NOW)
    assert verdict.valid_until == NOW + timedelta(minutes=6)
    assert evaluate(load(), DEFAULT, NOW).valid_until is None


def test_unknown_metrics_are_reported_once() -> None:
    verdict = evaluate(load(cpu="junk"), DEFAULT, NOW)
    assert verdict.unknown == (("cpu", "malformed"), ("mem", "missing"))


def test_hot_value_windows() -> None:
    entries = [HotValuePolicy(timeRange="5m", count=5), HotValuePolicy(timeRange="1m", count=2)]
    bindings = [NOW - timedelta(seconds=s) for s in (1, 10, 30, 59, 90, 200, 299, 300, 400)]
    # within 5m (strictly after now-5m): 7 -> 1; within 1m: 4 -> 2
    assert hot_value(bindings, entries, NOW) == 3
    assert hot_value([], entries, NOW) == 0
    assert hot_value([NOW + timedelta(seconds=1)], entries, NOW) == 0


usage = st.floats(min_value=0, max_value=2, allow_nan=False)
hot = st.integers(min_value=0, max_value=20)
age = st.integers(min_value=0, max_value=3600).map(lambda s: timedelta(seconds=s))


@given(cpu=usage, mem=usage, h=hot, cpu_age=age, mem_age=age)
def test_score_within_bounds(
    cpu: float, mem: float, h: int, cpu_age: timedelta, mem_age: timedelta
) -> None:
    verdict = evaluate(
        load(cpu=at(cpu, cpu_age), mem=at(mem, mem_age), hot=encode_hot_value(h, NOW)), DEFAULT, NOW
    )
    assert 0 <= verdict.score <= 100
    assert 0 <= verdict.extender_score <= 10


@given(cpu=usage, mem=usage, extra_cpu=usage, extra_mem=usage, h=hot)
def test_more_load_never_raises_the_score(
    cpu: float, mem: float, extra_cpu: float, extra_mem: float, h: int
) -> None:
    hot_text = encode_hot_value(h, NOW)
    low = evaluate(load(cpu=at(cpu), mem=at(mem), hot=hot_text), DEFAULT, NOW)
    high = evaluate(
        load(cpu=at(cpu + extra_cpu), mem=at(mem + extra_mem), hot=hot_text), DEFAULT, NOW
    )
    hotter = evaluate(
        load(cpu=at(cpu), mem=at(mem), hot=encode_hot_value(h + 1, NOW)), DEFAULT, NOW
    )
    assert high.score <= low.score
    assert hotter.score <= low.score
    assert high.extender_score <= low.extender_score


@given(cpu=usage, mem=usage, extra=st.integers(min_value=0, max_value=10_000))
def test_stale_values_never_filter_in_fail_open(cpu: float, mem: float, extra: int) -> None:
    old = timedelta(minutes=20, seconds=extra)  # past both windows (8m, 20m)
    verdict = evaluate(load(cpu=at(cpu, old), mem=at(mem, old)), DEFAULT, NOW)
    assert verdict.overload is None


LIMITS = {"cpu": 0.65, "mem": 0.75}
WINDOWS = {"cpu": timedelta(minutes=8), "mem": timedelta(minutes=20)}  # period + 5m
KINDS = st.sampled_from(["fresh", "fresh", "stale", "missing", "malformed", "future"])


def annotation(name: str, kind: str, value: float, seconds: int) -> str | None:
    """One metric's annotation of ``kind``; ``seconds`` places it inside, past or ahead of
    its freshness window."""
    window = WINDOWS[name].total_seconds()
    if kind == "fresh":
        return at(value, timedelta(seconds=seconds % window))
    if kind == "stale":
        return at(value, timedelta(seconds=window + seconds))
    if kind == "future":
        return encode_metric(value, NOW + MAX_CLOCK_SKEW + timedelta(seconds=1 + seconds))
    return None if kind == "missing" else "garbage"


@given(
    kinds=st.tuples(KINDS, KINDS),
    values=st.tuples(usage, usage),
    seconds=st.tuples(age, age).map(lambda ages: tuple(int(a.total_seconds()) for a in ages)),
)
def test_fail_closed_refuses_what_fail_open_skips(
    kinds: tuple[str, str], values: tuple[float, float], seconds: tuple[int, int]
) -> None:
    raw = {
        name: text
        for name, kind, value, secs in zip(("cpu", "mem"), kinds, values, seconds, strict=True)
        if (text := annotation(name, kind, value, secs)) is not None
    }
    # what each mode must answer, predicate by predicate in policy order (cpu, then mem)
    expected_open = expected_closed = None
    for name, kind, value in zip(("cpu", "mem"), kinds, values, strict=True):
        written = float(f"{value:.5f}")
        if kind == "fresh" and written > LIMITS[name]:
            expected_open = expected_open or (name, "overloaded")
            expected_closed = expected_closed or (name, "overloaded")
        elif kind != "fresh":
            expected_closed = expected_closed or (name, kind)  # fail-open skips it
    open_verdict = evaluate(NodeLoad.from_annotations("n", raw, DEFAULT), DEFAULT, NOW)
    closed_verdict = evaluate(NodeLoad.from_annotations("n", raw, CLOSED), CLOSED, NOW)
    assert open_verdict.overload_reason == expected_open
    assert closed_verdict.overload_reason == expected_closed
    assert (open_verdict.overload is None) == (expected_open is None)
    if expected_closed is not None and expected_closed[1] != "overloaded":
        name, why = expected_closed
        message = closed_verdict.overload or ""
        assert message.startswith(f"Load[{name}] of node[n] is {why}")
        assert message.endswith("; staleData is failClosed")
    # fail-closed refuses every node fail-open refuses, and the same way while values are fresh
    if open_verdict.overload is not None:
        assert closed_verdict.overload is not None
    if "fresh" == kinds[0] == kinds[1]:
        assert open_verdict.overload == closed_verdict.overload


def four_metric_rules(weights: list[float]) -> LoadRules:
    names = ["a", "b", "c", "d"]
    spec = {
        "syncPolicy": [{"name": n, "period": "3m"} for n in names],
        "priority": [{"name": n, "weight": w} for n, w in zip(names, weights, strict=True)],
    }
    return LoadRules.from_policy(parse_policy({"spec": spec}))


@pytest.mark.parametrize(
    ("weights", "usages", "score"),
    [
        # crane (Go, float64, left to right): S = 51.2, W = 0.6400000000000001, int(79.999…) = 79.
        # Python 3.12's sum() compensates rounding: W = 0.64 and the score would be 80.
        ([0.2, 0.01, 0.1, 0.33], [0.5, 0.3, 0.25, 0.0], 79),
        ([0.25, 0.25, 0.25, 0.25], [0.0, 0.0, 0.0, 0.0], 100),
        ([0.1, 0.2, 0.3, 0.4], [1.0, 1.0, 1.0, 1.0], 0),
    ],
)
def test_score_is_cranes_float64_arithmetic(
    weights: list[float], usages: list[float], score: int
) -> None:
    rule_set = four_metric_rules(weights)
    annotations = {n: at(u) for n, u in zip("abcd", usages, strict=True)}
    verdict = evaluate(NodeLoad.from_annotations("n", annotations, rule_set), rule_set, NOW)
    assert verdict.score == score


def test_weights_add_left_to_right() -> None:
    assert four_metric_rules([0.2, 0.01, 0.1, 0.33]).total_weight == 0.6400000000000001
    assert ordered_sum([1e16, 1.0, -1e16]) == 0.0  # a compensated sum says 1.0


FAR_FUTURE = "9999-12-31T23:59:59Z"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("+Inf", "Load[cpu]=inf of node[n3] is above 0.65"),
        ("1e308", f"Load[cpu]={1e308:.5f} of node[n3] is above 0.65"),
    ],
)
def test_infinite_and_huge_usage_is_above_every_limit(value: str, message: str) -> None:
    stamp = NOW.strftime("%Y-%m-%dT%H:%M:%SZ")
    verdict = evaluate(load(cpu=f"{value},{stamp}", mem=at(0.1)), DEFAULT, NOW)
    assert verdict.overload == message
    assert verdict.overload_reason == ("cpu", "overloaded")
    # crane: (1 - u)·w·100 leaves the finite range; Go's int64 of it, clamped, is 0
    assert verdict.score == 0
    assert verdict.unknown == ()


@pytest.mark.parametrize(
    "hot", ["+Inf", "1e308", "1.7976931348623157e308", "10.1", "3e38", "1e-308"]
)
def test_extreme_hot_values_stay_in_range(hot: str) -> None:
    stamp = NOW.strftime("%Y-%m-%dT%H:%M:%SZ")
    verdict = evaluate(load(cpu=at(0.0), mem=at(0.0), hot=f"{hot},{stamp}"), DEFAULT, NOW)
    assert verdict.score == (100 if hot == "1e-308" else 0)
    assert verdict.extender_score == (10 if hot == "1e-308" else 0)


def test_weight_zero_with_infinite_usage_scores_zero() -> None:
    # (1 - inf)·0·100 is NaN; crane's int64(NaN) clamps to 0
    rule_set = rules(priority=[{"name": "cpu", "weight": 0}, {"name": "mem", "weight": 0.3}])
    stamp = NOW.strftime("%Y-%m-%dT%H:%M:%SZ")
    annotations = {"cpu": f"inf,{stamp}", "mem": at(0.0)}
    verdict = evaluate(NodeLoad.from_annotations("n3", annotations, rule_set), rule_set, NOW)
    assert verdict.score == 0


@pytest.mark.parametrize(
    ("ahead", "reason"),
    [
        (timedelta(0), None),
        (MAX_CLOCK_SKEW, None),  # a little clock skew is tolerated
        (MAX_CLOCK_SKEW + timedelta(seconds=1), "future"),
        (timedelta(hours=8), "future"),  # crane's Asia/Shanghai wall time read as UTC
    ],
)
def test_timestamps_ahead_of_now(ahead: timedelta, reason: str | None) -> None:
    verdict = evaluate(load(cpu=at(0.9, -ahead), mem=at(0.1)), DEFAULT, NOW)
    if reason is None:
        assert verdict.overload is not None
        assert verdict.unknown == ()
    else:
        assert verdict.overload is None  # fail-open: not used, not fresh
        assert verdict.unknown == (("cpu", reason),)


def test_future_value_detail_names_the_zone_setting() -> None:
    closed = rules("failClosed")
    annotations = {"cpu": at(0.1, -timedelta(hours=8)), "mem": at(0.1)}
    verdict = evaluate(NodeLoad.from_annotations("n3", annotations, closed), closed, NOW)
    assert verdict.overload == (
        "Load[cpu] of node[n3] is future (timestamp 2026-11-22T20:00:00Z read in UTC is 8h00m "
        "ahead of now: annotations written in local time? set spec.timestampZone); "
        "staleData is failClosed"
    )
    assert verdict.overload_reason == ("cpu", "future")


def test_a_future_value_is_used_once_its_time_comes() -> None:
    node = load(cpu=at(0.9, -timedelta(minutes=30)))
    verdict = evaluate(node, DEFAULT, NOW)
    assert verdict.overload is None
    assert verdict.valid_until == NOW + timedelta(minutes=29)
    assert evaluate(node, DEFAULT, NOW + timedelta(minutes=29)).overload is not None


@pytest.mark.parametrize(
    ("stamp", "reason"),
    [(FAR_FUTURE, "future"), ("0001-01-01T00:00:00Z", "stale")],
)
@pytest.mark.parametrize("zone", ["UTC", "Asia/Shanghai", "America/New_York", "Pacific/Kiritimati"])
def test_calendar_ends_never_overflow(stamp: str, reason: str, zone: str) -> None:
    spec = {
        "syncPolicy": [{"name": "cpu", "period": "3m"}],
        "predicate": [{"name": "cpu", "maxLimitPecent": 0.65}],
        "priority": [{"name": "cpu", "weight": 1}],
        "timestampZone": zone,
    }
    rule_set = LoadRules.from_policy(parse_policy({"spec": spec}))
    annotations = {"cpu": f"0.9,{stamp}", "node_hot_value": f"1e308,{stamp}"}
    verdict = evaluate(NodeLoad.from_annotations("n", annotations, rule_set), rule_set, NOW)
    assert verdict.overload is None
    assert verdict.score == 0
    expected = {"cpu": reason} | ({"node_hot_value": reason} if reason == "future" else {})
    assert dict(verdict.unknown) == expected
    # a future timestamp is looked at again (at most a day later), a stale one never
    assert (verdict.valid_until is not None) == (reason == "future")
    if verdict.valid_until is not None:
        assert verdict.valid_until <= NOW + timedelta(days=1)


def test_a_long_period_needs_no_datetime_beyond_9999() -> None:
    spec = {
        "syncPolicy": [{"name": "cpu", "period": "87600000h"}],  # 10,000 years
        "priority": [{"name": "cpu", "weight": 1}],
    }
    rule_set = LoadRules.from_policy(parse_policy({"spec": spec}))
    verdict = evaluate(NodeLoad.from_annotations("n", {"cpu": at(0.5)}, rule_set), rule_set, NOW)
    assert verdict.score == 50
    assert verdict.valid_until == NOW + timedelta(days=1)
