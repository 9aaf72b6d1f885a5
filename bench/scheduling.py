"""Scheduling throughput on the real control plane, 1,000 (or ``--nodes``) fake nodes with
load annotations: the plain kube-scheduler, the same kube-scheduler with a minimal extender,
and with loadsched's extender (both names-only), side by side in one run.

As a production cluster runs it: a writer patches nodes' load annotations through the API
server during every batch, at the annotator's rate (``--churn``, default every node once per
crane's 3-minute period: 28 nodes/s at 5,000 nodes), and kube-scheduler runs with each
``percentageOfNodesToScore`` asked for (``--percentages``: 0 is its adaptive default, 50 the
chart's), so the extender is asked about a different window of nodes pod after pod. The
target: loadsched's throughput ≥ 0.95× the minimal extender's, in the same run.

The minimal extender (``hack/minimal-extender``, Go) does only what the extender protocol
requires: it reads the node names and lets every node pass with score 0. What it costs is
what any HTTP extender costs kube-scheduler (the JSON and HTTP of two calls per pod, inside
the scheduler's sequential cycle, on the same 2 cores); loadsched's extender can at best
match it.

A short uncounted batch of each kind warms the control plane up first. Each batch starts
from the same cluster: its pods are created while its scheduler is stopped,
the scheduler is started, and a watch times the bindings: pods/s = (pods - 1) / (last binding -
first binding); then the scheduler is stopped and the pods deleted. Rounds run plain, minimal,
loadsched in turn, in that order in even rounds and the reverse in odd ones (so run an even
number of rounds); ratios are taken within a round, and the median over rounds is reported.
CPU per pod comes from each process's user + system time over its batch. ``--variant-arg``
starts a second loadsched extender with those flags besides and runs it as a fourth kind in
every round, so two settings are compared in one run (their ratio is printed too).

Since v1.35 kube-scheduler reuses the previous pod's filtering and scoring for the next pod with
the same signature when each lands on a node of its own (opportunistic batching, KEP-5598), but
only in a profile without extenders. ``--pod-cpu 5`` with ``--pods`` below the nodes that pass
(about 700 of 1,000) makes every pod such a pod, so ``LOADSCHED_KUBE_VERSION=v1.35.4`` shows
what the plain scheduler gains from it and a profile with an extender cannot.

kwok is every node's kubelet: it renews each node's Lease (``--lease-seconds``, 40 by default
as kubelet's, every quarter of it) and runs the bound pods, so heartbeats and pod status
updates load the API server as in a cluster.

    .venv/bin/python -m bench.scheduling [--nodes 1000] [--pods 2000] [--rounds 2] [--warmup 300]
        [--pod-cpu 10m] [--lease-seconds 40]
        [--percentages 0,50] [--churn NODES_PER_S] [--extender-arg=FLAG ...]
        [--variant-arg=FLAG ...]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import sys
import threading
import time
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime

from bench.extender import add_extender_args
from bench.lease_option import add_lease_option, renewals
from bench.pod_watch import watch_pods
from bench.results import Figure, measured, record
from bench.stats import median_interval
from bench.targets import target
from sandbox.cluster import Sandbox
from sandbox.specs import ExtenderSpec, NodeSpec, pod_body
from shared.annotations import encode_metric
from shared.load_model import LoadRules
from shared.pods import Pod
from shared.policy import default_policy

OF_PLAIN = target("scheduling", "loadsched-of-plain")
OF_MINIMAL = target("scheduling", "loadsched-of-minimal")
FIGURES: list[Figure] = []
"""What this run measured, for out/results (:mod:`bench.results`)."""
ANNOTATOR_PERIOD = 180.0
"""crane's annotator period for the 5-minute metrics: every node patched once per period."""
KINDS = ("plain", "minimal", "loadsched")
VARIANT = "variant"
"""The kind with loadsched's extender started with ``--variant-arg`` flags besides, when asked."""
PROCESS = {"minimal": "minimal-extender", "loadsched": "extender", VARIANT: "extender-variant"}
"""The supervisor's name of each kind's extender process."""
TITLES = {
    "plain": "plain kube-scheduler",
    "minimal": "+ minimal extender",
    "loadsched": "+ loadsched extender",
    VARIANT: "+ loadsched, variant",
}
PROCESSES = (
    "kube-scheduler",
    "kube-apiserver",
    "etcd",
    "kube-controller-manager",
    "kwok",
    "extender",
)


