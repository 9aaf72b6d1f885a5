"""One strategy's run for bench/quality.py: reset the cluster, start the strategy's
kube-scheduler (and loadsched with its policy), play the trace, and record true usage.

The bench's own pod watch tells when each pod is bound; every second the true usage of every
node (sandbox/workload.py) is pushed to the synthetic exporter and recorded. kwok, the nodes'
kubelet, starts each pod (Running, Ready) when its profile starts using CPU; the trace deletes
it gracefully at the end of its lifetime.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import kubernetes.client as k8s
from prometheus_client.parser import text_string_to_metric_families

from bench import descheduler, trimaran
from bench.quality_moves import Budget, Moves, PodLife, Workloads, moves
from bench.quality_rebalancer import KeptLog, rebalancer_counts
from bench.quality_strategies import (
    CPU_LIMIT,
    EVICTING,
    EVICTIONS_PER_NODE,
    REBALANCE_PERIOD,
    Strategy,
    descheduler_thresholds,
    with_rebalance_high,
)
from sandbox import kwok
from sandbox.cluster import Sandbox
from sandbox.metrics_stack import MetricsStack
from sandbox.processes import wait_for
from sandbox.specs import ExtenderSpec, NodeSpec, pod_body
from sandbox.workload import Arrival, Load, Placed, Recording, Trace, node_usage, pod_usage
from shared.annotation_keys import REBALANCED_FROM_ANNOTATION, REBALANCED_USAGE_ANNOTATION
from shared.annotations import Sample, decode
from shared.kube.config import load_endpoint
from shared.kube.watching import Reflector
from shared.load_model import WITH_POD
from shared.pods import POD_DECODER, Pod

SCHEDULER_NAME = "quality"
LABEL = "app=quality"
CLEARED = (
    "node_hot_value",
    "loadsched.io/requeue",
    REBALANCED_FROM_ANNOTATION,
    REBALANCED_USAGE_ANNOTATION,
)
NODE_CPUS, NODE_MEMORY = 8.0, 32.0 * 2**30


class Lives:
    """A watch store: when the watch first saw each pod, bound, and its deletion begun
    (seconds on the monotonic clock), with its workload (the ``workload`` label)."""

    def __init__(self) -> None:
        self.pods: dict[str, PodLife] = {}
        self.lock = threading.Lock()

    def replace(self, items: Sequence[Pod]) -> None:
        for pod in items:
            self._see(pod, gone=False)

    def apply(self, event: str, item: Pod) -> None:
        self._see(item, gone=event == "DELETED")

    def _see(self, pod: Pod, *, gone: bool) -> None:
        now = time.monotonic()
        name = pod.metadata.name
        with self.lock:
            life = self.pods.get(name) or PodLife(
                name, (pod.metadata.labels or {}).get("workload", name), now
            )
            if pod.spec.nodeName and life.bound_at is None:
                life = replace(life, node=pod.spec.nodeName, bound_at=now)
            if (gone or pod.metadata.deletionTimestamp) and life.gone_at is None:
                life = replace(life, gone_at=now)
            self.pods[name] = life

    def snapshot(self) -> list[PodLife]:
        with self.lock:
            return list(self.pods.values())


def watch(box: Sandbox, selector: str, store: Lives) -> Callable[[], None]:
    """Watch pods matching ``selector`` in a thread; returns a function that stops it."""
    listed, stop = threading.Event(), threading.Event()
    endpoint = load_endpoint(str(box.kubeconfig))

    async def run() -> None:
        async with endpoint.client() as client:
            reflector = Reflector[Pod](
                client=client,
                path="/api/v1/namespaces/default/pods",
                decode=POD_DECODER.decode,
                store=store,
                name=f"quality {selector}",
                label_selector=selector,
            )
            task = asyncio.create_task(reflector.run())
            await reflector.synced.wait()
            listed.set()
            while not stop.is_set() and not task.done():
                await asyncio.sleep(0.05)
            task.cancel()

    thread = threading.Thread(target=asyncio.run, args=(run(),), daemon=True)
    thread.start()
    if not listed.wait(60):
        raise SystemExit(f"the bench's pod watch ({selector}) did not list")

    def close() -> None:
        stop.set()
        thread.join(10)

    return close


DECISIONS = {
    "placed_without_room": ("loadsched_extender_placed_without_room_total", None),
    "refused_for_room": ("loadsched_extender_nodes_filtered_total", WITH_POD),
}
"""What :func:`decision_counts` reads off the extender's metrics: a sample name, and the
``reason`` label its samples must have (``None``: any)."""


def decision_counts(text: str) -> dict[str, float]:
    """From the extender's ``/metrics`` (Prometheus text): filter answers that placed a pod no
    node had room for (``whenNoNodeHasRoom: place``), and node refusals for want of room for a
    pod's estimate, each summed over its labels."""
    counts = dict.fromkeys(DECISIONS, 0.0)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            for key, (name, reason) in DECISIONS.items():
                if sample.name == name and reason in (None, sample.labels.get("reason")):
                    counts[key] += sample.value
    return counts


