"""bench/quality.py's strategies and targets: policies this loadsched loads, and the targets
judged from measured figures."""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import generate_latest

from bench import descheduler, quality_strategies, trimaran
from bench.quality_moves import Moves
from bench.quality_outcome import Outcome, decision_counts, scheduler_seconds, verb_seconds
from bench.quality_report import (
    recorded,
    render_decisions,
    render_durations,
    render_moves,
    render_table,
    replayed,
)
from bench.quality_strategies import (
    BY_KEY,
    CPU_LIMIT,
    DEFAULT,
    EVICTIONS_PER_NODE,
    HOT_VALUE,
    MEMORY_LIMIT,
    RULES,
    STRATEGIES,
    SYNC,
    WINDOW,
    descheduler_thresholds,
    with_rebalance_high,
)
from bench.quality_targets import (
    figures,
    median_figures,
    moves_targets,
    peer_targets,
    render_medians,
    targets,
)
from bench.quality_why import why
from extender.scheduling.metrics import ExtenderMetrics
from sandbox.specs import NodeSpec
from sandbox.workload import GI as GiB
from sandbox.workload import Arrival, Load, Profile, Recording, Trace, TraceShape, make_trace
from shared.durations import parse_duration
from shared.overload_streaks import thresholds_of
from shared.policy import parse_policy


def test_crane_strategy_loads_and_estimation_differs_from_it_only_by_estimation() -> None:
    policy = parse_policy(BY_KEY["hot-only"].policy())
    assert [p.max_limit_percent for p in policy.spec.predicate] == [0.7, 0.7]
    assert BY_KEY["hot-only"].cannot_run() is None
    hot, estimation = BY_KEY["hot-only"].spec, BY_KEY["estimation"].spec
    assert hot is not None and estimation is not None
    assert {k: v for k, v in estimation.items() if k != "estimation"} == hot
    assert estimation["estimation"]["enabled"] is True
    assert not BY_KEY["plain"].uses_extender and BY_KEY["plain"].cannot_run() is None


def test_every_synced_metric_is_a_rule_over_the_benchs_window() -> None:
    """The annotator syncs only what the bench's rules record, and every average and deviation
    is taken over :data:`WINDOW`, the window the rebalancer's figures assume."""
    groups = yaml.safe_load(RULES.read_text())["groups"]
    recorded = {rule["record"]: rule["expr"] for group in groups for rule in group["rules"]}
    synced = parse_policy({"spec": {"syncPolicy": SYNC}}).spec.sync_policy
    assert len(synced) == len(SYNC)
    for entry in synced:
        assert f"[{WINDOW}])" in recorded[entry.name], entry.name
        assert entry.coverage == parse_duration(WINDOW), entry.name  # what estimation uses


def test_a_policy_this_loadsched_refuses_is_reported_not_run() -> None:
    strategy = BY_KEY["hot-only"].__class__("bogus", "bogus", {"scoring": {"nonsense": {}}})
    reason = strategy.cannot_run()
    assert reason is not None and "spec.scoring" in reason


def run(key: str, usage: list[float], latencies: list[float]) -> Outcome:
    recording = Recording()
    for second, cpu in enumerate(usage):
        recording.add(float(second), {"a": Load(cpu, 0.1), "b": Load(0.1, 0.1)})
    return Outcome(BY_KEY[key], recording, latencies, pending=0, created=len(latencies))


@pytest.mark.parametrize(
    ("estimation_over", "latency", "expected"),
    [
        (1, 1.0, [True, True, True]),  # 1 s over vs 4 (hot) and 10 (plain); p99 1.0 vs 1.0
        (3, 1.0, [False, False, True]),  # 3/4 = 0.75 > 0.5; 3/10 > 0.2
        (2, 1.0, [True, True, True]),  # exactly 0.5 and 0.2 are met
        (1, 1.2, [True, True, False]),  # 1.2 > 1.1 × 1.0
    ],
)
def test_targets_compare_estimation_with_hot_only_and_plain(
    estimation_over: int, latency: float, expected: list[bool]
) -> None:
    outcomes = [
        run("plain", [0.9] * 10 + [0.1] * 10, [0.5, 1.0]),
        run("hot-only", [0.9] * 4 + [0.1] * 16, [0.5, 1.0]),
        run("estimation", [0.9] * estimation_over + [0.1] * (20 - estimation_over), [0.5, latency]),
    ]
    lines, ok = targets(figures(outcomes))
    assert ["MISSED" not in line for line in lines] == expected
    assert ok == all(expected)


def test_targets_are_not_measured_without_their_strategies() -> None:
    outcomes = [run("plain", [0.9], [1.0]), Outcome(BY_KEY["estimation"], skipped="refused")]
    lines, ok = targets(figures(outcomes))
    assert not ok and "estimation, hot-only did not run" in lines[0]


def test_the_table_says_why_a_strategy_did_not_run() -> None:
    outcomes = [run("plain", [0.9, 0.1], [1.0]), Outcome(BY_KEY["lvrb"], skipped="no scoring")]
    table = render_table(outcomes)
    last = table.splitlines()[-1]
    assert last.startswith("lvrb: ") and last.endswith("not run: no scoring")


