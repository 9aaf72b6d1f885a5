"""Do clusters run cooler? The same seeded workload trace through each strategy on the real
control plane, measured from the nodes' true usage rather than the lagging metrics.

Strategies (bench/quality_strategies.py): the plain kube-scheduler; crane's model (loadsched,
hot value, no estimation); loadsched with estimation; the real Trimaran TargetLoadPacking and
LoadVariationRiskBalancing (scheduler-plugins' own scheduler, bench/trimaran.py) and
loadsched's policies of them (its extender with ``spec.scoring``); on request,
estimation-watch (kube-scheduler binds), estimation-wait, estimation-keep (pods gone not
subtracted), estimation-minmax and estimation-alone (no hot value, scores spread: Koordinator's
model). Each starts
from the same cluster: no bench pods, the exporter at every node's background load, the
1-minute metrics settled back to it, a fresh annotator, the extender started with the strategy's
policy and a kube-scheduler with it (or without any extender, for plain).

kwok runs the pods (Running once their profile's startup has passed); their usage is
simulated by sandbox/workload.py. The bench's pod watch sees bindings;
every second each node's true usage (its background plus, for each pod bound there, that
pod's seeded profile from a startup delay after binding until deletion) goes to the synthetic
exporter, and is recorded. Measured: node-seconds above the policy's limits, p99 and maximum
of node CPU, spread (time-averaged standard deviation across nodes), created → bound latency
p50/p99, pods left Pending. A table on stdout, out/quality.html and out/quality.png, and every
sample in out/quality.json with the trace it played (bench/quality_saved.py).

    .venv/bin/python -m bench.quality [--seed 7] [--rounds 3] [--strategies plain,...]
        [--quick | --drift] [--growth 0.3] [--drain 25] [--rebalance-high 0.6]
    .venv/bin/python -m bench.quality --from out/quality.json [--from other/quality.json ...]

``--growth SHARE`` makes that share of the trace's pods grow once they have run a while (their
CPU use × 1.5–2, 20–40 s after they start): load that appears after binding, which no placement
sees coming and only moving pods can correct. The rest of the trace stays as it was.

``--drift`` plays the rebalancer's trace (:data:`bench.quality_traces.DRIFT`): steady arrivals
for 150 s of pods that last the round, like services, 40 % of all pods growing (× 1.5–2.5),
one burst, and 150 s more once arrivals stop. Its nodes stay overloaded unless a pod moves. A
drift run judges only the rebalancer's targets (the placement and peer targets are the burst
trace's) and is recorded apart (``quality-drift``). ``--rebalance-high SHARE`` has the
rebalancer and the descheduler act at that share of a node rather than at the limits (both
averages for the rebalancer, CPU for the descheduler; low 0.8 × it), so they keep headroom
for the swings within a minute; such a run is saved and printed but not recorded as the
bench's result, and ``--from`` pools only runs of one high.

Each round's table is followed by what the extender's filter did for want of room, per strategy
it served (answers that placed a pod no node had room for; node refusals for want of room), and
kube-scheduler's own mean times, per strategy (algorithm, attempt, queued to bound:
``bench.quality_outcome.SCHEDULER_STEPS``). A missed target is followed by what the recording
shows behind it (the nodes that carried the overload, or the pods slower than the latency
bound, each round). ``--from`` prints a saved run's report again without running anything, for
the trace the run names (a flag that says otherwise is refused; a run saved before runs named
their trace is read as ``--seed``, ``--quick``/``--drift``, ``--growth`` and ``--drain`` say).
Given several saved runs of one trace (runs of different traces, growth or drain are refused),
it pools their rounds and judges the targets on each strategy's median over all of them, a
verdict less at the mercy of one run's spread; pieces run with ``--strategies`` from the same
``--seed`` are joined into one round per seed.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

from bench import trimaran
from bench.quality_outcome import Outcome
from bench.quality_report import (
    render_decisions,
    render_durations,
    render_html,
    render_moves,
    render_png,
    render_table,
)
from bench.quality_run import Harness
from bench.quality_saved import Asked, Played, SavedRunError, pooled, save_run
from bench.quality_strategies import (
    BY_KEY,
    CPU_LIMIT,
    DEFAULT,
    DELAY,
    EVICTING,
    HOT_VALUE,
    MEMORY_LIMIT,
    PERIOD,
    RULES,
    STRATEGIES,
    Strategy,
)
from bench.quality_targets import (
    FIGURES,
    median_figures,
    moves_targets,
    peer_targets,
    render_medians,
    targets,
)
from bench.quality_traces import DRAIN, DRIFT_DRAIN, LASTING, SEED, trace_settings
from bench.quality_why import why
from bench.results import record
from sandbox.build import (
    ensure_descheduler,
    ensure_minimal_extender,
    ensure_trimaran,
    trimaran_kube_version,
    trimaran_version,
)
from sandbox.cluster import Sandbox
from sandbox.metrics_stack import MetricsStack
from sandbox.processes import wait_for
from sandbox.specs import NodeSpec
from sandbox.workload import Trace, TraceShape, backgrounds, make_trace
from shared.rebalance_policy import LOW_OF_HIGH

NODES = [NodeSpec(f"node-{i}", f"127.0.0.{i + 1}") for i in range(1, 9)]


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def chosen(text: str) -> list[str]:
    keys = [k.strip() for k in text.split(",") if k.strip()]
    unknown = [k for k in keys if k not in BY_KEY]
    if unknown or not keys:
        raise argparse.ArgumentTypeError(
            f"--strategies: unknown {', '.join(unknown) or '(none given)'}; "
            f"choose from {', '.join(BY_KEY)}"
        )
    return keys


def trace_note(shape: TraceShape, seed: int, trace_pods: int, bursts: dict[str, int]) -> str:
    low, high = shape.steady_lifetime
    lifetimes = "lasting the round" if low >= LASTING else f"lifetimes {low:.0f}–{high:.0f} s"
    growth = (
        f"; {shape.growth_share:.0%} of pods grow, their CPU use × "
        f"{shape.growth[0]:g}–{shape.growth[1]:g} from {shape.grows_after[0]:.0f}–"
        f"{shape.grows_after[1]:.0f} s after they start"
        if shape.growth_share > 0
        else ""
    )
    return (
        f"trace: seed {seed}, {trace_pods} pods over {shape.arrivals_for:.0f} s: steady arrivals "
        f"({shape.steady_rate}/s, {lifetimes}) "
        f"and bursts {', '.join(f'{g}: {n} pods' for g, n in bursts.items())}; "
        f"pods start using CPU {shape.startup[0]:.0f}–{shape.startup[1]:.0f} s after binding"
        + growth
    )


def setting_notes() -> list[str]:
    return [
        f"shortened for minutes, not hours: metrics are 1-minute averages and standard deviations "
        f"synced every {PERIOD} (crane: 5-minute averages every 3 minutes); Prometheus scrapes "
        f"and evaluates rules every 5 s, so a value's window ends about {DELAY} before its "
        f"timestamp (bench/sample_delay.py; syncPolicy delay); hot value {HOT_VALUE} "
        f"(crane's 5m and 1m, scaled)",
        f"limits (predicates, and what counts as overload for every strategy): CPU {CPU_LIMIT:.0%}, "
        f"memory {MEMORY_LIMIT:.0%} of the node; 8 nodes × 8 cores, 32 GiB; 2 start busy",
        "usage is the exporter's true usage (what the node does), not the metrics loadsched reads",
        f"trimaran-tlp and trimaran-lvrb are scheduler-plugins' own scheduler "
        f"({trimaran_version()} on Kubernetes {trimaran_kube_version()}) with its load-watcher "
        "at its own timing (15-minute averages and deviations asked once a minute, history "
        "forgotten before each run); tlp and lvrb are loadsched's policies of the same plugins",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    trace_flags = parser.add_mutually_exclusive_group()
    trace_flags.add_argument("--quick", action="store_true", help="one burst, 100 s of arrivals")
    trace_flags.add_argument(
        "--drift",
        action="store_true",
        help="the rebalancer's trace: lasting pods, 40%% of all pods growing after binding",
    )
    parser.add_argument(
        "--seed", type=int, default=None, help=f"the first round's (default {SEED})"
    )
    parser.add_argument(
        "--strategies",
        type=chosen,
        default=list(DEFAULT),
        help=f"comma-separated, of {', '.join(s.key for s in STRATEGIES)}",
    )
    parser.add_argument(
        "--rounds",
        type=rounds_count,
        default=1,
        help="play the trace this many times (seeds seed, seed+1, ...); targets use each "
        "strategy's median",
    )
    parser.add_argument(
        "--growth",
        type=growth_share,
        default=None,
        help="the share of pods (0..1) whose CPU use grows once they have run a while "
        "(default 0, with --drift 0.4)",
    )
    parser.add_argument(
        "--drain",
        type=float,
        default=None,
        help=f"seconds the trace plays once arrivals stop (default {DRAIN:.0f}, with --drift "
        f"{DRIFT_DRAIN:.0f})",
    )
    parser.add_argument(
        "--rebalance-high",
        type=high_share,
        default=None,
        help=f"the share of a node (over 0, to 1) at which the rebalancer and the descheduler act on "
        f"the 1-minute averages, low 0.8 × it (default the limits, {CPU_LIMIT * 100:.0f}%%); a run at "
        "another is not recorded as the bench's result",
    )
    parser.add_argument("--out", default="out")
    parser.add_argument(
        "--from",
        dest="saved",
        type=Path,
        action="append",
        help="print the report of a run saved in this quality.json again, running nothing "
        "(of the trace it names; a run saved before runs named their trace is read as "
        "--seed, --quick or --drift, --growth and --drain say); repeated, the runs' rounds "
        "are pooled, the strategies of one seed side by side",
    )
    options = parser.parse_args()
    started = time.monotonic()
    out = Path(options.out)
    asked = "quick" if options.quick else "drift" if options.drift else None
    if options.saved:
        try:
            rounds, seeds, played = pooled(
                options.saved,
                Asked(asked, options.seed, options.growth, options.drain, options.rebalance_high),
            )
        except SavedRunError as e:
            parser.error(str(e))
        traces = [make_trace(played.shape(), seed=seed) for seed in seeds]
        return report(rounds, traces, played, out, started, save=False)
    if options.rebalance_high is not None and not set(options.strategies) & set(EVICTING):
        parser.error(f"--rebalance-high: no strategy that moves pods ({', '.join(EVICTING)})")
    name = asked or "full"
    shape, drain, _ = trace_settings(name, growth=options.growth, drain=options.drain)
    seed = SEED if options.seed is None else options.seed
    high = CPU_LIMIT if options.rebalance_high is None else options.rebalance_high
    played = Played(name, seed, shape.growth_share, drain, high)
    traces = [make_trace(shape, seed=seed + r) for r in range(options.rounds)]
    background = backgrounds([n.name for n in NODES], seed=seed)
    out.mkdir(parents=True, exist_ok=True)
    build_peers([BY_KEY[key] for key in options.strategies])
    rounds = []
    with Sandbox(say=say) as box:
        box.create_nodes(NODES)
        levels = {n: {"cpu": b.cpu, "mem": b.memory} for n, b in background.items()}
        stack = MetricsStack(box, NODES, loads=levels)
        stack.prometheus.rules = RULES
        stack.prometheus.extra_groups = [trimaran.rule_group(stack, NODES, interval="5s")]
        stack.start()
        wait_for(
            lambda: len(stack.prometheus.query("cpu_usage_stddev_1m")) == len(NODES),
            timeout=90,
            what="the bench's recording rules for every node",
            interval=1,
        )
        harness = Harness(
            box,
            stack,
            NODES,
            background,
            box.workdir / "policies",
            drain,
            say,
            out / "logs",
            rebalance_high=high,
        )
        for number, trace in enumerate(traces):
            if options.rounds > 1:
                say(f"round {number + 1} of {options.rounds} (seed {trace.seed})")
            outcomes: list[Outcome] = []
            for key in options.strategies:
                strategy = BY_KEY[key]
                reason = strategy.cannot_run()
                if reason is not None:
                    say(f"{key}: not run: {reason}")
                    outcomes.append(Outcome(strategy, skipped=reason))
                    continue
                outcomes.append(harness.run(strategy, trace))
            rounds.append(outcomes)
        say("shutting down")
    return report(rounds, traces, played, out, started, save=True)


def build_peers(strategies: list[Strategy]) -> None:
    """Build the peers' binaries the run needs (the first time: minutes) before the cluster
    starts, so that no build runs inside a strategy's measured round."""
    for strategy in strategies:
        if strategy.cannot_run() is None:
            if strategy.trimaran is not None:
                ensure_trimaran(say)
            if strategy.descheduler:
                ensure_descheduler(say)
            if strategy.minimal:
                ensure_minimal_extender(say)


