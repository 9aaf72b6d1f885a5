"""bench/quality.py's targets: each strategy's figures per round and their medians over
rounds, and the targets judged on them with their measured ratios (against hot-only and plain,
the real Trimaran, and, for the rebalancer, plain and the real descheduler)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from bench.quality_moves import Moves
from bench.quality_outcome import Outcome
from bench.quality_strategies import (
    CPU_LIMIT,
    MEMORY_LIMIT,
    REBALANCE_PERIOD,
    REBALANCE_ROUNDS,
    WINDOW,
)
from bench.results import Figure
from bench.results import measured as judged
from bench.targets import Target, target
from sandbox.workload import (
    Quality,
    averaged_overload,
    overload_if_ended,
    percentile,
    quality,
)
from shared.durations import parse_duration

OF_HOT_ONLY = target("quality", "estimation-overload-of-hot-only")


OF_PLAIN = target("quality", "estimation-overload-of-plain")


LATENCY_OF_HOT_ONLY = target("quality", "estimation-latency-of-hot-only")


REBALANCE_OF_PLAIN = target("quality", "rebalance-overload-of-plain")


REBALANCE_OF_BOTH = target("quality", "rebalance-overload-of-loadsched-descheduler")


EVICTIONS_OF_DESCHEDULER = target("quality", "rebalance-evictions-of-descheduler")


UNSAFE_MOVES = target("quality", "rebalance-unsafe-moves")


PEERS = {
    "trimaran-tlp": (
        target("quality", "estimation-overload-of-trimaran-tlp"),
        target("quality", "estimation-latency-of-trimaran-tlp"),
        "tlp",
    ),
    "trimaran-lvrb": (
        target("quality", "estimation-overload-of-trimaran-lvrb"),
        target("quality", "estimation-latency-of-trimaran-lvrb"),
        "lvrb",
    ),
}
"""Each real Trimaran strategy: estimation's two targets against it, and loadsched's own
policy of the same plugin, printed beside."""


BESIDE_PEERS = {
    "estimation-watch": "estimation, kube-scheduler binds: the chart's default",
    "minimal-extender": "an HTTP extender that decides nothing",
}
"""Printed beside each real Trimaran strategy when they ran, not judged: the recommended
policy without the bind verb, and an HTTP extender's latency apart from what it decides."""


FIGURES: list[Figure] = []
"""The targets' figures as judged, for out/results (:mod:`bench.results`)."""


@dataclass(frozen=True)
class Row:
    outcome: Outcome
    quality: Quality
    p50: float
    p99: float


def rows(outcomes: Sequence[Outcome]) -> list[Row]:
    out = []
    for o in outcomes:
        if o.skipped is None:
            measured = quality(o.recording, cpu_limit=CPU_LIMIT, memory_limit=MEMORY_LIMIT)
            out.append(Row(o, measured, percentile(o.latencies, 50), percentile(o.latencies, 99)))
    return out


def _ratio(a: float, b: float) -> float:
    if b == 0:
        return 0.0 if a == 0 else math.inf
    return a / b


@dataclass(frozen=True)
class Figures:
    """What the targets compare, for one strategy (one round, or the median of rounds)."""

    overload: float
    """Node-seconds above a limit."""
    latency_p99: float


def figures(outcomes: Sequence[Outcome]) -> dict[str, Figures]:
    return {
        r.outcome.strategy.key: Figures(r.quality.overload_node_seconds, r.p99)
        for r in rows(outcomes)
    }


def median_figures(rounds: Sequence[Sequence[Outcome]]) -> dict[str, Figures]:
    """Per strategy, the median over the rounds it ran in of each figure."""
    per_round = [figures(outcomes) for outcomes in rounds]
    keys = dict.fromkeys(k for measured in per_round for k in measured)
    out = {}
    for key in keys:
        ran = [measured[key] for measured in per_round if key in measured]
        out[key] = Figures(
            statistics.median(f.overload for f in ran),
            statistics.median(f.latency_p99 for f in ran),
        )
    return out