def nodes(count: int, seed: int = 11) -> list[NodeSpec]:
    rules = LoadRules.from_policy(default_policy())
    rng = random.Random(seed)
    now = datetime.now(UTC)
    specs = []
    for i in range(count):
        usage = rng.uniform(0.05, 0.8)
        annotations = {k: encode_metric(usage, now) for k in rules.keys if k != "node_hot_value"}
        specs.append(
            NodeSpec(
                f"node-{i:04d}", f"127.0.{(i // 250) + 10}.{(i % 250) + 2}", annotations=annotations
            )
        )
    return specs


class AnnotationChurn:
    """Patches one node's load annotations after another through the API server, ``rate``
    nodes a second on a steady schedule (a few patches in flight, as the annotator has),
    with values across the policy's limits, until stopped."""

    def __init__(self, box: Sandbox, specs: list[NodeSpec], rate: float, seed: int = 5) -> None:
        self._box = box
        self._names = [spec.name for spec in specs]
        self._rate = rate
        self._rng = random.Random(seed)
        self._keys = [
            k for k in LoadRules.from_policy(default_policy()).keys if k != "node_hot_value"
        ]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.written = 0
        self.failed = 0
        self.seconds = 0.0

    def _patch(self, name: str, usage: float) -> None:
        now = datetime.now(UTC)
        try:
            self._box.annotate_node(name, {k: encode_metric(usage, now) for k in self._keys})
        except Exception:  # noqa: BLE001 - counted and reported; the batch goes on
            self.failed += 1

    def _run(self) -> None:
        started = time.monotonic()
        sent = 0
        with ThreadPoolExecutor(4) as pool:
            while not self._stop.is_set():
                due = started + sent / self._rate
                if due > time.monotonic():
                    self._stop.wait(due - time.monotonic())
                    continue
                name = self._names[sent % len(self._names)]
                pool.submit(self._patch, name, self._rng.uniform(0.05, 0.8))
                sent += 1
        self.written = sent - self.failed
        self.seconds = time.monotonic() - started

    def __enter__(self) -> AnnotationChurn:
        if self._rate > 0:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


def extender_counts(url: str) -> dict[str, float]:
    """What the extender has counted so far (its own metrics): ``seconds``, its filter +
    prioritize time; per verb, ``<verb>`` calls answered and ``<verb>-kept`` answers kept
    for the same nodes (:class:`extender.scheduling.memos.WindowMemo`)."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as response:
        text = response.read().decode()

    def sample(name: str, verb: str) -> float:
        labels = (
            f'code="200",verb="{verb}"' if name.endswith("responses_total") else f'verb="{verb}"'
        )
        match = re.search(rf"loadsched_extender_{name}{{{labels}}} (\S+)", text)
        return float(match.group(1)) if match else 0.0

    counts = {"seconds": 0.0}
    for verb in ("filter", "prioritize"):
        counts["seconds"] += sample("request_duration_seconds_sum", verb)
        counts[verb] = sample("responses_total", verb)
        counts[f"{verb}-kept"] = sample("answers_kept_total", verb)
    return counts


class BindingClock:
    """A watch store that notes when each pod is first seen bound."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.bound: dict[str, float] = {}
        self.done = threading.Event()

    def replace(self, items: Sequence[Pod]) -> None:
        for pod in items:
            self._see(pod)

    def apply(self, event: str, item: Pod) -> None:
        if event != "DELETED":
            self._see(item)

    def _see(self, pod: Pod) -> None:
        if pod.spec.nodeName and pod.metadata.name not in self.bound:
            self.bound[pod.metadata.name] = time.monotonic()
            if len(self.bound) >= self.count:
                self.done.set()


def watch_bindings(box: Sandbox, label: str, clock: BindingClock) -> threading.Event:
    """Watch the batch's pods in a thread (list, then watch, resuming after a disconnect)
    until every pod is bound; the returned event is set once the first list is in."""
    listed, _ = watch_pods(box, f"batch={label}", clock, name=f"batch {label}", until=clock.done)
    return listed