def report(
    rounds: list[list[Outcome]],
    traces: list[Trace],
    played: Played,
    out: Path,
    started: float,
    *,
    save: bool,
) -> int:
    """Print the tables, medians, targets and why a target is missed; with ``save``, write
    out/quality.html, .json and .png and record the figures under the trace's bench name. 0
    when every target is met. The drift trace (``quality-drift``) judges the rebalancer's
    targets alone."""
    shape, _, bench = trace_settings(played.trace, growth=played.growth, drain=played.drain)
    drift = bench == "quality-drift"
    seeds = [t.seed for t in traces]
    print("quality: the same trace through each strategy, measured from true node usage")
    once = {t.seed: t for t in traces}.values()  # pooled runs play the same traces
    lines = [trace_note(shape, t.seed, len(t.arrivals), t.bursts) for t in once]
    lines += setting_notes()
    if played.rebalance_high != CPU_LIMIT:
        lines.append(
            f"the rebalancer and the descheduler act at {played.rebalance_high:.0%} of a node "
            f"(low {LOW_OF_HIGH * played.rebalance_high:.0%}) rather than at the limits: not recorded "
            "as the bench's result"
        )
    for line in lines:
        print(f"  {line}")
    for number, outcomes in enumerate(rounds):
        print(f"\nround {number + 1} (seed {seeds[number]})" if len(rounds) > 1 else "")
        print(render_table(outcomes))
        for line in render_decisions(outcomes) + render_moves(outcomes):
            print(line)
    if len(rounds) > 1:
        print(f"\nmedian of {len(rounds)} rounds (per round: overload node-s / latency p99 s):")
        print(render_medians(rounds))
    if durations := render_durations(rounds):
        print(durations)
    print()
    print(
        f"targets ({'drift' if drift else 'burst'} trace"
        + (f", medians of {len(rounds)} rounds):" if len(rounds) > 1 else "):")
    )
    medians = median_figures(rounds)
    if drift:
        checks, ok = moves_targets(rounds)
        if not checks:
            checks, ok = ["targets not measured: rebalance did not run"], False
    else:
        checks, ok = targets(medians)
        checks += why(rounds, medians, traces)
        peers, peers_ok = peer_targets(rounds)
        moved, moves_ok = moves_targets(rounds)
        checks += peers + moved
        ok = ok and peers_ok and moves_ok
    for line in checks:
        print(line)
    if save:
        if played.rebalance_high == CPU_LIMIT:
            record(bench, FIGURES, quick=len(rounds) < 3)
        (out / "quality.html").write_text(render_html(rounds[0], lines + checks))
        save_run(out / "quality.json", rounds, played)
        print(f"\nchart (round 1): {out / 'quality.html'}")
        print(render_png(rounds[0], out / "quality.png"))
        print(f"whole run: {time.monotonic() - started:.0f} s")
    return 0 if ok else 1


def rounds_count(text: str) -> int:
    try:
        count = int(text)
    except ValueError:
        count = 0
    if not 1 <= count <= 20:
        raise argparse.ArgumentTypeError(f"--rounds: {text!r} is not a whole number 1..20")
    return count


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def high_share(text: str) -> float:
    share = _number(text)
    if not 0 < share <= 1:
        raise argparse.ArgumentTypeError(f"--rebalance-high: {text!r} is not a share over 0, to 1")
    return share


def growth_share(text: str) -> float:
    share = _number(text)
    if not 0 <= share <= 1:
        raise argparse.ArgumentTypeError(f"--growth: {text!r} is not a share 0..1")
    return share


if __name__ == "__main__":
    sys.exit(main())
