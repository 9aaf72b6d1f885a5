"""The simulated workload: the seeded trace, pod usage profiles, true node usage, and the
quality figures computed from it."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sandbox.workload import (
    BURST_SIZES,
    GI,
    Load,
    Placed,
    Profile,
    Recording,
    TraceShape,
    averaged_overload,
    backgrounds,
    make_trace,
    node_usage,
    overload_if_ended,
    percentile,
    pod_usage,
    quality,
)

SHAPE = TraceShape()


def profile(**changes: float) -> Profile:
    fields = {
        "cpu_request": 1.0,
        "memory_request": 1.0 * GI,
        "kind": "typical",
        "cpu_fraction": 0.5,
        "cpu_swing": 0.0,
        "swing_period": 40.0,
        "memory_fraction": 0.5,
        "startup": 10.0,
        "lifetime": 100.0,
    }
    fields.update(changes)
    return Profile(**fields)  # type: ignore[arg-type]


def test_the_same_seed_gives_the_same_trace_and_another_seed_another() -> None:
    assert make_trace(SHAPE, seed=7) == make_trace(SHAPE, seed=7)
    assert make_trace(SHAPE, seed=7).arrivals != make_trace(SHAPE, seed=8).arrivals


@pytest.mark.parametrize("seed", [1, 7, 42])
def test_a_trace_has_steady_arrivals_and_deployment_sized_bursts(seed: int) -> None:
    trace = make_trace(SHAPE, seed=seed)
    steady = [a for a in trace.arrivals if a.group == "steady"]
    assert steady and all(0 < a.at < SHAPE.arrivals_for for a in steady)
    assert len({a.name for a in trace.arrivals}) == len(trace.arrivals)
    assert list(trace.bursts) == ["burst-0", "burst-1"]
    for number, at in enumerate(SHAPE.bursts):
        pods = [a for a in trace.arrivals if a.group == f"burst-{number}"]
        assert SHAPE.burst_size[0] <= len(pods) <= SHAPE.burst_size[1]
        assert {a.at for a in pods} == {at}
        sizes = {(a.profile.cpu_request, a.profile.memory_request) for a in pods}
        assert len(sizes) == 1 and sizes <= set(BURST_SIZES)
    assert [a.at for a in trace.arrivals] == sorted(a.at for a in trace.arrivals)


@pytest.mark.parametrize("seed", [7, 8])
def test_growth_leaves_the_trace_as_it_was_but_for_the_pods_that_grow(seed: int) -> None:
    plain = make_trace(SHAPE, seed=seed)
    shape = replace(SHAPE, growth_share=0.3)
    grown = make_trace(shape, seed=seed)
    assert grown == make_trace(shape, seed=seed)
    assert all(a.profile.grows_after is None for a in plain.arrivals)
    growing = 0
    for before, after in zip(plain.arrivals, grown.arrivals, strict=True):
        assert replace(after.profile, grows_after=None, growth=1.0) == before.profile
        assert (before.at, before.name) == (after.at, after.name)
        if after.profile.grows_after is not None:
            growing += 1
            assert shape.grows_after[0] <= after.profile.grows_after <= shape.grows_after[1]
            assert shape.growth[0] <= after.profile.growth <= shape.growth[1]
    assert 0.2 * len(plain.arrivals) < growing < 0.4 * len(plain.arrivals)


def test_a_growing_pod_uses_its_growth_from_its_start_plus_the_delay() -> None:
    grows = profile(grows_after=20.0, growth=2.0)  # starts 10 s after binding, at 0.5 core
    assert pod_usage(grows, bound_at=5.0, now=34.9)[0] == pytest.approx(0.5)
    assert pod_usage(grows, bound_at=5.0, now=35.0)[0] == pytest.approx(1.0)
    cores, memory = pod_usage(grows, bound_at=5.0, now=90.0)
    assert cores == pytest.approx(1.0)
    assert memory == 0.5 * GI  # memory does not grow


def test_profiles_span_a_fifth_of_the_request_to_more_than_all_of_it() -> None:
    profiles = [a.profile for a in make_trace(SHAPE, seed=3).arrivals]
    kinds = {p.kind for p in profiles}
    assert kinds == {"light", "typical", "hungry"}
    for p in profiles:
        assert SHAPE.startup[0] <= p.startup <= SHAPE.startup[1]
        if p.kind == "light":
            assert p.cpu_fraction == 0.2
        elif p.kind == "typical":
            assert 0.5 <= p.cpu_fraction <= 1.0
        else:
            assert p.cpu_fraction > 1.0
        assert p.cpu_swing <= 0.3 * p.cpu_fraction


def test_a_steady_rate_of_zero_gives_only_bursts() -> None:
    trace = make_trace(TraceShape(steady_rate=0, bursts=(5.0,), burst_size=(3, 3)), seed=1)
    assert [a.group for a in trace.arrivals] == ["burst-0"] * 3


@pytest.mark.parametrize(
    ("now", "expected_cpu"),
    [
        (0.0, 0.0),  # bound at 5: not yet
        (14.9, 0.0),  # startup 10 s after binding
        (15.0, 0.5),  # started: mean fraction of the 1-core request (sin 0)
        (25.0, 0.6),  # a quarter of the 40 s period: mean + swing
        (45.0, 0.4),  # three quarters: mean - swing
    ],
)
def test_a_pod_uses_its_profile_from_a_startup_delay_after_binding(
    now: float, expected_cpu: float
) -> None:
    cpu, memory = pod_usage(profile(cpu_swing=0.1), bound_at=5.0, now=now)
    assert cpu == pytest.approx(expected_cpu)
    assert memory == (0.0 if expected_cpu == 0 else 0.5 * GI)


def test_a_swing_larger_than_the_mean_never_uses_less_than_nothing() -> None:
    cpu, _ = pod_usage(profile(cpu_fraction=0.2, cpu_swing=0.5), bound_at=0, now=40.0)
    assert cpu == 0.0


def test_node_usage_is_background_plus_its_started_pods_capped_at_all_of_it() -> None:
    background = Load(cpu=0.25, memory=0.5)
    pods = [Placed(profile(), 0.0), Placed(profile(cpu_request=2.0), 0.0), Placed(profile(), 30.0)]
    usage = node_usage(background, pods, now=20.0, cpus=8, memory=4 * GI)
    # 2 cores of background + 0.5 + 1.0 (the third pod has not started): 3.5 of 8
    assert usage.cpu == pytest.approx(3.5 / 8)
    # 2 GiB + 0.5 GiB (1 GiB request, half used) + 0.5 GiB: 3 of 4
    assert usage.memory == pytest.approx(0.75)
    hungry = [Placed(profile(cpu_request=4.0, cpu_fraction=1.5), 0.0)] * 2
    assert node_usage(background, hungry, now=20.0, cpus=8, memory=4 * GI).cpu == 1.0


def test_backgrounds_make_some_nodes_busy_from_the_start() -> None:
    names = [f"node-{i}" for i in range(8)]
    loads = backgrounds(names, seed=7, busy=2)
    assert loads == backgrounds(names, seed=7, busy=2)
    busy = [n for n, load in loads.items() if load.cpu >= 0.45]
    assert len(busy) == 2
    assert all(loads[n].cpu <= 0.30 for n in names if n not in busy)
    assert len({load.cpu for load in loads.values()}) > 4


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [([3.0, 1.0, 2.0], 50, 2.0), ([1.0, 2.0, 3.0, 4.0], 99, 4.0), ([5.0], 1, 5.0)],
)
def test_percentile_is_nearest_rank(values: list[float], q: float, expected: float) -> None:
    assert percentile(values, q) == expected


def test_percentile_of_nothing_is_nan() -> None:
    assert math.isnan(percentile([], 99))


def test_quality_of_a_hand_worked_recording() -> None:
    recording = Recording()
    # two nodes, limits 0.7; samples at 0, 1 and 3 s (the last stands for the median gap, 1.5 s)
    recording.add(0.0, {"a": Load(0.2, 0.1), "b": Load(0.6, 0.1)})
    recording.add(1.0, {"a": Load(0.8, 0.1), "b": Load(0.4, 0.8)})
    recording.add(3.0, {"a": Load(0.9, 0.1), "b": Load(0.1, 0.1)})
    measured = quality(recording, cpu_limit=0.7, memory_limit=0.7)
    # at 1 s: a over on CPU, b over on memory, for 2 s each; at 3 s: a, for 1.5 s
    assert measured.overload_node_seconds == pytest.approx(2 + 2 + 1.5)
    assert measured.cpu_max == 0.9
    assert measured.cpu_p99 == 0.9
    # σ across the two nodes is half their difference: 0.2, 0.2, 0.4; weighted 1, 2, 1.5 s
    assert measured.spread == pytest.approx((0.2 * 1 + 0.2 * 2 + 0.4 * 1.5) / 4.5)


def test_quality_of_nothing_recorded() -> None:
    measured = quality(Recording(), cpu_limit=0.7, memory_limit=0.7)
    assert measured.overload_node_seconds == 0 and math.isnan(measured.cpu_max)


@given(
    st.lists(
        st.tuples(st.floats(0, 1), st.floats(0, 1), st.floats(0, 1), st.floats(0, 1)),
        min_size=1,
        max_size=30,
    )
)
def test_overload_never_exceeds_nodes_times_duration(
    samples: list[tuple[float, float, float, float]],
) -> None:
    recording = Recording()
    for i, (a_cpu, a_mem, b_cpu, b_mem) in enumerate(samples):
        recording.add(float(i), {"a": Load(a_cpu, a_mem), "b": Load(b_cpu, b_mem)})
    measured = quality(recording, cpu_limit=0.7, memory_limit=0.7)
    assert 0 <= measured.overload_node_seconds <= 2 * len(samples)
    assert measured.cpu_p99 <= measured.cpu_max <= 1
    assert 0 <= measured.spread <= 0.5


def test_overload_if_ended_on_a_hand_worked_recording() -> None:
    """The recording of the quality test: a over from 1 s (2 s, then 1.5 s), b over at 1 s
    (2 s), then under."""
    recording = Recording()
    recording.add(0.0, {"a": Load(0.2, 0.1), "b": Load(0.6, 0.1)})
    recording.add(1.0, {"a": Load(0.8, 0.1), "b": Load(0.4, 0.8)})
    recording.add(3.0, {"a": Load(0.9, 0.1), "b": Load(0.1, 0.1)})

    def left(after: float) -> float:
        return overload_if_ended(recording, cpu_limit=0.7, memory_limit=0.7, after=after)

    # ended 2.5 s in: a keeps 2 s of its first sample and 0.5 s of its second, b its 2 s
    assert left(2.5) == pytest.approx(2 + 0.5 + 2)
    assert left(1.0) == pytest.approx(1 + 1)
    assert left(0.0) == 0
    assert left(math.inf) == pytest.approx(2 + 2 + 1.5)


def test_an_overload_that_stops_begins_again_later() -> None:
    recording = Recording()
    for at, cpu in enumerate([0.8, 0.8, 0.8, 0.1, 0.8, 0.8]):
        recording.add(float(at), {"a": Load(cpu, 0.1)})
    # two overloads, 3 s and 2 s: each keeps at most its first 1.5 s
    assert overload_if_ended(recording, cpu_limit=0.7, memory_limit=0.7, after=1.5) == 3.0
    unseen = Recording()
    for at, sample in enumerate([{"a": Load(0.8, 0.1)}, {}, {"a": Load(0.8, 0.1)}]):
        unseen.add(float(at), sample)
    # a sample without the node ends its overload: two of 1 s each, whatever `after`
    assert overload_if_ended(unseen, cpu_limit=0.7, memory_limit=0.7, after=0.5) == 1.0
    assert overload_if_ended(unseen, cpu_limit=0.7, memory_limit=0.7, after=5) == 2.0
    assert overload_if_ended(Recording(), cpu_limit=0.7, memory_limit=0.7, after=1.0) == 0


@given(
    st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=1, max_size=30),
    st.floats(0, 40),
)
def test_overload_if_ended_is_at_most_the_overload(
    samples: list[tuple[float, float]], after: float
) -> None:
    recording = Recording()
    for i, (a_cpu, b_cpu) in enumerate(samples):
        recording.add(float(i), {"a": Load(a_cpu, 0.1), "b": Load(b_cpu, 0.1)})
    whole = quality(recording, cpu_limit=0.7, memory_limit=0.7).overload_node_seconds
    ended = overload_if_ended(recording, cpu_limit=0.7, memory_limit=0.7, after=after)
    assert 0 <= ended <= whole + 1e-9
    assert ended <= after * 2 * len(samples)  # at most `after` per overload, one per sample
    assert overload_if_ended(
        recording, cpu_limit=0.7, memory_limit=0.7, after=math.inf
    ) == pytest.approx(whole)


def test_an_average_over_a_window_hides_the_swings_within_it() -> None:
    """CPU swinging 0.9, 0.2, 0.9, ... each second: over the limit half the time, but its
    4-second average is over only at the first sample (0.9 alone); held at 0.8, always."""
    swinging, held = Recording(), Recording()
    for at in range(10):
        swinging.add(float(at), {"a": Load(0.9 if at % 2 == 0 else 0.2, 0.1)})
        held.add(float(at), {"a": Load(0.8, 0.1)})
    limits = {"cpu_limit": 0.7, "memory_limit": 0.7}
    assert quality(swinging, **limits).overload_node_seconds == 5
    assert averaged_overload(swinging, window=4, **limits) == 1
    assert averaged_overload(held, window=4, **limits) == 10
    assert averaged_overload(Recording(), **limits) == 0


@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=1, max_size=30))
def test_a_one_sample_window_is_the_overload_itself(samples: list[tuple[float, float]]) -> None:
    recording = Recording()
    for i, (a_cpu, b_mem) in enumerate(samples):
        recording.add(float(i), {"a": Load(a_cpu, 0.1), "b": Load(0.1, b_mem)})
    whole = quality(recording, cpu_limit=0.7, memory_limit=0.7).overload_node_seconds
    averaged = averaged_overload(recording, cpu_limit=0.7, memory_limit=0.7, window=1.0)
    assert averaged == pytest.approx(whole)