def render_medians(rounds: Sequence[Sequence[Outcome]]) -> str:
    medians = median_figures(rounds)
    wide = max([14, *(len(key) + 1 for key in medians)])
    lines = [f"{'strategy':<{wide}}{'overload node-s':>17}{'lat p99 s':>11}   per round"]
    for key, median in medians.items():
        each = [figures(outcomes).get(key) for outcomes in rounds]
        shown = ", ".join(f"{f.overload:.0f}/{f.latency_p99:.2f}" for f in each if f is not None)
        lines.append(f"{key:<{wide}}{median.overload:17.0f}{median.latency_p99:11.2f}   {shown}")
    return "\n".join(lines)


def targets(measured: dict[str, Figures]) -> tuple[list[str], bool]:
    """The three targets, each met or missed with its measured ratio; False if any is missed
    or cannot be measured."""
    est, hot, plain = (measured.get(k) for k in ("estimation", "hot-only", "plain"))
    if est is None or hot is None or plain is None:
        missing = [
            k for k, r in (("estimation", est), ("hot-only", hot), ("plain", plain)) if r is None
        ]
        return [f"targets not measured: {', '.join(missing)} did not run"], False
    checks = [
        (
            OF_HOT_ONLY,
            "estimation overload node-s {sign} {bound:g} × hot-only",
            _ratio(est.overload, hot.overload),
            f"{est.overload:.0f} / {hot.overload:.0f}",
        ),
        (
            OF_PLAIN,
            "estimation overload node-s {sign} {bound:g} × plain",
            _ratio(est.overload, plain.overload),
            f"{est.overload:.0f} / {plain.overload:.0f}",
        ),
        (
            LATENCY_OF_HOT_ONLY,
            "estimation latency p99 {sign} {bound:g} × hot-only",
            _ratio(est.latency_p99, hot.latency_p99),
            f"{est.latency_p99:.2f} s / {hot.latency_p99:.2f} s",
        ),
    ]
    return judge(checks)


def peer_targets(rounds: Sequence[Sequence[Outcome]]) -> tuple[list[str], bool]:
    """Estimation against each real Trimaran strategy in the run (medians over rounds, with
    each round's ratio), then loadsched's own policy of that plugin beside the real one; not
    measured (a miss) when one side of a pair in the run did not run; nothing without one."""
    medians = median_figures(rounds)
    asked = {o.strategy.key for outcomes in rounds for o in outcomes}
    est = medians.get("estimation")
    checks: list[Check] = []
    beside, unmeasured = [], []
    for key, (overload_goal, latency_goal, copy) in PEERS.items():
        if key not in asked:
            continue
        peer = medians.get(key)
        if est is None or peer is None:
            missing = [k for k, f in (("estimation", est), (key, peer)) if f is None]
            unmeasured.append(
                f"  targets against {key} not measured: {', '.join(missing)} did not run"
            )
            continue
        each = [
            (f["estimation"], f[key])
            for f in (figures(outcomes) for outcomes in rounds)
            if "estimation" in f and key in f
        ]
        per_round = ", ".join(f"{_ratio(a.overload, b.overload):.2f}" for a, b in each)
        checks.append(
            (
                overload_goal,
                f"estimation overload node-s {{sign}} {{bound:g}} × {key}",
                _ratio(est.overload, peer.overload),
                f"{est.overload:.0f} / {peer.overload:.0f}; per round {per_round}",
            )
        )
        checks.append(
            (
                latency_goal,
                f"estimation latency p99 {{sign}} {{bound:g}} × {key}",
                _ratio(est.latency_p99, peer.latency_p99),
                f"{est.latency_p99:.2f} s / {peer.latency_p99:.2f} s",
            )
        )
        if (ours := medians.get(copy)) is not None:
            beside.append(
                f"  {copy} (loadsched's policy of it) beside {key}: overload node-s "
                f"{ours.overload:.0f} / {peer.overload:.0f} "
                f"(ratio {_ratio(ours.overload, peer.overload):.2f}), latency p99 "
                f"{ours.latency_p99:.2f} s / {peer.latency_p99:.2f} s"
            )
        for other, what in BESIDE_PEERS.items():
            if (theirs := medians.get(other)) is not None:
                beside.append(
                    f"  {other} ({what}) beside {key}: overload node-s "
                    f"{theirs.overload:.0f} / {peer.overload:.0f}, latency p99 "
                    f"{theirs.latency_p99:.2f} s / {peer.latency_p99:.2f} s "
                    f"(ratio {_ratio(theirs.latency_p99, peer.latency_p99):.2f})"
                )
    lines, ok = judge(checks)
    return lines + beside + unmeasured, ok and not unmeasured