def test_every_strategy_the_issue_names_is_there() -> None:
    assert list(DEFAULT) == [
        "plain",
        "hot-only",
        "estimation",
        "trimaran-tlp",
        "trimaran-lvrb",
        "tlp",
        "lvrb",
    ]
    assert set(DEFAULT) <= {s.key for s in STRATEGIES}
    waiting = BY_KEY["estimation-wait"].policy()["spec"]
    assert waiting["estimation"] == {
        **BY_KEY["estimation"].policy()["spec"]["estimation"],
        "whenNoNodeHasRoom": "wait",
    }
    assert BY_KEY["estimation-wait"].cannot_run() is None
    watching = BY_KEY["estimation-watch"]
    assert watching.policy() == BY_KEY["estimation"].policy() and watching.hot_value == HOT_VALUE
    through_loadsched = [s for s in STRATEGIES if s.uses_extender]
    assert [s.key for s in through_loadsched if not s.bind] == ["estimation-watch"]
    spread = BY_KEY["estimation-minmax"].policy()["spec"]
    assert spread["scoring"] == {"normalize": "minMax"}
    assert {k: v for k, v in spread.items() if k != "scoring"} == BY_KEY["estimation"].policy()[
        "spec"
    ]
    assert BY_KEY["estimation-minmax"].cannot_run() is None
    alone = BY_KEY["estimation-alone"]
    assert "hotValue" not in alone.policy()["spec"] and alone.hot_value == []
    assert alone.annotator_policy()["spec"]["hotValue"] == []
    assert {k: v for k, v in alone.policy()["spec"].items() if k != "hotValue"} == {
        k: v for k, v in spread.items() if k != "hotValue"
    }
    assert alone.cannot_run() is None


def test_rounds_are_judged_by_each_strategys_median() -> None:
    """Three rounds: estimation over 1, 9 and 2 s (median 2), hot-only 4, 4, 3 (median 4),
    plain 10 each: 2/4 = 0.5 and 2/10 = 0.2 are met though round 2 alone misses both."""
    rounds = [
        [
            run("plain", [0.9] * 10 + [0.1] * 10, [0.5, 1.0]),
            run("hot-only", [0.9] * hot + [0.1] * (20 - hot), [0.5, 1.0]),
            run("estimation", [0.9] * est + [0.1] * (20 - est), [0.5, 1.0]),
        ]
        for est, hot in ((1, 4), (9, 4), (2, 3))
    ]
    medians = median_figures(rounds)
    assert (medians["estimation"].overload, medians["hot-only"].overload) == (2, 4)
    lines, ok = targets(medians)
    assert ok, lines
    assert not targets(figures(rounds[1]))[1]
    table = render_medians(rounds)
    assert "1/1.00, 9/1.00, 2/1.00" in table.splitlines()[3]


def test_a_missed_target_says_what_the_recording_shows_behind_it() -> None:
    """Estimation 3 s over on node a (hot-only 4, plain 10: 3/4 misses 0.5), and 2 of its 4
    pods slower than 1.1 × hot-only's p99 of 1.0 s."""
    outcomes = [
        run("plain", [0.9] * 10 + [0.1] * 10, [0.5, 1.0]),
        run("hot-only", [0.9] * 4 + [0.1] * 16, [0.5, 1.0]),
        run("estimation", [0.1] * 2 + [0.9, 0.95, 0.9] + [0.1] * 15, [0.5, 1.0, 9.0, 12.5]),
    ]
    lines = why([outcomes], figures(outcomes))
    assert lines == [
        "  why (overload), round 1: node-seconds by node: a 3 s (peak 95%, over from 2 to 4 s)",
        "  why (latency), round 1: 2 of 4 pods took over 1.10 s to bind (12.5, 9.0 s); "
        "p99 is the 1st slowest",
    ]
    met = [*outcomes[:2], run("estimation", [0.1] * 20, [0.5, 1.0])]
    assert why([met], figures(met)) == []


def test_a_saved_run_reads_back_as_it_was_measured() -> None:
    outcomes = [
        run("hot-only", [0.9] * 4 + [0.1] * 16, [0.5, 1.0]),
        Outcome(BY_KEY["lvrb"], skipped="no scoring"),
    ]
    back = [replayed(json.loads(json.dumps(recorded(o)))) for o in outcomes]
    assert render_table(back) == render_table(outcomes)
    assert figures(back) == figures(outcomes)


def test_an_overloaded_node_is_shown_with_what_ran_on_it_at_its_peak() -> None:
    """Node a peaks at 95 % at 3 s, with a hungry pod (2 cores requested, using 1.6×: 3.2 of
    its 8 cores, 40 %, estimated at 2 × 0.85 = 21 %) and a light one (1.6 cores, using 0.2×:
    4 %, estimated 17 %) running; a pod gone by then, one bound later and one on node b are
    not counted; the rest is the node's own load (51 %)."""

    def profile(kind: str, cpu: float, fraction: float, lifetime: float = 100.0) -> Profile:
        return Profile(cpu, GiB, kind, fraction, 0.0, 30.0, 0.5, 1.0, lifetime)

    pods = {
        "hungry": (profile("hungry", 2.0, 1.6), "a", 0.0),
        "light": (profile("light", 1.6, 0.2), "a", 0.0),
        "gone": (profile("typical", 1.0, 0.8, lifetime=2.0), "a", 0.0),
        "later": (profile("typical", 1.0, 0.8), "a", 4.0),
        "elsewhere": (profile("hungry", 2.0, 1.5), "b", 0.0),
    }
    trace = Trace(
        TraceShape(), 7, tuple(Arrival(0.0, n, "steady", p) for n, (p, _, _) in pods.items())
    )
    outcomes = [
        run("plain", [0.9] * 10 + [0.1] * 10, [0.5, 1.0]),
        run("hot-only", [0.9] * 4 + [0.1] * 16, [0.5, 1.0]),
        run("estimation", [0.5, 0.6, 0.9, 0.95, 0.9] + [0.1] * 15, [0.5, 1.0]),
    ]
    outcomes[2].bound = {name: (node, at) for name, (_, node, at) in pods.items()}
    lines = why([outcomes], figures(outcomes), [trace])
    assert lines[1] == (
        "    a at 3 s, CPU 95%: its own load 51%, 2 pods 44% (estimated 38%): "
        "1 hungry 40% (estimated 21%), 1 light 4% (estimated 17%)"
    )
    back = replayed(json.loads(json.dumps(recorded(outcomes[2]))))
    assert back.bound == outcomes[2].bound
    # a run saved before bindings were recorded says nothing more than the nodes
    outcomes[2].bound = {}
    assert len(why([outcomes], figures(outcomes), [trace])) == 1


