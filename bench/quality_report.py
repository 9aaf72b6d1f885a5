"""bench/quality.py's results: the table, the targets with their measured ratios, and the chart
of the busiest node's true CPU over time per strategy (self-contained HTML with SVG, and a
PNG when matplotlib is installed)."""

from __future__ import annotations

import dataclasses
import html
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.quality_moves import Moves
from bench.quality_run import NODE_CPUS, SCHEDULER_STEPS, Outcome
from bench.quality_strategies import (
    BY_KEY,
    CPU_LIMIT,
    EVICTING,
    FACTORS,
    MEMORY_LIMIT,
    REBALANCE_PERIOD,
    REBALANCE_ROUNDS,
)
from bench.results import Figure
from bench.results import measured as judged
from bench.targets import Target, target
from sandbox.workload import (
    Load,
    Quality,
    Recording,
    Trace,
    overload_if_ended,
    percentile,
    pod_usage,
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

COLORS = {
    "plain": "#7f8c8d",
    "hot-only": "#e67e22",
    "estimation": "#27ae60",
    "estimation-minmax": "#16a085",
    "estimation-watch": "#52be80",
    "minimal-extender": "#95a5a6",
    "estimation-wait": "#2ecc71",
    "estimation-keep": "#1e8449",
    "estimation-alone": "#0b5345",
    "tlp": "#2980b9",
    "lvrb": "#8e44ad",
    "trimaran-tlp": "#5dade2",
    "trimaran-lvrb": "#bb8fce",
    "rebalance": "#c0392b",
    "descheduler": "#34495e",
    "loadsched+descheduler": "#d35400",
}


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


def render_table(outcomes: Sequence[Outcome]) -> str:
    head = (
        f"{'strategy':<38}{'overload':>10}{'cpu p99':>9}{'cpu max':>9}{'spread':>8}"
        f"{'lat p50':>9}{'lat p99':>9}{'pending':>9}"
    )
    lines = [head, f"{'':<38}{'node-s':>10}{'':>9}{'':>9}{'σ':>8}{'s':>9}{'s':>9}", "-" * len(head)]
    measured = {r.outcome.strategy.key: r for r in rows(outcomes)}
    for o in outcomes:
        title = f"{o.strategy.key}: {o.strategy.title}"[:37]
        row = measured.get(o.strategy.key)
        if row is None:
            lines.append(f"{title:<38}not run: {o.skipped}")
            continue
        q = row.quality
        lines.append(
            f"{title:<38}{q.overload_node_seconds:10.0f}{q.cpu_p99:9.0%}{q.cpu_max:9.0%}"
            f"{q.spread:8.3f}{row.p50:9.2f}{row.p99:9.2f}{o.pending:>5}/{o.created:<3}"
        )
    return "\n".join(lines)


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


def why(
    rounds: Sequence[Sequence[Outcome]],
    measured: dict[str, Figures],
    traces: Sequence[Trace] = (),
) -> list[str]:
    """For each target the medians miss, what the recording shows behind it: the nodes that
    carried estimation's overload (node-seconds, each round) and, given the rounds' traces,
    what was on each at its peak (:func:`at_peak`); or its pods slower than the latency bound
    (how many, how slow, each round)."""
    est, hot, plain = (measured.get(k) for k in ("estimation", "hot-only", "plain"))
    if est is None or hot is None or plain is None:
        return []
    lines = []
    if est.overload > min(0.5 * hot.overload, 0.2 * plain.overload):
        for number, outcomes in enumerate(rounds, 1):
            for o in outcomes:
                if o.strategy.key == "estimation" and o.skipped is None:
                    carried = overload_by_node(o)
                    top = (
                        ", ".join(
                            f"{n} {s:.0f} s (peak {peak:.0%}, over from {first:.0f} to "
                            f"{last:.0f} s)"
                            for n, s, peak, first, last in carried[:3]
                        )
                        or "none"
                    )
                    lines.append(f"  why (overload), round {number}: node-seconds by node: {top}")
                    if o.decisions:  # runs saved before: not counted
                        lines.append(f"    {decided(o.decisions)}")
                    if number <= len(traces) and o.bound:  # runs saved before: no bindings
                        lines += [
                            f"    {at_peak(o, traces[number - 1], node)}"
                            for node, *_ in carried[:3]
                        ]
    bound = 1.1 * hot.latency_p99
    if est.latency_p99 > bound:
        for number, outcomes in enumerate(rounds, 1):
            for o in outcomes:
                if o.strategy.key == "estimation" and o.skipped is None:
                    slow = sorted((t for t in o.latencies if t > bound), reverse=True)
                    shown = ", ".join(f"{t:.1f}" for t in slow[:6])
                    lines.append(
                        f"  why (latency), round {number}: {len(slow)} of {len(o.latencies)} "
                        f"pods took over {bound:.2f} s to bind"
                        + (f" ({shown} s)" if slow else "")
                        + f"; p99 is the {_rank_from_top(len(o.latencies))} slowest"
                    )
                    binds = _bind_times(outcomes)
                    if binds:
                        lines.append(f"    the extender's bind took on average {binds}")
    return lines


def _bind_times(outcomes: Sequence[Outcome]) -> str:
    """Each strategy's mean time per bind call in a round, for the strategies that bound
    through the extender (a pod's latency includes its binding)."""
    return ", ".join(
        f"{o.strategy.key} {o.verbs['bind'] * 1000:.1f} ms"
        for o in outcomes
        if o.skipped is None and "bind" in o.verbs
    )


def render_decisions(outcomes: Sequence[Outcome]) -> list[str]:
    """Per strategy run through the extender: what its filter did for want of room, and its
    mean time per call by verb; per strategy, kube-scheduler's mean time by step."""
    lines = [f"  {o.strategy.key}: {decided(o.decisions)}" for o in outcomes if o.decisions]
    lines += [f"  {o.strategy.key}: {timed(o.verbs)}" for o in outcomes if o.verbs]
    return lines + [f"  {o.strategy.key}: {stepped(o.scheduler)}" for o in outcomes if o.scheduler]


def timed(verbs: dict[str, float]) -> str:
    """The extender's mean time per call by verb (:func:`bench.quality_run.verb_seconds`)."""
    each = ", ".join(f"{verb} {seconds * 1000:.2f} ms" for verb, seconds in sorted(verbs.items()))
    return f"the extender's mean time per call: {each}"


def stepped(steps: dict[str, float]) -> str:
    """kube-scheduler's mean time by step (:func:`bench.quality_run.scheduler_seconds`)."""
    each = ", ".join(
        f"{step} {steps[step] * 1000:.1f} ms" for step in SCHEDULER_STEPS if step in steps
    )
    return f"kube-scheduler's mean times: {each}"


def decided(decisions: dict[str, float]) -> str:
    """What the extender's filter did for want of room over a run
    (:func:`bench.quality_run.decision_counts`)."""
    placed = decisions.get("placed_without_room", 0.0)
    refused = decisions.get("refused_for_room", 0.0)
    return (
        f"the extender's filter: {placed:.0f} answer(s) passed a pod no node had room for "
        f"(whenNoNodeHasRoom: place), {refused:.0f} node refusal(s) for want of room for a "
        "pod's estimate"
    )


def overload_by_node(outcome: Outcome) -> list[tuple[str, float, float, float, float]]:
    """Per node over a limit: its node-seconds above a limit (the samples' gaps as in
    :func:`sandbox.workload.quality`), its peak usage then (CPU or memory, the higher), and
    when it was first and last over (seconds from the first sample); most node-seconds first."""
    times, samples = outcome.recording.times, outcome.recording.samples
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    gaps.append(statistics.median(gaps) if gaps else 1.0)
    carried: dict[str, tuple[float, float, float, float]] = {}
    for at, gap, sample in zip(times, gaps, samples, strict=True):
        for name, load in sample.items():
            if load.cpu > CPU_LIMIT or load.memory > MEMORY_LIMIT:
                since = at - times[0]
                seconds, peak, first, _ = carried.get(name, (0.0, 0.0, since, since))
                carried[name] = (seconds + gap, max(peak, load.cpu, load.memory), first, since)
    return sorted(
        ((name, *figures) for name, figures in carried.items()),
        key=lambda item: (-item[1], item[0]),
    )


KINDS = ("hungry", "typical", "light")


def at_peak(outcome: Outcome, trace: Trace, node: str) -> str:
    """What made up ``node``'s CPU at its peak: its own load, and the pods bound there that
    ran then, by usage kind, each kind's true use beside what estimation assumed of it (the
    pods' requests × the CPU factor), in points of the node."""
    times, samples = outcome.recording.times, outcome.recording.samples
    at, total = max(
        ((t, s[node].cpu) for t, s in zip(times, samples, strict=True) if node in s),
        key=lambda pair: pair[1],
    )
    profiles = {a.name: a.profile for a in trace.arrivals}
    factor = FACTORS["cpu"]
    use = dict.fromkeys(KINDS, 0.0)
    assumed = dict.fromkeys(KINDS, 0.0)
    count = dict.fromkeys(KINDS, 0)
    for pod, (where, bound_at) in outcome.bound.items():
        profile = profiles.get(pod)
        if where != node or profile is None or not bound_at <= at < bound_at + profile.lifetime:
            continue
        cores, _ = pod_usage(profile, bound_at=bound_at, now=at)
        use[profile.kind] += cores / NODE_CPUS
        assumed[profile.kind] += profile.cpu_request * factor / NODE_CPUS
        count[profile.kind] += 1
    pods = sum(use.values())
    kinds = ", ".join(
        f"{count[k]} {k} {use[k]:.0%} (estimated {assumed[k]:.0%})" for k in KINDS if count[k]
    )
    return (
        f"{node} at {at - times[0]:.0f} s, CPU {total:.0%}: its own load {total - pods:.0%}, "
        f"{sum(count.values())} pods {pods:.0%} (estimated {sum(assumed.values()):.0%})"
        + (f": {kinds}" if kinds else "")
    )


def _rank_from_top(count: int) -> str:
    rank = count - max(math.ceil(0.99 * count), 1) + 1
    return {1: "1st", 2: "2nd", 3: "3rd"}.get(rank, f"{rank}th")


def replayed(record: dict[str, Any]) -> Outcome:
    """An outcome read back from out/quality.json (:func:`recorded`)."""
    recording = Recording()
    for at, cpu, memory in zip(record["times"], record["cpu"], record["memory"], strict=True):
        recording.add(at, {n: Load(cpu[n], memory[n]) for n in cpu})
    return Outcome(
        BY_KEY[record["strategy"]],
        recording,
        list(record["latencies"]),
        pending=record["pending"],
        created=record["created"],
        skipped=record["skipped"],
        bound={pod: (node, at) for pod, (node, at) in record.get("bound", {}).items()},
        decisions=dict(record.get("decisions", {})),
        verbs=dict(record.get("verbs", {})),
        scheduler=dict(record.get("scheduler", {})),
        moves=Moves(**record["moves"]) if record.get("moves") else None,
        seconds=record.get("seconds", 0.0),
    )


def recorded(outcome: Outcome) -> dict[str, object]:
    """Everything measured for one strategy, for out/quality.json."""
    recording = outcome.recording
    return {
        "strategy": outcome.strategy.key,
        "skipped": outcome.skipped,
        "created": outcome.created,
        "pending": outcome.pending,
        "latencies": outcome.latencies,
        "bound": outcome.bound,
        "decisions": outcome.decisions,
        "verbs": outcome.verbs,
        "scheduler": outcome.scheduler,
        "moves": dataclasses.asdict(outcome.moves) if outcome.moves else None,
        "seconds": outcome.seconds,
        "times": recording.times,
        "cpu": [{n: load.cpu for n, load in s.items()} for s in recording.samples],
        "memory": [{n: load.memory for n, load in s.items()} for s in recording.samples],
    }


def _series(outcome: Outcome) -> tuple[list[float], list[float]]:
    return outcome.recording.times, outcome.recording.max_cpu()


def render_html(outcomes: Sequence[Outcome], notes: Sequence[str]) -> str:
    ran = [o for o in outcomes if o.skipped is None]
    width, height, left, top, bottom = 900, 380, 50, 20, 40
    end = max((t for o in ran for t in o.recording.times), default=1.0) or 1.0
    inner_w, inner_h = width - left - 20, height - top - bottom

    def x(t: float) -> float:
        return left + inner_w * t / end

    def y(v: float) -> float:
        return top + inner_h * (1 - v)

    parts = []
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        parts.append(
            f'<line x1="{left}" x2="{left + inner_w}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" stroke="#ecf0f1"/>'
            f'<text x="{left - 6}" y="{y(tick) + 4:.1f}" font-size="11" text-anchor="end">{tick:.0%}</text>'
        )
    for second in range(0, int(end) + 1, 30):
        parts.append(
            f'<text x="{x(second):.1f}" y="{height - bottom + 16}" font-size="11" text-anchor="middle">{second}s</text>'
        )
    parts.append(
        f'<line x1="{left}" x2="{left + inner_w}" y1="{y(CPU_LIMIT):.1f}" y2="{y(CPU_LIMIT):.1f}" '
        f'stroke="#c0392b" stroke-dasharray="6 4"/><text x="{left + inner_w - 4}" y="{y(CPU_LIMIT) - 4:.1f}" '
        f'font-size="11" fill="#c0392b" text-anchor="end">limit {CPU_LIMIT:.0%}</text>'
    )
    legend = []
    for o in ran:
        times, values = _series(o)
        color = COLORS.get(o.strategy.key, "#34495e")
        points = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in zip(times, values, strict=True))
        parts.append(
            f'<polyline fill="none" stroke="{color}" stroke-width="1.6" points="{points}"/>'
        )
        legend.append(
            f'<span style="color:{color}">&#9632; {html.escape(o.strategy.key)}: '
            f"{html.escape(o.strategy.title)}</span>"
        )
    table = html.escape(render_table(outcomes))
    note = "".join(f"<li>{html.escape(n)}</li>" for n in notes)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>loadsched quality bench</title>