VERB_SECONDS = "loadsched_extender_request_duration_seconds"


def verb_seconds(text: str) -> dict[str, float]:
    """From the extender's ``/metrics`` (Prometheus text): its mean time per call, by verb
    (seconds; the verbs called at least once), from first body byte to encoded answer; for
    ``bind``, the binding written to the API server included."""
    sums: dict[str, float] = {}
    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            verb = sample.labels.get("verb", "")
            if sample.name == f"{VERB_SECONDS}_sum":
                sums[verb] = sample.value
            elif sample.name == f"{VERB_SECONDS}_count":
                counts[verb] = sample.value
    return {verb: sums.get(verb, 0.0) / n for verb, n in counts.items() if n}


SCHEDULER_STEPS = {
    "algorithm": ("scheduler_scheduling_algorithm_duration_seconds", {}),
    "attempt": ("scheduler_scheduling_attempt_duration_seconds", {"result": "scheduled"}),
    "queued to bound": ("scheduler_pod_scheduling_sli_duration_seconds", {}),
}
"""What :func:`scheduler_seconds` reads off kube-scheduler's metrics: per step, a histogram
and the labels its samples must have. ``algorithm``: filtering and scoring, the extender's
calls included, per attempt (an attempt that found no node too, with its preemption);
``attempt``: per pod scheduled, the algorithm and the binding (the extender's bind verb, for
the strategies that bind through it); ``queued to bound``: per pod, from entering the
scheduling queue to bound, the wait behind the pods before it included."""


def scheduler_seconds(text: str) -> dict[str, float]:
    """From kube-scheduler's ``/metrics`` (Prometheus text): its mean seconds per observation
    of each of :data:`SCHEDULER_STEPS` observed at least once, summed over other labels."""
    sums: dict[str, float] = {}
    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            for step, (name, labels) in SCHEDULER_STEPS.items():
                if sample.name not in (f"{name}_sum", f"{name}_count") or any(
                    sample.labels.get(k) != v for k, v in labels.items()
                ):
                    continue
                into = sums if sample.name.endswith("_sum") else counts
                into[step] = into.get(step, 0.0) + sample.value
    return {step: sums.get(step, 0.0) / n for step, n in counts.items() if n}