def test_the_extenders_decisions_for_want_of_room_are_read_off_its_metrics() -> None:
    """Counted as the extender counts them: two answers placed without room, and refusals for
    want of room (3 of cpu, 1 of memory) apart from plain overloads (which are not counted)."""
    metrics = ExtenderMetrics()
    metrics.placed_without_room.inc(2)
    metrics.count_filtered(
        Counter(
            {
                ("cpu_usage_avg_1m", "overloaded-with-pod"): 3,
                ("mem_usage_avg_1m", "overloaded-with-pod"): 1,
                ("cpu_usage_avg_1m", "overloaded"): 7,
            }
        )
    )
    counts = decision_counts(generate_latest(metrics.registry).decode())
    assert counts == {"placed_without_room": 2.0, "refused_for_room": 4.0}
    assert decision_counts("") == {"placed_without_room": 0.0, "refused_for_room": 0.0}


def test_a_missed_overload_target_says_what_the_filter_did_for_want_of_room() -> None:
    outcomes = [
        run("plain", [0.9] * 10 + [0.1] * 10, [0.5, 1.0]),
        run("hot-only", [0.9] * 4 + [0.1] * 16, [0.5, 1.0]),
        run("estimation", [0.1] * 2 + [0.9, 0.95, 0.9] + [0.1] * 15, [0.5, 1.0]),
    ]
    outcomes[2].decisions = {"placed_without_room": 5.0, "refused_for_room": 40.0}
    expected = (
        "the extender's filter: 5 answer(s) passed a pod no node had room for "
        "(whenNoNodeHasRoom: place), 40 node refusal(s) for want of room for a pod's estimate"
    )
    assert why([outcomes], figures(outcomes))[1] == f"    {expected}"
    assert render_decisions(outcomes) == [f"  estimation: {expected}"]
    back = replayed(json.loads(json.dumps(recorded(outcomes[2]))))
    assert back.decisions == outcomes[2].decisions
    # a run saved before the counts were read says nothing about them
    outcomes[2].decisions = {}
    assert len(why([outcomes], figures(outcomes))) == 1
    assert render_decisions(outcomes) == []


def test_the_extenders_time_per_call_is_read_off_its_metrics() -> None:
    """The mean of each verb's calls, for the verbs called: 2 binds of 10 and 30 ms, 1 filter
    of 1 ms; prioritize never called."""
    metrics = ExtenderMetrics()
    for verb, seconds in (("bind", 0.010), ("bind", 0.030), ("filter", 0.001)):
        metrics.request_seconds.labels(verb).observe(seconds)
    means = verb_seconds(generate_latest(metrics.registry).decode())
    assert means == pytest.approx({"bind": 0.020, "filter": 0.001})
    assert verb_seconds("") == {}


def test_a_missed_latency_target_says_how_long_the_extenders_bind_took() -> None:
    """A pod's latency includes its binding: with the bind verb, the extender's own time per
    bind call, for each strategy that bound through it, is printed beside the slow pods."""
    outcomes = [
        run("plain", [0.1] * 20, [0.5, 1.0]),
        run("hot-only", [0.1] * 20, [0.5, 1.0]),
        run("estimation", [0.1] * 20, [0.5, 1.0, 9.0, 12.5]),
    ]
    outcomes[1].verbs = {"filter": 0.0002, "bind": 0.068}
    outcomes[2].verbs = {"filter": 0.0006, "prioritize": 0.0001, "bind": 0.019}
    lines = why([outcomes], figures(outcomes))
    assert lines[1:] == [
        "    the extender's bind took on average hot-only 68.0 ms, estimation 19.0 ms"
    ]
    assert render_decisions(outcomes) == [
        "  hot-only: the extender's mean time per call: bind 68.00 ms, filter 0.20 ms",
        "  estimation: the extender's mean time per call: bind 19.00 ms, filter 0.60 ms, "
        "prioritize 0.10 ms",
    ]
    back = replayed(json.loads(json.dumps(recorded(outcomes[2]))))
    assert back.verbs == outcomes[2].verbs


def test_estimation_keep_differs_from_estimation_only_by_not_subtracting_departed_pods() -> None:
    keep, estimation = BY_KEY["estimation-keep"].spec, BY_KEY["estimation"].spec
    assert keep is not None and estimation is not None
    assert (
        parse_policy(BY_KEY["estimation-keep"].policy()).spec.estimation.subtract_departed is False
    )
    assert parse_policy(BY_KEY["estimation"].policy()).spec.estimation.subtract_departed is True
    assert {k: v for k, v in keep.items() if k != "estimation"} == {
        k: v for k, v in estimation.items() if k != "estimation"
    }
    assert {k: v for k, v in keep["estimation"].items() if k != "subtractDeparted"} == (
        estimation["estimation"]
    )