<style>body{{font-family:system-ui,sans-serif;margin:24px;color:#2c3e50}} span{{margin-right:18px}}</style></head>
<body>
<h1>The busiest node's true CPU over time, per strategy</h1>
<p>{" ".join(legend)}</p>
<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" aria-label="max node CPU over time">
{"".join(parts)}
</svg>
<pre>{table}</pre>
<ul>{note}</ul>
</body></html>
"""


def render_png(outcomes: Sequence[Outcome], path: Path) -> str:
    """Write the chart as a PNG with matplotlib; what happened, for the output."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "PNG skipped: matplotlib is not installed (.venv/bin/pip install matplotlib)"
    figure, axes = plt.subplots(figsize=(10, 4.2), dpi=100)
    for o in outcomes:
        if o.skipped is None:
            times, values = _series(o)
            axes.plot(times, values, label=o.strategy.key, color=COLORS.get(o.strategy.key), lw=1.4)
    axes.axhline(CPU_LIMIT, color="#c0392b", ls="--", lw=1, label=f"limit {CPU_LIMIT:.0%}")
    axes.set_ylim(0, 1.02)
    axes.set_xlabel("seconds into the trace")
    axes.set_ylabel("busiest node's true CPU")
    axes.yaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0))
    axes.legend(loc="lower right", fontsize=8)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
    return f"chart: {path}"