Check = tuple[Target, str, float, str]
"""A target, its line (``{sign}`` and ``{bound}`` filled in), the figure, how it was made."""


def judge(checks: Sequence[Check]) -> tuple[list[str], bool]:
    """Each check's line with its verdict (its figure recorded for out/results); False if
    one counts as missed."""
    lines, ok = [], True
    for goal, name, ratio, shown in checks:
        FIGURES.append(judged(goal, ratio))
        ok = ok and not goal.counts(ratio)
        title = name.format(sign=goal.sign, bound=goal.bound)
        lines.append(f"  {title}: {goal.judge(ratio)} (ratio {ratio:.2f}; {shown})")
    return lines, ok


def unsafe(moves: Moves) -> int:
    """Moves no SRE accepts: workloads evicted twice, replacements back where they left,
    evictions past a budget, replacements never bound."""
    return moves.evicted_twice + moves.back_on_source + moves.over_budget + moves.lost


def moves_targets(rounds: Sequence[Sequence[Outcome]]) -> tuple[list[str], bool]:
    """The rebalancer's targets against plain, the real descheduler and loadsched with it
    (medians over rounds; unsafe moves: the worst round); none when it did not run."""
    overload = {k: f.overload for k, f in median_figures(rounds).items()}
    ran = [o for outcomes in rounds for o in outcomes if o.skipped is None and o.moves]
    if "rebalance" not in overload or not ran:
        return [], True
    evictions: dict[str, list[int]] = {}
    for o in ran:
        assert o.moves is not None
        evictions.setdefault(o.strategy.key, []).append(o.moves.evictions)
    median_evictions = {k: statistics.median(v) for k, v in evictions.items()}
    checks: list[Check] = []
    for goal, other, name in (
        (REBALANCE_OF_PLAIN, "plain", "rebalance overload node-s {sign} {bound:g} × plain"),
        (
            REBALANCE_OF_BOTH,
            "loadsched+descheduler",
            "rebalance overload node-s {sign} {bound:g} × loadsched+descheduler",
        ),
    ):
        if other in overload:
            ratio = _ratio(overload["rebalance"], overload[other])
            shown = f"{overload['rebalance']:.0f} / {overload[other]:.0f}"
            checks.append((goal, name, ratio, shown))
    if "descheduler" in median_evictions and "rebalance" in median_evictions:
        ours, theirs = median_evictions["rebalance"], median_evictions["descheduler"]
        checks.append(
            (
                EVICTIONS_OF_DESCHEDULER,
                "rebalance evictions {sign} {bound:g} × descheduler",
                _ratio(ours, theirs),
                f"{ours:g} / {theirs:g}",
            )
        )
    worst = max(unsafe(o.moves) for o in ran if o.strategy.key == "rebalance" and o.moves)
    checks.append(
        (UNSAFE_MOVES, "rebalance unsafe moves {sign} {bound:g}", float(worst), f"{worst}")
    )
    lines, ok = judge(checks)
    if not any(evictions.get("rebalance", ())):
        lines.append(
            "  the rebalancer evicted nothing in any round: its overload is its placement's "
            "(estimation + hot value)"
            + (
                f", {overload['estimation']:.0f} node-s as estimation"
                if "estimation" in overload
                else ""
            )
            + ", and differs from it by the rounds' spread alone"
        )
    lines += averaged_lines(rounds)
    lines += reaction_floor(rounds, plain=overload.get("plain"))
    for key in ("descheduler", "loadsched+descheduler"):
        peer = [o.moves for o in ran if o.strategy.key == key and o.moves]
        if peer:
            lines.append(
                f"  {key}, beside (worst round): "
                f"{max(m.evicted_twice for m in peer)} workloads evicted twice, "
                f"{max(m.back_on_source for m in peer)} replacements back on their node, "
                f"{max(m.over_budget for m in peer)} past a budget, "
                f"{max(m.lost for m in peer)} never bound"
            )
    return lines, ok