@dataclass
class Batch:
    kind: str
    percentage: int
    rate: float
    wall: float
    cpu: dict[str, float]
    extender_seconds: float = 0.0
    kept: dict[str, float] = field(default_factory=dict)
    """Per verb, the share of loadsched's answers kept for the same nodes."""
    window: float = 0.0
    """Wall time over which ``cpu`` was measured (scheduler start to last binding)."""


@dataclass
class Bench:
    box: Sandbox
    pods: int
    extenders: dict[str, ExtenderSpec | None]
    batches: list[Batch] = field(default_factory=list)
    pod_cpu: str = "10m"
    """Each pod's CPU request."""

    @property
    def kinds(self) -> tuple[str, ...]:
        """The kinds each round runs: :data:`KINDS`, then the variant when there is one."""
        return tuple(self.extenders)

    def url(self, kind: str) -> str:
        spec = self.extenders[kind]
        assert spec is not None
        return spec.url

    def cpu_seconds(self, scheduler: str, extender: str | None) -> dict[str, float]:
        """CPU time so far per process kind, with this process (the watch) as ``bench``."""
        used = self.box.supervisor.cpu_seconds()
        own = os.times()
        return {
            "kube-scheduler": used.get(f"kube-scheduler-{scheduler}", 0.0),
            "kube-apiserver": used.get("kube-apiserver", 0.0),
            "etcd": used.get("etcd", 0.0),
            "kube-controller-manager": used.get("kube-controller-manager", 0.0),
            "kwok": used.get("kwok", 0.0),
            "extender": used.get(extender, 0.0) if extender else 0.0,
            "bench": own.user + own.system,
        }

    def run(self, kind: str, index: int | str, percentage: int, warmup: int = 0) -> Batch:
        """One batch; a warm-up one (``warmup`` pods) is not counted."""
        box, count = self.box, warmup or self.pods
        label = f"{kind}-p{percentage}-{index}"
        scheduler_name = "default-scheduler" if kind == "plain" else label
        box.create_pods(
            pod_body(
                f"{label}-{i}",
                scheduler_name=scheduler_name,
                cpu=self.pod_cpu,
                labels={"batch": label},
            )
            for i in range(count)
        )
        clock = BindingClock(count)
        if not watch_bindings(box, label, clock).wait(60):
            raise SystemExit(f"{label}: the watch did not list the batch's pods")
        process = PROCESS.get(kind)
        ours = kind in ("loadsched", VARIANT)
        counted = extender_counts(self.url(kind)) if ours else {}
        before = self.cpu_seconds(label, process)
        window = time.monotonic()
        box.start_scheduler(
            label,
            scheduler_name=scheduler_name,
            extender=self.extenders[kind],
            percentage_of_nodes_to_score=percentage,
        )
        if not clock.done.wait(600):
            raise SystemExit(f"{label}: only {len(clock.bound)} of {count} pods bound")
        after = self.cpu_seconds(label, process)
        window = time.monotonic() - window
        if ours:
            now_counted = extender_counts(self.url(kind))
            counted = {k: now_counted[k] - counted[k] for k in now_counted}
        box.stop_scheduler(label)
        box.delete_pods(f"batch={label}", force=True)  # the next batch needs the nodes empty
        first, last = min(clock.bound.values()), max(clock.bound.values())
        batch = Batch(
            kind,
            percentage,
            (count - 1) / (last - first),
            last - first,
            {name: after[name] - before[name] for name in after},
            counted.get("seconds", 0.0),
            {
                verb: counted[f"{verb}-kept"] / counted[verb] if counted.get(verb) else 0.0
                for verb in ("filter", "prioritize")
            },
            window,
        )
        if not warmup:
            self.batches.append(batch)
        print(f"  {label:<12} {batch.rate:7.1f} pods/s", file=sys.stderr, flush=True)
        return batch