def test_saved_runs_given_together_are_judged_on_their_pooled_rounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """One saved run of one round misses the hot-only target (estimation 3 s over against 4);
    with a second run of two rounds (1 s each) the pooled median is 1 s: met."""
    from bench import quality

    def saved(name: str, overs: list[int]) -> str:
        rounds = [
            [
                recorded(run("plain", [0.9] * 10 + [0.1] * 10, [0.5, 1.0])),
                recorded(run("hot-only", [0.9] * 4 + [0.1] * 16, [0.5, 1.0])),
                recorded(run("estimation", [0.9] * over + [0.1] * (20 - over), [0.5, 1.0])),
            ]
            for over in overs
        ]
        path = tmp_path / name
        path.write_text(json.dumps(rounds))
        return str(path)

    first, second = saved("a.json", [3]), saved("b.json", [1, 1])
    monkeypatch.setattr("sys.argv", ["quality.py", "--from", first, "--out", str(tmp_path)])
    assert quality.main() == 1
    alone = capsys.readouterr().out
    assert "estimation overload node-s ≤ 0.5 × hot-only: MISSED (ratio 0.75; 3 / 4)" in alone
    argv = ["quality.py", "--from", first, "--from", second, "--out", str(tmp_path)]
    monkeypatch.setattr("sys.argv", argv)
    assert quality.main() == 0
    pooled = capsys.readouterr().out
    assert "targets (burst trace, medians of 3 rounds):" in pooled
    assert "estimation overload node-s ≤ 0.5 × hot-only: met (ratio 0.25; 1 / 4)" in pooled
    assert pooled.count("trace: seed 8,") == 1  # each trace described once
    assert "3/1.00, 1/1.00, 1/1.00" in pooled  # estimation's rounds, in the order given
    assert "of pods grow" not in pooled
    monkeypatch.setattr("sys.argv", [*argv, "--growth", "0.3"])
    quality.main()
    assert "; 30% of pods grow, their CPU use × 1.5–2 from 20–40 s after they start" in (
        capsys.readouterr().out
    )
    monkeypatch.setattr("sys.argv", [*argv, "--drift"])
    assert quality.main() == 1  # the drift trace judges the rebalancer alone, which did not run
    drift = capsys.readouterr().out
    assert "targets (drift trace, medians of 3 rounds):\ntargets not measured: rebalance" in drift
    assert "× hot-only" not in drift
    assert "(0.2/s, lasting the round) and bursts burst-0: " in drift
    assert "; 40% of pods grow, their CPU use × 1.5–2.5 from 20–40 s after they start" in drift


def test_the_drift_traces_lasting_pods_outlast_the_round_and_its_growth_has_time_to_show() -> None:
    """Every steady pod is still there when the drift trace ends; every pod that grows does so
    at least 80 s after its arrival before the end (arrivals stop at 150 s; 30 s of startup and
    40 s until it grows at most; the round ends at 300 s), time for a 1-minute average to show
    it and two rounds of 15 s to act."""
    from bench.quality_traces import DRIFT, DRIFT_DRAIN

    end = DRIFT.arrivals_for + DRIFT_DRAIN
    trace = make_trace(DRIFT, seed=7)
    steady = [a for a in trace.arrivals if a.group == "steady"]
    assert steady and all(a.at + a.profile.lifetime > end for a in steady)
    growing = [a.profile for a in trace.arrivals if a.profile.grows_after is not None]
    assert 0.3 < len(growing) / len(trace.arrivals) < 0.5
    latest = max(
        a.at + a.profile.startup + a.profile.grows_after
        for a in trace.arrivals
        if a.profile.grows_after is not None
    )
    assert end - latest >= 80


@pytest.mark.parametrize(
    ("options", "growth", "drain", "bench"),
    [
        ({}, 0.0, 25.0, "quality"),
        ({"quick": True}, 0.0, 25.0, "quality"),
        ({"growth": 0.3}, 0.3, 25.0, "quality"),
        ({"drift": True}, 0.4, 150.0, "quality-drift"),
        ({"drift": True, "growth": 0.2, "drain": 60.0}, 0.2, 60.0, "quality-drift"),
        ({"drain": 10.0}, 0.0, 10.0, "quality"),
    ],
)
def test_the_options_pick_a_trace_its_drain_and_where_its_results_are_kept(
    options: dict[str, Any], growth: float, drain: float, bench: str
) -> None:
    from bench.quality_traces import DRIFT, FULL, QUICK, trace_settings

    trace = (
        "drift"
        if options.pop("drift", False)
        else "quick"
        if options.pop("quick", False)
        else "full"
    )
    asked: dict[str, Any] = {"growth": None, "drain": None}
    shape, seconds, name = trace_settings(trace, **{**asked, **options})
    base = {"drift": DRIFT, "quick": QUICK, "full": FULL}[trace]
    assert shape == replace(base, growth_share=growth)
    assert (seconds, name) == (drain, bench)


def test_a_drift_run_judges_the_rebalancers_targets_and_records_them_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from bench import quality
    from bench.quality_saved import Played
    from bench.quality_traces import DRIFT, DRIFT_DRAIN

    outcomes = [
        run("plain", [0.9] * 20 + [0.1] * 80, [1.0]),
        run("estimation", [0.9] * 20 + [0.1] * 80, [1.0]),
        evicting("rebalance", 1, Moves(evictions=3)),
        evicting("descheduler", 15, Moves(evictions=4)),
    ]
    kept: list[tuple[str, list[str]]] = []
    monkeypatch.setattr(
        quality,
        "record",
        lambda bench, figures, **_: kept.append((bench, [f.target or f.name for f in figures])),
    )
    judged: list[object] = []  # this run's figures alone
    monkeypatch.setattr("bench.quality.FIGURES", judged)
    monkeypatch.setattr("bench.quality_targets.FIGURES", judged)
    monkeypatch.setattr(quality, "render_png", lambda *_: "chart")
    traces = [make_trace(DRIFT, seed=7)]
    played = Played("drift", 7, DRIFT.growth_share, DRIFT_DRAIN)
    assert quality.report([outcomes], traces, played, tmp_path, 0.0, save=True) == 0
    out = capsys.readouterr().out
    assert "rebalance overload node-s ≤ 0.1 × plain: met" in out
    assert "× hot-only" not in out and "estimation overload" not in out
    [(bench, keys)] = kept
    assert bench == "quality-drift" and keys and all("rebalance" in key for key in keys)