AVERAGED_OVER = parse_duration(WINDOW).total_seconds()
"""The bench's metrics' window: the rebalancer acts on 1-minute averages."""


def averaged_lines(rounds: Sequence[Sequence[Outcome]]) -> list[str]:
    """Each strategy's node-seconds a 1-minute average of its true usage was above a limit
    (:func:`averaged_overload`; the median over its rounds): the overload a rebalancer acting
    on those averages can see, beside the one judged, which counts every swing."""
    seen: dict[str, list[float]] = {}
    for outcomes in rounds:
        for o in outcomes:
            if o.skipped is None:
                seen.setdefault(o.strategy.key, []).append(
                    averaged_overload(
                        o.recording,
                        cpu_limit=CPU_LIMIT,
                        memory_limit=MEMORY_LIMIT,
                        window=AVERAGED_OVER,
                    )
                )
    if not seen:
        return []
    shown = ", ".join(f"{key} {statistics.median(v):.0f}" for key, v in seen.items())
    return [
        "  beside: node-seconds a 1-minute average was above a limit (the overload the "
        f"averages show, not the swings within a minute), median: {shown}"
    ]


REACTIONS = (
    5.0,
    10.0,
    REBALANCE_ROUNDS * parse_duration(REBALANCE_PERIOD).total_seconds(),
)
"""How long after an overload begins :func:`reaction_floor` ends it: quicker than a round of the
1-minute metrics could show it, and about the soonest the bench's rebalancer acts (two rounds
of 15 s; the 1-minute average must first cross its threshold, 9 s after the fact)."""


def reaction_floor(rounds: Sequence[Sequence[Outcome]], *, plain: float | None) -> list[str]:
    """About the least a rebalancer could leave of the overload of loadsched's placement
    (estimation + hot value): that of ``estimation``, and of ``rebalance`` itself (what its
    moves left), had each overload ended a reaction time after it began
    (:func:`overload_if_ended`, an estimate, not a bound; the median over the rounds the
    strategy ran in), beside plain's median when it ran. What the rebalance strategy leaves
    within the first reaction time of its overloads, no mover acting on the metrics removes."""
    lines = []
    for key in ("estimation", "rebalance"):
        recordings = [
            o.recording
            for outcomes in rounds
            for o in outcomes
            if o.strategy.key == key and o.skipped is None
        ]
        if not recordings:
            continue
        floors = []
        for after in REACTIONS:
            left = statistics.median(
                overload_if_ended(r, cpu_limit=CPU_LIMIT, memory_limit=MEMORY_LIMIT, after=after)
                for r in recordings
            )
            of_plain = f" ({_ratio(left, plain):.2f} × plain)" if plain else ""
            floors.append(f"{after:g} s {left:.0f} node-s{of_plain}")
        lines.append(
            f"  beside: about the least a rebalancer can leave of the {key} strategy's own "
            "overload, had every overload ended that long after it began (median of "
            f"{len(recordings)} "
            f"round{'s' * (len(recordings) > 1)}): " + ", ".join(floors)
        )
    return lines