def report(
    bench: Bench, rounds: int, nodes_count: int, percentage: int, churn: AnnotationChurn
) -> bool:
    """Print the results of one ``percentageOfNodesToScore``; True when the targets are met."""
    kinds = bench.kinds
    batches = [b for b in bench.batches if b.percentage == percentage]
    by_kind = {kind: [b for b in batches if b.kind == kind] for kind in kinds}
    rates = {kind: [b.rate for b in batches] for kind, batches in by_kind.items()}

    def ratios(kind: str, to: str) -> list[float]:
        return [r / o for r, o in zip(rates[kind], rates[to], strict=True)]

    def median_ratio(kind: str, to: str) -> float:
        return statistics.median(ratios(kind, to))

    ratio = {kind: median_ratio(kind, "plain") for kind in kinds if kind != "plain"}
    of_minimal = median_ratio("loadsched", "minimal")
    pods = bench.pods

    def mean_ms(kind: str, name: str) -> float:
        return statistics.mean(b.cpu[name] for b in by_kind[kind]) * 1000 / pods

    scored = "adaptive (kube-scheduler's default)" if percentage == 0 else f"{percentage}"
    achieved = churn.written / churn.seconds if churn.seconds else 0.0
    print(
        f"scheduling throughput: {nodes_count} nodes, {pods} pods per batch, {rounds} round(s) "
        f"({', '.join(kinds)}, then the reverse), "
        f"names-only extenders, percentageOfNodesToScore {scored}, annotation churn "
        f"{achieved:.1f} nodes/s ({churn.failed} patches failed), cpus={os.cpu_count()}"
    )
    print(f"  {'':<28}{'pods/s (each round)':<26}{'ratio to plain (median)':>24}")
    for kind in kinds:
        cells = " ".join(f"{r:6.1f}" for r in rates[kind])
        shown = "" if kind == "plain" else f"{ratio[kind]:8.2f}"
        print(f"  {TITLES[kind]:<28}{cells:<26}{shown:>24}")
    plain_verdict = OF_PLAIN.judge(ratio["loadsched"])
    print(
        f"  loadsched / minimal extender {of_minimal:.2f} (target {OF_MINIMAL.sign} "
        f"{OF_MINIMAL.bound:g}: {OF_MINIMAL.judge(of_minimal)}); loadsched / plain "
        f"{ratio['loadsched']:.2f} (target {OF_PLAIN.sign} {OF_PLAIN.bound:g}: {plain_verdict})"
    )
    each = ratios("loadsched", "minimal")
    low, high, cover = median_interval(each)
    print(
        f"  loadsched / minimal extender each round: {' '.join(f'{r:.2f}' for r in each)}; "
        f"the ratio's median lies in {low:.2f}-{high:.2f} with {100 * cover:.0f} % confidence"
    )
    at = f"{nodes_count} nodes, percentageOfNodesToScore {scored}"
    FIGURES.append(
        measured(
            OF_MINIMAL,
            of_minimal,
            interval=(low, high),
            name=f"loadsched / minimal extender pods/s, {at}",
        )
    )
    FIGURES.append(measured(OF_PLAIN, ratio["loadsched"], name=f"loadsched / plain pods/s, {at}"))
    if VARIANT in kinds:
        print(
            f"  variant / minimal extender {median_ratio(VARIANT, 'minimal'):.2f}; "
            f"variant / loadsched {median_ratio(VARIANT, 'loadsched'):.2f}"
        )
    for kind in kinds:
        if kind not in ("loadsched", VARIANT):
            continue
        ours = by_kind[kind]
        spent = statistics.mean(b.extender_seconds for b in ours)
        wall = statistics.mean(b.wall for b in ours)
        print(
            f"  {kind}'s own time per pod {1000 * spent / pods:.2f} ms (filter + prioritize, "
            f"its metrics): {100 * spent / wall:.1f} % of the batch's {wall:.1f} s; answers "
            f"kept for the same nodes: filter "
            f"{100 * statistics.mean(b.kept['filter'] for b in ours):.0f} %, prioritize "
            f"{100 * statistics.mean(b.kept['prioritize'] for b in ours):.0f} %"
        )
    print("  CPU per pod, ms (user + system over the batch; mean of rounds)")
    print(f"    {'process':<26}" + "".join(f"{kind:>11}" for kind in kinds))
    for name in (*PROCESSES, "bench"):
        label = "bench's watch" if name == "bench" else name
        print(f"    {label:<26}" + "".join(f"{mean_ms(kind, name):11.2f}" for kind in kinds))
    totals = [sum(mean_ms(kind, n) for n in (*PROCESSES, "bench")) for kind in kinds]
    print(f"    {'total':<26}" + "".join(f"{t:11.2f}" for t in totals))
    busy = [
        statistics.mean(sum(b.cpu.values()) / b.window for b in by_kind[kind]) for kind in kinds
    ]
    print(f"    {'cores busy (CPU / wall)':<26}" + "".join(f"{c:11.2f}" for c in busy))
    return not OF_PLAIN.counts(ratio["loadsched"]) and not OF_MINIMAL.counts(of_minimal)