def test_a_run_at_another_rebalance_high_is_saved_with_it_and_not_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from bench import quality
    from bench.quality_saved import Played, load_run
    from bench.quality_traces import DRIFT, DRIFT_DRAIN

    outcomes = [
        run("plain", [0.9] * 20 + [0.1] * 80, [1.0]),
        evicting("rebalance", 1, Moves(evictions=3)),
        evicting("descheduler", 15, Moves(evictions=4)),
    ]
    kept: list[str] = []
    monkeypatch.setattr(quality, "record", lambda bench, *_, **__: kept.append(bench))
    monkeypatch.setattr(quality, "render_png", lambda *_: "chart")
    traces = [make_trace(DRIFT, seed=7)]
    for high in (0.6, CPU_LIMIT):
        played = Played("drift", 7, DRIFT.growth_share, DRIFT_DRAIN, high)
        quality.report([outcomes], traces, played, tmp_path, 0.0, save=True)
        assert load_run(tmp_path / "quality.json")[1] == played
        noted = "act at 60% of a node (low 48%) rather than at the limits"
        assert (noted in (tmp_path / "quality.html").read_text()) is (high == 0.6)
        assert (noted in capsys.readouterr().out) is (high == 0.6)
    assert kept == ["quality-drift"]  # the run at the limits alone


def test_rebalance_high_without_a_strategy_that_moves_pods_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from bench import quality

    argv = ["quality.py", "--drift", "--strategies", "plain,estimation", "--rebalance-high", "0.6"]
    monkeypatch.setattr("sys.argv", argv)
    with pytest.raises(SystemExit):
        quality.main()
    assert "--rebalance-high: no strategy that moves pods (rebalance, " in capsys.readouterr().err


def test_the_descheduler_acts_at_the_rebalancers_thresholds() -> None:
    assert descheduler_thresholds(0.6) == (0.48, 0.6)
    rebalance = parse_policy(BY_KEY["rebalance"].annotator_policy())
    [cpu, _] = thresholds_of(rebalance)
    assert descheduler_thresholds(CPU_LIMIT) == (cpu.low, cpu.high)
    # one rebalance high stands for both limits (with_rebalance_high, Played)
    assert CPU_LIMIT == MEMORY_LIMIT


def test_drift_and_quick_are_two_traces_not_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from bench import quality

    monkeypatch.setattr("sys.argv", ["quality.py", "--quick", "--drift"])
    with pytest.raises(SystemExit):
        quality.main()
    assert "--drift: not allowed with argument --quick" in capsys.readouterr().err


