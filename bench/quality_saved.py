"""bench/quality.py's saved runs: out/quality.json names the trace it played beside every round's
outcomes, so that ``--from`` prints the report of the trace that was played, and refuses to pool
runs of different traces or to read one as another."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.quality_outcome import Outcome
from bench.quality_report import recorded, replayed
from bench.quality_strategies import CPU_LIMIT
from bench.quality_traces import SEED, SHAPES, trace_settings
from sandbox.workload import TraceShape


class SavedRunError(ValueError):
    """A saved run that cannot be read, or cannot be read as asked."""


@dataclass(frozen=True)
class Played:
    """The trace a run played: its name, first seed (round r played ``seed + r``), share of
    growing pods and the seconds it played once arrivals stopped; and the ``high`` its movers
    acted at (``--rebalance-high``; runs saved before it acted at the limit)."""

    trace: str
    seed: int
    growth: float
    drain: float
    rebalance_high: float = CPU_LIMIT

    def shape(self) -> TraceShape:
        return trace_settings(self.trace, growth=self.growth, drain=self.drain)[0]

    def as_json(self) -> dict[str, object]:
        return {
            "trace": self.trace,
            "seed": self.seed,
            "growth": self.growth,
            "drain": self.drain,
            "rebalance_high": self.rebalance_high,
        }


@dataclass(frozen=True)
class Asked:
    """What ``--from`` was given beside the saved runs: ``None`` where a flag was not given."""

    trace: str | None
    seed: int | None
    growth: float | None
    drain: float | None = None
    rebalance_high: float | None = None


def save_run(path: Path, rounds: Sequence[Sequence[Outcome]], played: Played) -> None:
    """Every round's outcomes and the trace they played, as JSON."""
    body = {
        "played": played.as_json(),
        "rounds": [[recorded(o) for o in outcomes] for outcomes in rounds],
    }
    path.write_text(json.dumps(body))


def load_run(path: Path) -> tuple[list[list[Outcome]], Played | None]:
    """A saved run's rounds, and the trace it played (``None`` for a run saved before runs
    named their trace: a bare list of rounds)."""
    try:
        body = json.loads(path.read_text())
        if isinstance(body, list):
            return _rounds(body), None
        return _rounds(body["rounds"]), _played(body["played"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SavedRunError(f"--from: {path} is not a saved run: {e!r}") from e


def pooled(paths: Sequence[Path], asked: Asked) -> tuple[list[list[Outcome]], list[int], Played]:
    """The rounds of every saved run, the seed each round played, and the one trace they all
    played. A run that names its trace is read as that trace: a flag that says otherwise is
    refused, naming it. A run that does not is read as the flags say (defaults: the burst
    trace, :data:`~bench.quality_traces.SEED`), at the limits' rebalance high (it predates
    ``--rebalance-high``). Runs of different traces, growth, drain or rebalance high are not
    pooled. The rounds one run's start played on one seed (runs of ``--strategies`` in pieces,
    from the same ``--seed``: a run's node background follows its first seed) are one round,
    the strategies side by side; a strategy that played that round again is in a round of
    its own, and one the piece skipped gives way to one that ran."""
    rounds: list[list[Outcome]] = []
    places: list[tuple[int, int]] = []
    plays: list[tuple[Path, Played]] = []
    for path in paths:
        run, played = load_run(path)
        if played is None:
            played = _as_asked(asked)
        _check(path, played, asked)
        plays.append((path, played))
        for number, outcomes in enumerate(run):
            for outcome in outcomes:
                _join(rounds, places, (played.seed, played.seed + number), outcome)
    kinds = {(p.trace, p.growth, p.drain, p.rebalance_high) for _, p in plays}
    if len(kinds) > 1:
        described = "; ".join(f"{path}: {_described(p)}" for path, p in plays)
        raise SavedRunError(
            f"--from: the runs played different traces or rebalance highs ({described}); pool "
            "runs of one trace and rebalance high"
        )
    return rounds, [seed for _, seed in places], plays[0][1]


def _join(
    rounds: list[list[Outcome]],
    places: list[tuple[int, int]],
    place: tuple[int, int],
    outcome: Outcome,
) -> None:
    """Put ``outcome`` in the first round played at ``place`` (a run's first seed, the round's
    seed) that has no outcome of its strategy yet, or in place of a skipped one; a skipped
    outcome where one ran is left out; else it starts a round."""
    key = outcome.strategy.key
    for joined, at in zip(rounds, places, strict=True):
        if at != place:
            continue
        same = next((i for i, o in enumerate(joined) if o.strategy.key == key), None)
        if same is None:
            joined.append(outcome)
            return
        if joined[same].skipped is not None:
            joined[same] = outcome
            return
        if outcome.skipped is not None:
            return
    rounds.append([outcome])
    places.append(place)


def _check(path: Path, played: Played, asked: Asked) -> None:
    if asked.trace is not None and asked.trace != played.trace:
        raise SavedRunError(f"--from: {path} played the {played.trace} trace, not --{asked.trace}")
    if asked.seed is not None and asked.seed != played.seed:
        raise SavedRunError(f"--from: {path} played seed {played.seed}, not --seed {asked.seed}")
    if asked.growth is not None and asked.growth != played.growth:
        raise SavedRunError(
            f"--from: {path} played growth {played.growth:g}, not --growth {asked.growth:g}"
        )
    if asked.drain is not None and asked.drain != played.drain:
        raise SavedRunError(
            f"--from: {path} played drain {played.drain:g}, not --drain {asked.drain:g}"
        )
    if asked.rebalance_high is not None and asked.rebalance_high != played.rebalance_high:
        raise SavedRunError(
            f"--from: {path} played rebalance high {played.rebalance_high:g}, not "
            f"--rebalance-high {asked.rebalance_high:g}"
        )


def _as_asked(asked: Asked) -> Played:
    trace = asked.trace or "full"
    shape, drain, _ = trace_settings(trace, growth=asked.growth, drain=asked.drain)
    seed = SEED if asked.seed is None else asked.seed
    return Played(trace, seed, shape.growth_share, drain, CPU_LIMIT)


def _described(played: Played) -> str:
    return (
        f"the {played.trace} trace, growth {played.growth:g}, drain {played.drain:g}, "
        f"rebalance high {played.rebalance_high:g}"
    )


def _rounds(body: Any) -> list[list[Outcome]]:
    if not isinstance(body, list) or not all(isinstance(r, list) for r in body):
        raise ValueError("rounds: not a list of rounds")
    return [[replayed(record) for record in outcomes] for outcomes in body]


def _played(body: Any) -> Played:
    if not isinstance(body, dict):
        raise ValueError("played: not an object")
    trace, seed, growth, drain = body["trace"], body["seed"], body["growth"], body["drain"]
    if trace not in SHAPES:
        raise ValueError(f"played.trace: {trace!r} is not one of {', '.join(SHAPES)}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"played.seed: {seed!r} is not a whole number")
    high = body.get("rebalance_high", CPU_LIMIT)
    for field, value in (("growth", growth), ("drain", drain), ("rebalance_high", high)):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"played.{field}: {value!r} is not a number")
    return Played(trace, seed, float(growth), float(drain), float(high))
