"""One strategy's run for bench/quality.py: reset the cluster, start the strategy's
kube-scheduler (and loadsched with its policy), play the trace, and record true usage.

The bench's own pod watch (:mod:`bench.quality_pods`) tells when each pod is bound; every
second the true usage of every node (sandbox/workload.py) is pushed to the synthetic exporter
and recorded. kwok, the nodes' kubelet, starts each pod (Running, Ready) when its profile
starts using CPU; the trace deletes it gracefully at the end of its lifetime. What the round
left is an :class:`~bench.quality_outcome.Outcome`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
import kubernetes.client as k8s

from bench import descheduler, trimaran
from bench.quality_moves import Budget, Workloads, moves
from bench.quality_outcome import (
    Outcome,
    decision_counts,
    read_metrics,
    scheduler_seconds,
    verb_seconds,
)
from bench.quality_pods import (
    BURST_MAX_UNAVAILABLE,
    LABEL,
    SCHEDULER_NAME,
    Lives,
    disruption_budget,
    first_bound,
    pod_loads,
    relative,
    replica_set,
    watch,
)
from bench.quality_rebalancer import KeptLog, rebalancer_counts
from bench.quality_strategies import (
    CPU_LIMIT,
    EVICTING,
    EVICTIONS_PER_NODE,
    NODE_CPUS,
    NODE_MEMORY,
    REBALANCE_PERIOD,
    Strategy,
    descheduler_thresholds,
    with_rebalance_high,
)
from sandbox.cluster import Sandbox
from sandbox.metrics_stack import MetricsStack
from sandbox.processes import wait_for
from sandbox.specs import ExtenderSpec, NodeSpec
from sandbox.workload import Arrival, Load, Placed, Trace, node_usage
from shared.annotation_keys import REBALANCED_FROM_ANNOTATION, REBALANCED_USAGE_ANNOTATION
from shared.annotations import Sample, decode

CLEARED = (
    "node_hot_value",
    "loadsched.io/requeue",
    REBALANCED_FROM_ANNOTATION,
    REBALANCED_USAGE_ANNOTATION,
)


@dataclass
class Harness:
    box: Sandbox
    stack: MetricsStack
    nodes: list[NodeSpec]
    background: dict[str, Load]
    folder: Path
    drain: float
    say: Callable[[str], None]
    logs: Path | None = None
    """Where the logs of each round of the strategies that evict (loadsched's annotator, which
    runs the rebalancer, and the descheduler) are kept, named by strategy and seed; ``None``:
    not kept."""
    rebalance_high: float = CPU_LIMIT
    """The rebalancer's and the descheduler's ``high`` on CPU (and the rebalancer's on memory);
    ``low`` is 0.8 × it for both."""

    def background_levels(self) -> dict[str, dict[str, float]]:
        return {n: {"cpu": b.cpu, "mem": b.memory} for n, b in self.background.items()}

    def reset(self) -> None:
        """Every bench pod gone, loadsched stopped, the exporter at background, the metrics
        back at it (1-minute averages and deviations forget the last run)."""
        for name in list(self.box.schedulers):
            self.box.stop_scheduler(name)
        for name in ("extender", "minimal-extender", "annotator"):
            if self.box.supervisor.running(name):
                self.box.supervisor.stop_named(name)
        descheduler.stop(self.box)
        apps, policy = k8s.AppsV1Api(self.box.api), k8s.PolicyV1Api(self.box.api)
        apps.delete_collection_namespaced_replica_set("default", label_selector=LABEL)
        policy.delete_collection_namespaced_pod_disruption_budget("default", label_selector=LABEL)
        self.box.delete_pods(LABEL)
        self.stack.set_loads(self.background_levels())
        want = {self.stack.instance(n): 100 * self.background[n.name].cpu for n in self.nodes}
        prometheus = self.stack.prometheus

        def settled() -> bool:
            for rule in ("cpu_usage_active", "cpu_usage_avg_1m"):
                got = prometheus.query(rule)
                if any(abs(got.get(i, -100) - v) > 1.5 for i, v in want.items()):
                    return False
            deviation = prometheus.query("cpu_usage_stddev_1m")
            return all(deviation.get(i, 100) < 1.0 for i in want)

        wait_for(settled, timeout=240, what="metrics back at background load", interval=2)
        for node in self.nodes:
            self.box.annotate_node(node.name, dict.fromkeys(CLEARED))

    def start(self, strategy: Strategy) -> tuple[str | None, str]:
        """Start the strategy's annotator, extender (if it uses one, or the minimal one) and
        kube-scheduler; loadsched's extender's URL (``None`` without it) and the annotator's."""
        written = with_rebalance_high(strategy, self.rebalance_high)
        extender_policy, annotator_policy = written.write(self.folder)
        since = datetime.now(UTC).replace(microsecond=0)
        annotator = self.box.start_annotator(
            prometheus_url=self.stack.prometheus.url,
            args=["--policy", str(annotator_policy), "--no-leader-elect"],
        )
        wait_for(
            lambda: all(self._annotated_since(n.name, since) for n in self.nodes),
            timeout=60,
            what="fresh annotations on every node",
            interval=1,
        )
        spec, url = None, None
        if strategy.uses_extender:
            url = self.box.start_extender(
                args=["--policy", str(extender_policy), "--log-level", "warning"]
            )
            spec = ExtenderSpec(url, bind=strategy.bind)
        elif strategy.minimal:
            spec = ExtenderSpec(self.box.start_minimal_extender(), preempt=False)
        if strategy.trimaran is not None:
            self._start_trimaran(strategy, strategy.trimaran)
        else:
            self.box.start_scheduler(
                f"quality-{strategy.label}", scheduler_name=SCHEDULER_NAME, extender=spec
            )
        if strategy.descheduler:
            low, high = descheduler_thresholds(self.rebalance_high)
            descheduler.start(
                self.box,
                self.stack,
                self.nodes,
                rule="cpu_usage_avg_1m",
                low=low,
                high=high,
                per_node=EVICTIONS_PER_NODE,
                interval=REBALANCE_PERIOD,
                folder=self.folder / "descheduler",
            )
        return url, annotator

    def _start_trimaran(self, strategy: Strategy, plugin: str) -> None:
        """scheduler-plugins' kube-scheduler with ``plugin``, its load-watcher's series
        recorded afresh from the background load (its 15-minute windows forget the last
        strategy), each node's there before it starts."""
        trimaran.forget(self.stack)
        prometheus = self.stack.prometheus
        names = {n.name for n in self.nodes}
        wait_for(
            lambda: all(set(prometheus.query(s)) >= names for s in trimaran.SERIES),
            timeout=60,
            what="load-watcher's series for every node",
            interval=1,
        )
        trimaran.start(
            self.box,
            f"quality-{strategy.label}",
            plugin,
            scheduler_name=SCHEDULER_NAME,
            stack=self.stack,
            nodes=self.nodes,
            say=self.say,
        )

    def _annotated_since(self, node: str, since: datetime) -> bool:
        metadata = self.box.core.read_node(node).metadata
        reading = decode(
            ((metadata.annotations if metadata else None) or {}).get("cpu_usage_avg_1m")
        )
        return isinstance(reading, Sample) and reading.timestamp >= since

    def run(self, strategy: Strategy, trace: Trace) -> Outcome:
        outcome = Outcome(strategy)
        began = time.monotonic()
        self.say(f"{strategy.key}: resetting (metrics settle back to background)")
        self.reset()
        log_dir = self.box.supervisor.log_dir
        kept = {  # from before the start: its settings and first rounds are in the log
            name: KeptLog.from_now(log_dir / f"{name}.log")
            for name in ("annotator", descheduler.NAME)
        }
        extender, annotator = self.start(strategy)
        self.say(f"{strategy.key}: playing the trace ({len(trace.arrivals)} pods)")
        selector = f"{LABEL},strategy={strategy.label}"
        store = Lives()
        close = watch(self.box, selector, store)
        try:
            self._play(strategy, trace, store, outcome)
        finally:
            close()
            if self.logs is not None and strategy.key in EVICTING:
                for name, log in kept.items():
                    log.keep(self.logs / f"{strategy.key}-seed{trace.seed}-{name}.log")
        if strategy.rebalance is not None:
            try:
                text = read_metrics(annotator)
                outcome.rebalancer = rebalancer_counts(text)
            except (httpx.HTTPError, ValueError) as e:  # a diagnostic: the figures stand
                self.say(f"{strategy.key}: the rebalancer's metrics not read: {e}")
        try:
            outcome.scheduler = scheduler_seconds(
                self.box.scheduler_metrics(f"quality-{strategy.label}")
            )
        except (TimeoutError, OSError) as e:  # a diagnostic: the round's figures stand
            self.say(f"{strategy.key}: kube-scheduler's metrics not read: {e}")
        if extender is not None:
            try:
                text = read_metrics(extender)
                outcome.decisions, outcome.verbs = decision_counts(text), verb_seconds(text)
            except (httpx.HTTPError, ValueError) as e:  # a diagnostic: the figures stand
                self.say(f"{strategy.key}: the extender's metrics not read: {e}")
        outcome.seconds = time.monotonic() - began
        self.say(
            f"{strategy.key}: {len(outcome.latencies)} of {outcome.created} pods bound, "
            f"{outcome.pending} pending at the end ({outcome.seconds:.0f} s)"
        )
        return outcome

    def _play(self, strategy: Strategy, trace: Trace, store: Lives, outcome: Outcome) -> None:
        """Each trace entry a one-replica ReplicaSet (kube-controller-manager makes its pod and
        replaces it when evicted), deleted at the end of its lifetime after its first pod was
        bound; a PodDisruptionBudget per burst. Every second, each node's true usage (and each
        pod's, as cAdvisor's series) goes to the exporter and the recording."""
        apps, policy = k8s.AppsV1Api(self.box.api), k8s.PolicyV1Api(self.box.api)
        labels = {"app": "quality", "strategy": strategy.label}
        groups = {a.name: a.group for a in trace.arrivals}
        budgets = {g: Budget(BURST_MAX_UNAVAILABLE) for g in trace.bursts}
        for group in budgets:
            policy.create_namespaced_pod_disruption_budget(
                "default",
                disruption_budget(f"{strategy.label}-{group}", {**labels, "group": group}),
            )
        created: dict[str, float] = {}
        ended: dict[str, float] = {}
        profiles = {a.name: a.profile for a in trace.arrivals}
        pending_arrivals = list(trace.arrivals)
        end = trace.shape.arrivals_for + self.drain
        names = [n.name for n in self.nodes]

        def create(arrival: Arrival) -> None:
            apps.create_namespaced_replica_set(
                "default", replica_set(arrival, {**labels, "group": arrival.group})
            )

        def delete(name: str) -> None:
            apps.delete_namespaced_replica_set(name, "default", propagation_policy="Background")

        with ThreadPoolExecutor(8) as pool:
            calls: list[Future[None]] = []
            start = time.monotonic()
            next_sample = 0.0
            while (now := time.monotonic() - start) < end:
                while pending_arrivals and pending_arrivals[0].at <= now:
                    arrival = pending_arrivals.pop(0)
                    created[arrival.name] = now
                    calls.append(pool.submit(create, arrival))
                lives = store.snapshot()
                first = first_bound(lives)
                for workload, (_, at) in first.items():
                    if workload not in ended and now >= at - start + profiles[workload].lifetime:
                        ended[workload] = now
                        calls.append(pool.submit(delete, workload))
                calls = raise_failed(calls)
                if now >= next_sample:
                    running: dict[str, list[tuple[str, Placed]]] = {n: [] for n in names}
                    for life in lives:
                        if life.bound_at is None or life.gone_at is not None:
                            continue
                        if life.workload not in ended:
                            pod = Placed(profiles[life.workload], life.bound_at - start)
                            running.setdefault(life.node, []).append((life.name, pod))
                    loads = {
                        n: node_usage(
                            self.background[n],
                            [pod for _, pod in running[n]],
                            now=now,
                            cpus=NODE_CPUS,
                            memory=NODE_MEMORY,
                        )
                        for n in names
                    }
                    self.stack.set_loads(
                        {
                            n: {"cpu": v.cpu, "mem": v.memory, "pods": pod_loads(running[n], now)}
                            for n, v in loads.items()
                        }
                    )
                    outcome.recording.add(now, loads)
                    next_sample += 1.0
                time.sleep(0.05)
        lives = [relative(life, start) for life in store.snapshot()]
        first = first_bound(lives)
        outcome.bound = dict(first)
        outcome.created = len(created)
        seen: dict[str, float] = {}
        for life in lives:
            seen[life.workload] = min(seen.get(life.workload, life.seen_at), life.seen_at)
        outcome.latencies = [at - seen[w] for w, (_, at) in first.items()]
        outcome.pending = len(created) - len(first)
        outcome.moves = moves(
            lives,
            Workloads(
                ended=ended,
                created=created,
                startup={w: p.startup for w, p in profiles.items()},
                groups=groups,
                budgets=budgets,
                end=end,
            ),
        )


def raise_failed(calls: list[Future[None]]) -> list[Future[None]]:
    """The calls still running; the first that failed is raised (a run that cannot create
    its workloads measures nothing)."""
    for call in calls:
        if call.done() and (error := call.exception()) is not None:
            raise SystemExit(f"the bench's API call failed: {error}")
    return [call for call in calls if not call.done()]