@pytest.mark.parametrize("text", ["-0.1", "1.5", "nan", "half"])
def test_a_growth_share_outside_0_to_1_is_refused_naming_the_flag(
    text: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from bench import quality

    monkeypatch.setattr("sys.argv", ["quality.py", "--growth", text])
    with pytest.raises(SystemExit):
        quality.main()
    assert f"--growth: {text!r} is not a share 0..1" in capsys.readouterr().err


def test_the_rebalancer_runs_on_estimations_policy_with_thresholds_from_its_limits() -> None:
    rebalance = BY_KEY["rebalance"]
    assert rebalance.spec == BY_KEY["estimation"].spec and rebalance.cannot_run() is None
    policy = parse_policy(rebalance.annotator_policy())
    annotator = policy.spec
    assert annotator.rebalance.enabled and not annotator.rebalance.dry_run
    assert [(t.metric, t.high, t.low) for t in thresholds_of(policy)] == [
        ("cpu_usage_avg_1m", 0.7, 0.56),
        ("mem_usage_avg_1m", 0.7, 0.56),
    ]
    assert annotator.rebalance.limits.per_node == EVICTIONS_PER_NODE
    assert not parse_policy(BY_KEY["estimation"].annotator_policy()).spec.rebalance.enabled
    both = BY_KEY["loadsched+descheduler"]
    assert both.spec == BY_KEY["estimation"].spec and both.descheduler and both.rebalance is None
    assert BY_KEY["descheduler"].spec is None and BY_KEY["descheduler"].descheduler


def test_another_rebalance_high_sets_both_averages_and_leaves_the_rest() -> None:
    rebalance = BY_KEY["rebalance"]
    moved = with_rebalance_high(rebalance, 0.6)
    policy = parse_policy(moved.annotator_policy())
    assert [(t.metric, t.high, t.low) for t in thresholds_of(policy)] == [
        ("cpu_usage_avg_1m", 0.6, 0.48),
        ("mem_usage_avg_1m", 0.6, 0.48),
    ]
    assert moved.cannot_run() is None and moved.spec == rebalance.spec
    assert policy.spec.rebalance.limits.per_node == EVICTIONS_PER_NODE
    assert with_rebalance_high(rebalance, CPU_LIMIT) is rebalance
    assert with_rebalance_high(BY_KEY["estimation"], 0.6) is BY_KEY["estimation"]


@pytest.mark.parametrize("text", ["0", "-0.1", "1.2", "nan", "high"])
def test_a_rebalance_high_that_is_not_a_share_is_refused_naming_the_flag(
    text: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from bench import quality

    monkeypatch.setattr("sys.argv", ["quality.py", "--rebalance-high", text])
    with pytest.raises(SystemExit):
        quality.main()
    assert f"--rebalance-high: {text!r} is not a share over 0, to 1" in capsys.readouterr().err


def test_the_descheduler_reads_the_same_rule_per_node_name_and_the_same_thresholds() -> None:
    class Stack:
        def instance(self, node: NodeSpec) -> str:
            return f"{node.ip}:9100"

    nodes = [NodeSpec("node-1", "127.0.0.2"), NodeSpec("node-2", "127.0.0.3")]
    query = descheduler.node_query(Stack(), nodes, "cpu_usage_avg_1m")  # type: ignore[arg-type]
    assert query == (
        'label_replace(cpu_usage_avg_1m{instance="127.0.0.2:9100"} / 100, "instance", "node-1", '
        '"instance", ".*") or label_replace(cpu_usage_avg_1m{instance="127.0.0.3:9100"} / 100, '
        '"instance", "node-2", "instance", ".*")'
    )
    document = descheduler.policy(
        prometheus_url="http://127.0.0.1:9090", query=query, low=0.56, high=0.7, per_node=2
    )
    [provider] = document["metricsProviders"]
    assert provider["prometheus"]["authToken"]["secretReference"]["name"] == descheduler.SECRET
    [plugin] = document["profiles"][0]["pluginConfig"]
    assert plugin["name"] == "LowNodeUtilization"
    assert plugin["args"]["thresholds"] == {"MetricResource": 56}
    assert plugin["args"]["targetThresholds"] == {"MetricResource": 70}
    assert plugin["args"]["evictionLimits"] == {"node": 2}
    command = descheduler.argv(Path("/bin/d"), Path("/ca.crt"), Path("/k"), Path("/p.yaml"), "15s")
    assert command[:4] == ["unshare", "--mount", "--propagation", "private"]
    assert command[command.index("--descheduling-interval") + 1] == "15s"


def evicting(key: str, overload_s: int, moved: Moves) -> Outcome:
    outcome = run(key, [0.9] * overload_s + [0.1] * (100 - overload_s), [1.0])
    outcome.moves = moved
    return outcome


@pytest.mark.parametrize(
    ("ours", "evicted", "back", "met"),
    [
        (1, 3, 0, [True, True, True, True]),  # 1 vs 20 (plain) and 10; 3 evictions vs 4
        (3, 3, 0, [False, True, True, True]),  # 3/20 > 0.1
        (1, 5, 0, [True, True, False, True]),  # 5 evictions > 4
        (1, 3, 1, [True, True, True, False]),  # one replacement back on its node
    ],
)
def test_the_rebalancers_targets_against_plain_and_the_real_descheduler(
    ours: int, evicted: int, back: int, met: list[bool]
) -> None:
    outcomes = [
        run("plain", [0.9] * 20 + [0.1] * 80, [1.0]),
        evicting("rebalance", ours, Moves(evictions=evicted, back_on_source=back)),
        evicting("descheduler", 15, Moves(evictions=4, most_of_one=3, evicted_twice=1)),
        evicting("loadsched+descheduler", 10, Moves(evictions=4, back_on_source=2)),
    ]
    lines, ok = moves_targets([outcomes])
    assert ["MISSED" not in line for line in lines[:4]] == met
    assert ok == all(met)
    assert any(
        line.startswith("  descheduler, beside (worst round): 1 workloads evicted twice")
        for line in lines
    )
    table = render_moves(outcomes)
    assert [line.split()[0] for line in table[2:6]] == [
        "rebalance",
        "descheduler",
        "loadsched+descheduler",
        "evicted:",
    ]


def test_beside_the_rebalancers_targets_the_least_any_rebalancer_could_leave() -> None:
    """Estimation's one 12 s overload and the rebalance round's 11 s, ended 5, 10 or 30 s (the
    bench rebalancer's two rounds of 15 s) after they began, against plain's 20 s."""
    outcomes = [
        run("plain", [0.9] * 20 + [0.1] * 80, [1.0]),
        run("estimation", [0.1] * 10 + [0.9] * 12 + [0.1] * 78, [1.0]),
        evicting("rebalance", 11, Moves()),
    ]
    lines, _ = moves_targets([outcomes])
    assert (
        "  the rebalancer evicted nothing in any round: its overload is its placement's "
        "(estimation + hot value), 12 node-s as estimation, and differs from it by the "
        "rounds' spread alone"
    ) in lines
    # 1-minute averages: plain's 20 s at 90 % stay over 70 % for 6 s more (20 × 0.9 + 6 × 0.1
    # = 18.6 > 0.7 × 26); the rebalance round's 11 s for 3 more (9.9 + 0.3 > 0.7 × 14);
    # estimation's 12 s after 10 s at 10 % never lift it there (1 + 12 × 0.9 < 0.7 × 22)
    assert (
        "  beside: node-seconds a 1-minute average was above a limit (the overload the averages "
        "show, not the swings within a minute), median: plain 26, estimation 0, rebalance 14"
    ) in lines
    floor = [line for line in lines if "the least a rebalancer can leave" in line]
    assert floor == [
        "  beside: about the least a rebalancer can leave of the estimation strategy's own "
        "overload, had every overload ended that long after it began (median of 1 round): 5 s 5 node-s (0.25 × "
        "plain), 10 s 10 node-s (0.50 × plain), 30 s 12 node-s (0.60 × plain)",
        "  beside: about the least a rebalancer can leave of the rebalance strategy's own "
        "overload, had every overload ended that long after it began (median of 1 round): 5 s 5 node-s (0.25 × "
        "plain), 10 s 10 node-s (0.50 × plain), 30 s 11 node-s (0.55 × plain)",
    ]
    without_plain = moves_targets([outcomes[1:]])[0]
    assert without_plain[-2].endswith("30 s 12 node-s")
    assert without_plain[-1].endswith("30 s 11 node-s")


def test_without_the_rebalancer_its_targets_are_not_judged() -> None:
    assert moves_targets([[run("plain", [0.9], [1.0])]]) == ([], True)


def test_a_saved_run_keeps_what_evictions_did() -> None:
    outcome = evicting("rebalance", 1, Moves(evictions=2, replacement_latencies=[1.5, 2.0]))
    again = replayed(json.loads(json.dumps(recorded(outcome))))
    assert again.moves == outcome.moves


def test_the_output_says_how_long_each_strategys_rounds_took() -> None:
    first, second = run("plain", [0.1], [1.0]), run("plain", [0.1], [1.0])
    first.seconds, second.seconds = 100.0, 120.0
    skipped = Outcome(BY_KEY["lvrb"], skipped="no scoring")
    assert (
        render_durations([[first, skipped], [second]])
        == "time per strategy: plain 220 s (2 rounds)"
    )
    assert render_durations([[skipped]]) == ""


def test_every_strategy_names_its_pods_with_a_valid_label_and_object_name() -> None:
    valid = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    assert all(valid.match(s.label) and len(s.label) <= 50 for s in STRATEGIES)
    assert BY_KEY["loadsched+descheduler"].label == "loadsched-descheduler"


class Stack:
    def instance(self, node: NodeSpec) -> str:
        return f"{node.ip}:9100"


def test_trimaran_reads_the_bench_usage_as_fractions_per_node_name() -> None:
    nodes = [NodeSpec("node-1", "127.0.0.2"), NodeSpec("node-2", "127.0.0.3")]
    group = trimaran.rule_group(Stack(), nodes, interval="5s")  # type: ignore[arg-type]
    assert group["interval"] == "5s"
    cpu, memory = group["rules"]
    assert (cpu["record"], memory["record"]) == (
        "instance:node_cpu:ratio",
        "instance:node_memory_utilisation:ratio",
    )
    assert cpu["expr"] == (
        'label_replace(cpu_usage_active{instance="127.0.0.2:9100"} / 100, "instance", "node-1", '
        '"instance", ".*") or label_replace(cpu_usage_active{instance="127.0.0.3:9100"} / 100, '
        '"instance", "node-2", "instance", ".*")'
    )
    assert memory["expr"].startswith('label_replace(mem_usage_active{instance="127.0.0.2:9100"}')


@pytest.mark.parametrize(
    ("plugin", "disabled", "args"),
    [
        (
            "TargetLoadPacking",
            ["NodeResourcesBalancedAllocation", "NodeResourcesFit"],
            {
                "targetUtilization": 40,
                "defaultRequests": {"cpu": "1000m"},
                "defaultRequestsMultiplier": "1.5",
            },
        ),
        (
            "LoadVariationRiskBalancing",
            [],
            {"safeVarianceMargin": 1.0, "safeVarianceSensitivity": 1.0},
        ),
    ],
)
def test_trimaran_runs_the_plugins_its_readme_enables_at_the_api_defaults(
    plugin: str, disabled: list[str], args: dict[str, object]
) -> None:
    profile = trimaran.profile(plugin, "quality", "http://127.0.0.1:9090")
    assert profile["schedulerName"] == "quality"
    score = profile["plugins"]["score"]
    assert score["enabled"] == [{"name": plugin}]
    assert [d["name"] for d in score.get("disabled", [])] == disabled
    [config] = profile["pluginConfig"]
    assert config["name"] == plugin
    assert config["args"] == {
        "metricProvider": {"type": "Prometheus", "address": "http://127.0.0.1:9090"},
        **args,
    }
    with pytest.raises(ValueError, match="LowRiskOverCommitment"):
        trimaran.profile("LowRiskOverCommitment", "quality", "http://127.0.0.1:9090")


def test_the_real_trimaran_strategies_run_no_extender_and_one_plugin_each() -> None:
    for key, plugin in (
        ("trimaran-tlp", "TargetLoadPacking"),
        ("trimaran-lvrb", "LoadVariationRiskBalancing"),
    ):
        strategy = BY_KEY[key]
        assert strategy.trimaran == plugin and not strategy.uses_extender
        assert strategy.hot_value == [] and strategy.rebalance is None


@pytest.mark.parametrize(
    ("est", "tlp_over", "lvrb_over", "latency", "met"),
    [
        (2, 4, 10, 1.0, [True, True, True, True]),  # 2/4 = 0.5 and 2/10; p99 1.0 vs 1.0
        (3, 4, 10, 1.0, [False, True, True, True]),  # 3/4 > 0.5
        (2, 10, 3, 1.0, [True, True, False, True]),  # 2/3 > 0.5
        (2, 4, 10, 1.2, [True, False, True, False]),  # 1.2 > 1.1 × 1.0, both
    ],
)
def test_estimation_is_judged_against_each_real_trimaran_strategy(
    est: int, tlp_over: int, lvrb_over: int, latency: float, met: list[bool]
) -> None:
    outcomes = [
        run("estimation", [0.9] * est + [0.1] * (20 - est), [0.5, latency]),
        run("trimaran-tlp", [0.9] * tlp_over + [0.1] * (20 - tlp_over), [0.5, 1.0]),
        run("trimaran-lvrb", [0.9] * lvrb_over + [0.1] * (20 - lvrb_over), [0.5, 1.0]),
        run("tlp", [0.9] * 8 + [0.1] * 12, [0.5, 0.8]),
    ]
    lines, ok = peer_targets([outcomes])
    assert ["MISSED" not in line for line in lines[:4]] == met
    assert ok == all(met)
    assert "× trimaran-tlp" in lines[0] and "× trimaran-lvrb" in lines[2]
    # loadsched's own policy of TargetLoadPacking beside the real one; lvrb did not run
    assert lines[4:] == [
        f"  tlp (loadsched's policy of it) beside trimaran-tlp: overload node-s 8 / {tlp_over} "
        f"(ratio {8 / tlp_over:.2f}), latency p99 0.80 s / 1.00 s"
    ]


def test_the_chart_default_binding_and_the_extender_floor_are_printed_beside_trimaran() -> None:
    """estimation-watch and minimal-extender are not judged: their overload and latency are
    printed beside each real Trimaran strategy that ran, the latency as a ratio."""
    outcomes = [
        run("estimation", [0.9] * 2 + [0.1] * 18, [0.5, 1.0]),
        run("trimaran-tlp", [0.9] * 4 + [0.1] * 16, [0.5, 1.0]),
        run("estimation-watch", [0.9] * 3 + [0.1] * 17, [0.5, 0.9]),
        run("minimal-extender", [0.9] * 9 + [0.1] * 11, [0.5, 1.5]),
    ]
    lines, ok = peer_targets([outcomes])
    assert ok
    assert lines[2:] == [
        "  estimation-watch (estimation, kube-scheduler binds: the chart's default) beside "
        "trimaran-tlp: overload node-s 3 / 4, latency p99 0.90 s / 1.00 s (ratio 0.90)",
        "  minimal-extender (an HTTP extender that decides nothing) beside trimaran-tlp: "
        "overload node-s 9 / 4, latency p99 1.50 s / 1.00 s (ratio 1.50)",
    ]


def test_the_minimal_extender_strategy_runs_no_loadsched_extender() -> None:
    minimal = BY_KEY["minimal-extender"]
    assert minimal.minimal and not minimal.uses_extender and minimal.trimaran is None
    assert minimal.hot_value == [] and minimal.rebalance is None and not minimal.descheduler
    assert not minimal.bind
    assert [s.key for s in STRATEGIES if s.minimal] == ["minimal-extender"]


def test_without_a_real_trimaran_run_its_targets_are_not_judged() -> None:
    assert peer_targets([[run("estimation", [0.9], [1.0])]]) == ([], True)


def test_a_real_trimaran_strategy_without_its_other_side_is_not_measured() -> None:
    skipped = Outcome(BY_KEY["trimaran-lvrb"], skipped="Go is not on PATH")
    lines, ok = peer_targets([[run("trimaran-tlp", [0.9], [1.0]), skipped]])
    assert not ok
    assert lines == [
        "  targets against trimaran-tlp not measured: estimation did not run",
        "  targets against trimaran-lvrb not measured: estimation, trimaran-lvrb did not run",
    ]


def test_trimaran_starts_once_its_load_watcher_holds_every_nodes_cpu_average() -> None:
    cpu = {"name": "instance:node_cpu:ratio", "type": "CPU", "operator": "AVG", "value": 12.0}
    deviation = {**cpu, "operator": "STD"}
    memory = {**cpu, "name": "instance:node_memory_utilisation:ratio", "type": "Memory"}
    answer = {
        "timestamp": 1,
        "window": {"duration": "15m", "start": 0, "end": 1},
        "source": "Prometheus",
        "data": {
            "NodeMetricsMap": {
                "node-1": {"metrics": [cpu, deviation, memory]},
                "node-2": {"metrics": [deviation, memory]},
                "node-3": {"metrics": []},
            }
        },
    }
    assert trimaran.watched(answer) == {"node-1"}
    assert trimaran.watched({"data": {"NodeMetricsMap": None}}) == set()
    assert trimaran.watched({}) == set()


def test_kube_schedulers_time_per_pod_is_read_off_its_metrics() -> None:
    """Means per step over kube-scheduler's histograms (labels summed): two pods' algorithm
    of 4 and 8 ms; attempts counted only when scheduled; queued to bound over both attempt
    labels. Printed per strategy, and kept in the saved run."""
    text = "\n".join(
        [
            "# TYPE scheduler_scheduling_algorithm_duration_seconds histogram",
            'scheduler_scheduling_algorithm_duration_seconds_bucket{le="+Inf"} 2',
            "scheduler_scheduling_algorithm_duration_seconds_sum 0.012",
            "scheduler_scheduling_algorithm_duration_seconds_count 2",
            "# TYPE scheduler_scheduling_attempt_duration_seconds histogram",
            'scheduler_scheduling_attempt_duration_seconds_bucket{profile="q",result="scheduled",le="+Inf"} 2',
            'scheduler_scheduling_attempt_duration_seconds_sum{profile="q",result="scheduled"} 0.05',
            'scheduler_scheduling_attempt_duration_seconds_count{profile="q",result="scheduled"} 2',
            'scheduler_scheduling_attempt_duration_seconds_bucket{profile="q",result="error",le="+Inf"} 1',
            'scheduler_scheduling_attempt_duration_seconds_sum{profile="q",result="error"} 9',
            'scheduler_scheduling_attempt_duration_seconds_count{profile="q",result="error"} 1',
            "# TYPE scheduler_pod_scheduling_sli_duration_seconds histogram",
            'scheduler_pod_scheduling_sli_duration_seconds_bucket{attempts="1",le="+Inf"} 1',
            'scheduler_pod_scheduling_sli_duration_seconds_sum{attempts="1"} 0.03',
            'scheduler_pod_scheduling_sli_duration_seconds_count{attempts="1"} 1',
            'scheduler_pod_scheduling_sli_duration_seconds_bucket{attempts="2",le="+Inf"} 1',
            'scheduler_pod_scheduling_sli_duration_seconds_sum{attempts="2"} 0.09',
            'scheduler_pod_scheduling_sli_duration_seconds_count{attempts="2"} 1',
            "",
        ]
    )
    steps = scheduler_seconds(text)
    assert steps == pytest.approx({"algorithm": 0.006, "attempt": 0.025, "queued to bound": 0.06})
    assert scheduler_seconds("") == {}
    outcome = run("trimaran-tlp", [0.1] * 4, [0.5])
    outcome.scheduler = steps
    assert render_decisions([outcome]) == [
        "  trimaran-tlp: kube-scheduler's mean times: algorithm 6.0 ms, attempt 25.0 ms, "
        "queued to bound 60.0 ms"
    ]
    assert replayed(json.loads(json.dumps(recorded(outcome)))).scheduler == steps


def test_the_minimal_extender_cannot_run_unbuilt_without_go(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Built the first time it runs: without its binary and without Go it says why and is
    skipped, rather than failing inside a measured round."""
    minimal = BY_KEY["minimal-extender"]
    monkeypatch.setattr(quality_strategies, "minimal_extender_binary", lambda: tmp_path / "none")
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert minimal.cannot_run() == (
        "the minimal extender is not built and Go is not on PATH to build it"
    )
    built = tmp_path / "minimal-extender"
    built.write_bytes(b"")
    monkeypatch.setattr(quality_strategies, "minimal_extender_binary", lambda: built)
    assert minimal.cannot_run() is None