@dataclass
class Outcome:
    strategy: Strategy
    recording: Recording = field(default_factory=Recording)
    latencies: list[float] = field(default_factory=list)
    """Created → bound, seconds, per bound pod."""
    pending: int = 0
    """Pods never bound by the end of the run."""
    bound: dict[str, tuple[str, float]] = field(default_factory=dict)
    """Per pod bound: its node, and when the bench's watch saw it bound (seconds from the
    trace's start, as the recording's times)."""
    created: int = 0
    decisions: dict[str, float] = field(default_factory=dict)
    """What the extender counted over the run (:func:`decision_counts`); empty without one."""
    verbs: dict[str, float] = field(default_factory=dict)
    """The extender's mean seconds per call, by verb, over the run (:func:`verb_seconds`)."""
    scheduler: dict[str, float] = field(default_factory=dict)
    """kube-scheduler's mean seconds by step, over the run (:func:`scheduler_seconds`; each
    strategy starts its own kube-scheduler, which schedules only the trace's pods)."""
    skipped: str | None = None
    """Why the strategy did not run."""
    moves: Moves | None = None
    """What evictions did (:mod:`bench.quality_moves`); ``None`` for runs saved before."""
    rebalancer: dict[str, float] = field(default_factory=dict)
    """What loadsched's rebalancer counted since the annotator started, a few rounds before the
    trace (:func:`rebalancer_counts`); empty without it, or when not read."""
    seconds: float = 0.0
    """How long the strategy's round took: reset, start, the trace (0: saved before)."""


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


def read_metrics(url: str) -> str:
    """The ``/metrics`` text of the server at ``url``."""
    with httpx.Client(base_url=url, timeout=10) as client:
        return client.get("/metrics").raise_for_status().text


def raise_failed(calls: list[Future[None]]) -> list[Future[None]]:
    """The calls still running; the first that failed is raised (a run that cannot create
    its workloads measures nothing)."""
    for call in calls:
        if call.done() and (error := call.exception()) is not None:
            raise SystemExit(f"the bench's API call failed: {error}")
    return [call for call in calls if not call.done()]


BURST_MAX_UNAVAILABLE = 0.1
"""Each burst's PodDisruptionBudget: ``maxUnavailable`` 10 % of its pods."""


def first_bound(lives: Sequence[PodLife]) -> dict[str, tuple[str, float]]:
    """Per workload: the node and time its first pod was bound."""
    out: dict[str, tuple[str, float]] = {}
    for life in sorted(
        (life for life in lives if life.bound_at is not None), key=lambda life: life.bound_at or 0
    ):
        out.setdefault(life.workload, (life.node, life.bound_at or 0.0))
    return out


def relative(life: PodLife, start: float) -> PodLife:
    """``life`` with its times from ``start``."""
    return replace(
        life,
        seen_at=life.seen_at - start,
        bound_at=None if life.bound_at is None else life.bound_at - start,
        gone_at=None if life.gone_at is None else life.gone_at - start,
    )


def pod_loads(running: Sequence[tuple[str, Placed]], now: float) -> dict[str, dict[str, float]]:
    """Each running pod's usage, as the exporter serves it (cAdvisor's series)."""
    out = {}
    for name, pod in running:
        cores, memory = pod_usage(pod.profile, bound_at=pod.bound_at, now=now)
        out[f"default/{name}"] = {"cpu": cores, "mem": memory}
    return out


def replica_set(arrival: Arrival, labels: dict[str, str]) -> Any:
    """One replica of the arrival's pod; kwok starts it (Running, Ready) the profile's startup
    after binding."""
    profile = arrival.profile
    pod = pod_body(
        arrival.name,
        scheduler_name=SCHEDULER_NAME,
        cpu=f"{round(profile.cpu_request * 1000)}m",
        memory=str(int(profile.memory_request)),
        labels={**labels, "workload": arrival.name},
    )
    pod["metadata"]["annotations"] = kwok.lifecycle(starts_after=f"{profile.startup:.3f}s")
    for key in ("apiVersion", "kind"):
        pod.pop(key)
    for key in ("name", "namespace"):
        pod["metadata"].pop(key)
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": arrival.name, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {**labels, "workload": arrival.name}},
            "template": pod,
        },
    }


def disruption_budget(name: str, selector: dict[str, str]) -> Any:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "labels": {"app": "quality"}},
        "spec": {
            "maxUnavailable": f"{round(100 * BURST_MAX_UNAVAILABLE)}%",
            "selector": {"matchLabels": selector},
        },
    }