def render_moves(outcomes: Sequence[Outcome]) -> list[str]:
    """Per strategy that evicted or moves pods by design: what the evictions did."""
    shown = [
        o
        for o in outcomes
        if o.moves is not None and (o.moves.evictions or o.strategy.key in EVICTING)
    ]
    if not shown:
        return []
    head = (
        f"{'moves':<24}{'evicted':>8}{'most/1':>7}{'twice':>6}{'back':>6}{'>PDB':>6}"
        f"{'lost':>6}{'repl p50':>9}{'repl p99':>9}"
    )
    lines = [head, "-" * len(head)]
    for o in shown:
        m = o.moves
        assert m is not None
        lat = m.replacement_latencies
        p50 = f"{percentile(lat, 50):9.1f}" if lat else f"{'-':>9}"
        p99 = f"{percentile(lat, 99):9.1f}" if lat else f"{'-':>9}"
        lines.append(
            f"{o.strategy.key:<24}{m.evictions:8d}{m.most_of_one:7d}{m.evicted_twice:6d}"
            f"{m.back_on_source:6d}{m.over_budget:6d}{m.lost:6d}{p50}{p99}"
        )
    lines.append(
        "  evicted: pods whose deletion began before their workload's; most/1: the most of one "
        "workload; twice: workloads evicted more than once; back: replacements bound on the "
        "node their pod left; >PDB: evictions past a burst's budget; lost: replacements never "
        "bound; repl: eviction to replacement bound, s"
    )
    return lines


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


