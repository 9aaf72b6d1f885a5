"""bench/quality.py's results: the table per round, what the extender and kube-scheduler
counted, the moves, how long each strategy took, the saved runs, and the chart of the busiest
node's true CPU over time per strategy (self-contained HTML with SVG, and a PNG when matplotlib
is installed). The targets are judged in :mod:`bench.quality_targets`, and explained in
:mod:`bench.quality_why`."""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.quality_moves import Moves
from bench.quality_outcome import SCHEDULER_STEPS, Outcome
from bench.quality_rebalancer import rebalanced
from bench.quality_strategies import (
    BY_KEY,
    CPU_LIMIT,
    EVICTING,
    REBALANCE_ROUNDS,
)
from bench.quality_targets import rows
from sandbox.workload import (
    Load,
    Recording,
    percentile,
)

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


def render_decisions(outcomes: Sequence[Outcome]) -> list[str]:
    """Per strategy run through the extender: what its filter did for want of room, and its
    mean time per call by verb; per strategy with loadsched's rebalancer, what it saw and did
    (:func:`bench.quality_rebalancer.rebalanced`); per strategy, kube-scheduler's mean time by
    step."""
    lines = [f"  {o.strategy.key}: {decided(o.decisions)}" for o in outcomes if o.decisions]
    lines += [f"  {o.strategy.key}: {timed(o.verbs)}" for o in outcomes if o.verbs]
    lines += [
        f"  {o.strategy.key}: {rebalanced(o.rebalancer, REBALANCE_ROUNDS)}"
        for o in outcomes
        if o.rebalancer
    ]
    return lines + [f"  {o.strategy.key}: {stepped(o.scheduler)}" for o in outcomes if o.scheduler]


def timed(verbs: dict[str, float]) -> str:
    """The extender's mean time per call by verb (:func:`bench.quality_outcome.verb_seconds`)."""
    each = ", ".join(f"{verb} {seconds * 1000:.2f} ms" for verb, seconds in sorted(verbs.items()))
    return f"the extender's mean time per call: {each}"


def stepped(steps: dict[str, float]) -> str:
    """kube-scheduler's mean time by step (:func:`bench.quality_outcome.scheduler_seconds`)."""
    each = ", ".join(
        f"{step} {steps[step] * 1000:.1f} ms" for step in SCHEDULER_STEPS if step in steps
    )
    return f"kube-scheduler's mean times: {each}"


def decided(decisions: dict[str, float]) -> str:
    """What the extender's filter did for want of room over a run
    (:func:`bench.quality_outcome.decision_counts`)."""
    placed = decisions.get("placed_without_room", 0.0)
    refused = decisions.get("refused_for_room", 0.0)
    return (
        f"the extender's filter: {placed:.0f} answer(s) passed a pod no node had room for "
        f"(whenNoNodeHasRoom: place), {refused:.0f} node refusal(s) for want of room for a "
        "pod's estimate"
    )


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
        rebalancer=dict(record.get("rebalancer", {})),
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
        "rebalancer": outcome.rebalancer,
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
