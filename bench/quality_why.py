"""bench/quality.py's explanations of a missed target, from the recording: the nodes that
carried estimation's overload and what was on each at its peak, or the pods slower than the
latency bound."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from bench.quality_outcome import Outcome
from bench.quality_report import decided
from bench.quality_strategies import (
    CPU_LIMIT,
    FACTORS,
    MEMORY_LIMIT,
    NODE_CPUS,
)
from bench.quality_targets import Figures
from sandbox.workload import (
    Trace,
    pod_usage,
)


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
