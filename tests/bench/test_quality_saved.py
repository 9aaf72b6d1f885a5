"""bench/quality.py's saved runs name the trace they played: ``--from`` reads them as that
trace, refuses flags that say otherwise and runs of different traces pooled together, and still
reads a run saved before runs named their trace as the flags say."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import quality
from bench.quality_outcome import Outcome
from bench.quality_report import recorded
from bench.quality_saved import Asked, Played, SavedRunError, load_run, pooled, save_run
from bench.quality_strategies import BY_KEY
from sandbox.workload import Load, Recording


def outcome(key: str, over: int) -> Outcome:
    """``over`` seconds of node a above the CPU limit out of 20."""
    recording = Recording()
    for second in range(20):
        cpu = 0.9 if second < over else 0.1
        recording.add(float(second), {"a": Load(cpu, 0.1), "b": Load(0.1, 0.1)})
    return Outcome(BY_KEY[key], recording, [0.5, 1.0], pending=0, created=2)


def saved(
    folder: Path,
    name: str,
    played: Played | None,
    rounds: int = 1,
    keys: tuple[str, ...] = ("plain", "estimation"),
    skipped: tuple[str, ...] = (),
) -> Path:
    run = [
        [outcome(key, 10 if index == 0 else 3) for index, key in enumerate(keys)]
        + [Outcome(BY_KEY[key], skipped="not built") for key in skipped]
        for _ in range(rounds)
    ]
    path = folder / name
    if played is None:  # saved before runs named their trace
        path.write_text(json.dumps([[recorded(o) for o in outcomes] for outcomes in run]))
    else:
        save_run(path, run, played)
    return path


DRIFT = Played("drift", 11, 0.4, 150.0)
FULL = Played("full", 7, 0.0, 25.0)


def test_a_saved_run_reads_back_with_the_trace_it_played(tmp_path: Path) -> None:
    path = saved(tmp_path, "run.json", DRIFT, rounds=2)
    rounds, played = load_run(path)
    assert played == DRIFT
    assert [[o.strategy.key for o in outcomes] for outcomes in rounds] == [
        ["plain", "estimation"],
        ["plain", "estimation"],
    ]
    assert rounds[0][1].recording.samples == outcome("estimation", 3).recording.samples


def test_a_run_naming_its_trace_is_reported_as_that_trace_without_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = saved(tmp_path, "run.json", DRIFT)
    monkeypatch.setattr("sys.argv", ["quality.py", "--from", str(path), "--out", str(tmp_path)])
    quality.main()
    out = capsys.readouterr().out
    assert "trace: seed 11, " in out
    assert "(0.2/s, lasting the round)" in out
    assert "targets (drift trace):" in out


@pytest.mark.parametrize(
    ("flags", "refusal"),
    [
        (["--quick"], "played the drift trace, not --quick"),
        (["--seed", "7"], "played seed 11, not --seed 7"),
        (["--growth", "0.3"], "played growth 0.4, not --growth 0.3"),
        (["--drain", "60"], "played drain 150, not --drain 60"),
    ],
)
def test_a_flag_that_contradicts_the_saved_trace_is_refused_naming_it(
    flags: list[str],
    refusal: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = saved(tmp_path, "run.json", DRIFT)
    monkeypatch.setattr("sys.argv", ["quality.py", "--from", str(path), *flags])
    with pytest.raises(SystemExit):
        quality.main()
    assert f"--from: {path} {refusal}" in capsys.readouterr().err


def test_flags_that_agree_with_the_saved_trace_are_accepted(tmp_path: Path) -> None:
    path = saved(tmp_path, "run.json", DRIFT)
    _, seeds, played = pooled([path], Asked("drift", 11, 0.4, 150.0))
    assert (seeds, played) == ([11], DRIFT)


def test_a_burst_run_is_refused_when_the_flags_ask_for_drift(tmp_path: Path) -> None:
    path = saved(tmp_path, "run.json", FULL)
    with pytest.raises(SavedRunError, match="played the full trace, not --drift"):
        pooled([path], Asked("drift", None, None))


def test_runs_of_different_traces_are_not_pooled(tmp_path: Path) -> None:
    drift, full = saved(tmp_path, "a.json", DRIFT), saved(tmp_path, "b.json", FULL)
    with pytest.raises(SavedRunError) as refused:
        pooled([drift, full], Asked(None, None, None))
    assert "the drift trace, growth 0.4, drain 150" in str(refused.value)
    assert "the full trace, growth 0, drain 25" in str(refused.value)
    longer = saved(tmp_path, "c.json", Played("drift", 11, 0.4, 300.0))
    with pytest.raises(SavedRunError, match="drain 300"):
        pooled([drift, longer], Asked(None, None, None))


def test_runs_at_different_rebalance_highs_are_not_pooled_and_a_flag_must_agree(
    tmp_path: Path,
) -> None:
    headroom = Played("drift", 11, 0.4, 150.0, 0.6)
    at_limit, under = saved(tmp_path, "a.json", DRIFT), saved(tmp_path, "b.json", headroom)
    assert load_run(under)[1] == headroom
    with pytest.raises(SavedRunError) as refused:
        pooled([at_limit, under], Asked(None, None, None))
    assert "rebalance high 0.7" in str(refused.value)
    assert "rebalance high 0.6" in str(refused.value)
    with pytest.raises(SavedRunError, match="played rebalance high 0.6, not --rebalance-high 0.7"):
        pooled([under], Asked(None, None, None, None, 0.7))
    assert pooled([under], Asked(None, None, None, None, 0.6))[2] == headroom


def test_a_run_saved_before_rebalance_high_was_kept_acted_at_the_limit(tmp_path: Path) -> None:
    path = saved(tmp_path, "run.json", DRIFT)
    body = json.loads(path.read_text())
    del body["played"]["rebalance_high"]
    path.write_text(json.dumps(body))
    assert load_run(path)[1] == Played("drift", 11, 0.4, 150.0, 0.7)


def test_a_run_saved_before_runs_named_their_trace_acted_at_the_limits(tmp_path: Path) -> None:
    path = saved(tmp_path, "old.json", None)
    assert pooled([path], Asked(None, None, None))[2].rebalance_high == 0.7
    with pytest.raises(SavedRunError, match="played rebalance high 0.7, not --rebalance-high 0.6"):
        pooled([path], Asked(None, None, None, None, 0.6))


def test_a_run_at_another_rebalance_high_is_reported_as_such(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = saved(tmp_path, "run.json", Played("drift", 11, 0.4, 150.0, 0.6))
    monkeypatch.setattr("sys.argv", ["quality.py", "--from", str(path), "--out", str(tmp_path)])
    quality.main()
    assert "act at 60% of a node (low 48%) rather than at the limits" in capsys.readouterr().out


def test_runs_of_one_trace_pool_with_each_runs_own_seeds(tmp_path: Path) -> None:
    first = saved(tmp_path, "a.json", DRIFT, rounds=2)
    second = saved(tmp_path, "b.json", Played("drift", 20, 0.4, 150.0))
    rounds, seeds, played = pooled([first, second], Asked(None, None, None))
    assert (len(rounds), seeds, played.trace) == (3, [11, 12, 20], "drift")


def keys_of(rounds: list[list[Outcome]]) -> list[list[str]]:
    return [[o.strategy.key + ("?" if o.skipped else "") for o in r] for r in rounds]


def test_pieces_of_one_seed_pool_into_one_round_and_a_replay_into_its_own(
    tmp_path: Path,
) -> None:
    first = saved(tmp_path, "a.json", DRIFT, rounds=2)
    piece = saved(tmp_path, "b.json", DRIFT, keys=("hot-only",))
    again = saved(tmp_path, "c.json", DRIFT, keys=("plain", "rebalance"))
    rounds, seeds, _ = pooled([first, piece, again], Asked(None, None, None))
    assert seeds == [11, 12, 11]
    assert keys_of(rounds) == [
        ["plain", "estimation", "hot-only", "rebalance"],
        ["plain", "estimation"],
        ["plain"],
    ]


def test_rounds_of_one_seed_from_runs_that_started_apart_stay_apart(tmp_path: Path) -> None:
    # a run's node background follows its first seed: seed 12 from a run of 11 and 12 is
    # not the same round as seed 12 from a run started there
    first = saved(tmp_path, "a.json", DRIFT, rounds=2)
    later = saved(tmp_path, "b.json", Played("drift", 12, 0.4, 150.0), keys=("hot-only",))
    rounds, seeds, _ = pooled([first, later], Asked(None, None, None))
    assert seeds == [11, 12, 12]
    assert keys_of(rounds) == [["plain", "estimation"], ["plain", "estimation"], ["hot-only"]]


def test_a_strategy_one_piece_skipped_gives_way_to_the_piece_that_ran_it(tmp_path: Path) -> None:
    without = saved(tmp_path, "a.json", DRIFT, keys=("plain",), skipped=("trimaran-tlp",))
    ran = saved(tmp_path, "b.json", DRIFT, keys=("trimaran-tlp",))
    skipped_again = saved(tmp_path, "c.json", DRIFT, keys=("hot-only",), skipped=("plain",))
    rounds, seeds, _ = pooled([without, ran, skipped_again], Asked(None, None, None))
    assert (seeds, keys_of(rounds)) == ([11], [["plain", "trimaran-tlp", "hot-only"]])
    # skipped where nothing ran: still shown, as not run
    rounds, _, _ = pooled([without], Asked(None, None, None))
    assert keys_of(rounds) == [["plain", "trimaran-tlp?"]]


def test_a_run_saved_before_runs_named_their_trace_is_read_as_the_flags_say(
    tmp_path: Path,
) -> None:
    path = saved(tmp_path, "old.json", None, rounds=2)
    _, seeds, played = pooled([path], Asked("drift", 3, None))
    assert (seeds, played) == ([3, 4], Played("drift", 3, 0.4, 150.0))
    _, seeds, played = pooled([path], Asked(None, None, 0.3, 40.0))
    assert (seeds, played) == ([7, 8], Played("full", 7, 0.3, 40.0))


@pytest.mark.parametrize(
    ("played", "named"),
    [
        ({"trace": "slow", "seed": 7, "growth": 0, "drain": 25}, "played.trace: 'slow'"),
        ({"trace": "full", "seed": "7", "growth": 0, "drain": 25}, "played.seed: '7'"),
        ({"trace": "full", "seed": 7, "growth": True, "drain": 25}, "played.growth: True"),
        ({"trace": "full", "seed": 7, "growth": 0, "drain": None}, "played.drain: None"),
        ({"trace": "full", "seed": 7, "growth": 0}, "KeyError('drain')"),
        ([], "played: not an object"),
    ],
)
def test_a_malformed_saved_trace_is_refused_naming_the_field(
    played: object, named: str, tmp_path: Path
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"played": played, "rounds": []}))
    with pytest.raises(SavedRunError) as refused:
        load_run(path)
    assert f"--from: {path} is not a saved run: " in str(refused.value)
    assert named in str(refused.value)