def round_order(index: int, kinds: tuple[str, ...] = KINDS) -> tuple[str, ...]:
    """The kinds in the order round ``index`` runs them: as given in even rounds, reversed in
    odd ones, so that a drift of the machine over a round (its other work, the control plane's
    own housekeeping) favours each kind as often as it hinders it."""
    return kinds if index % 2 == 0 else kinds[::-1]


def percentages(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--percentages: not a list of integers: {text!r}"
        ) from None
    if not values or any(not 0 <= v <= 100 for v in values):
        raise argparse.ArgumentTypeError(f"--percentages: each must be 0..100: {text!r}")
    return values


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=2000)
    add_lease_option(parser)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=300, help="pods per uncounted first batch")
    parser.add_argument(
        "--pod-cpu",
        default="10m",
        help="each pod's CPU request (default 10m, many pods per 8-CPU node; 5 places one per "
        "node, the case kube-scheduler's opportunistic batching reuses a result for)",
    )
    parser.add_argument(
        "--percentages",
        type=percentages,
        default=[0, 50],
        help="percentageOfNodesToScore values, each its own batches (0: adaptive; default 0,50)",
    )
    parser.add_argument(
        "--churn",
        type=float,
        default=None,
        help="node annotation patches per second during the batches "
        f"(default: every node once per {ANNOTATOR_PERIOD:g} s; 0: none)",
    )
    add_extender_args(parser)
    parser.add_argument(
        "--variant-arg",
        action="append",
        default=[],
        help="a flag for a second loadsched extender run as a fourth kind in every round "
        "(repeatable), e.g. --variant-arg=--filter-rejections=always: both settings measured "
        "side by side in one run",
    )
    options = parser.parse_args()
    if options.churn is not None and options.churn < 0:
        parser.error("--churn must be 0 or more")
    rate = options.nodes / ANNOTATOR_PERIOD if options.churn is None else options.churn
    with Sandbox(lease_seconds=options.lease_seconds) as box:
        print(f"creating {options.nodes} nodes", file=sys.stderr)
        specs = nodes(options.nodes)
        box.create_nodes(specs, workers=16)
        print(renewals(options.nodes, options.lease_seconds), file=sys.stderr)
        loadsched_url = box.start_extender(args=["--log-level", "warning", *options.extender_arg])
        minimal_url = box.start_minimal_extender()
        extenders: dict[str, ExtenderSpec | None] = {
            "plain": None,
            "minimal": ExtenderSpec(minimal_url, preempt=False),
            "loadsched": ExtenderSpec(loadsched_url),
        }
        if options.variant_arg:
            variant_args = [*options.extender_arg, *options.variant_arg]
            extenders[VARIANT] = ExtenderSpec(
                box.start_extender(
                    args=["--log-level", "warning", *variant_args], name=PROCESS[VARIANT]
                )
            )
        bench = Bench(box, options.pods, extenders, pod_cpu=options.pod_cpu)
        with AnnotationChurn(box, specs, rate) as churn:
            for kind in bench.kinds:  # warm-up, not counted: the first batches run slow
                bench.run(kind, "warm-up", options.percentages[0], options.warmup)
            for index in range(options.rounds):
                for percentage in options.percentages:
                    for kind in round_order(index, bench.kinds):
                        bench.run(kind, index, percentage)
    print(f"loadsched's extender flags: {' '.join(options.extender_arg) or 'none'}")
    if options.variant_arg:
        print(f"the variant's flags besides: {' '.join(options.variant_arg)}")
    met = [report(bench, options.rounds, options.nodes, p, churn) for p in options.percentages]
    record("scheduling", FIGURES)
    return 0 if all(met) else 1


if __name__ == "__main__":
    sys.exit(main())