REACTIONS = (
    5.0,
    10.0,
    REBALANCE_ROUNDS * parse_duration(REBALANCE_PERIOD).total_seconds(),
)
"""How long after an overload begins :func:`reaction_floor` ends it: quicker than a round of the
1-minute metrics could show it, and about the soonest the bench's rebalancer acts (two rounds
of 15 s; the 1-minute average must first cross its threshold, 9 s after the fact)."""


def reaction_floor(rounds: Sequence[Sequence[Outcome]], *, plain: float | None) -> list[str]:
    """About the least a rebalancer acting on estimation's placements could leave: estimation's
    overload had each ended a reaction time after it began (:func:`overload_if_ended`, an
    estimate, not a bound; the median over the rounds estimation ran in), beside plain's
    median when it ran."""
    recordings = [
        o.recording
        for outcomes in rounds
        for o in outcomes
        if o.strategy.key == "estimation" and o.skipped is None
    ]
    if not recordings:
        return []
    floors = []
    for after in REACTIONS:
        left = statistics.median(
            overload_if_ended(r, cpu_limit=CPU_LIMIT, memory_limit=MEMORY_LIMIT, after=after)
            for r in recordings
        )
        of_plain = f" ({_ratio(left, plain):.2f} × plain)" if plain else ""
        floors.append(f"{after:g} s {left:.0f} node-s{of_plain}")
    return [
        "  beside: about the least a rebalancer can leave of estimation's overload, had every "
        f"overload ended that long after it began (median of {len(recordings)} "
        f"round{'s' * (len(recordings) > 1)}): " + ", ".join(floors)
    ]


def render_durations(rounds: Sequence[Sequence[Outcome]]) -> str:
    """How long each strategy's rounds took (reset, start, trace), over the rounds measured."""
    took: dict[str, list[float]] = {}
    for outcomes in rounds:
        for o in outcomes:
            if o.skipped is None and o.seconds:
                took.setdefault(o.strategy.key, []).append(o.seconds)
    if not took:
        return ""
    each = ", ".join(
        f"{key} {sum(seconds):.0f} s ({len(seconds)} round{'s' * (len(seconds) > 1)})"
        for key, seconds in took.items()
    )
    return f"time per strategy: {each}"
