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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from bench.quality_strategies import Strategy
from sandbox import kwok
from sandbox.cluster import ExtenderSpec, NodeSpec, Sandbox, pod_body
from sandbox.metrics_stack import MetricsStack
from sandbox.processes import wait_for
from sandbox.workload import Load, Placed, Recording, Trace, node_usage
from shared.annotations import Sample, decode
from shared.kube.config import load_endpoint
from shared.kube.watching import Reflector
from shared.load_model import WITH_POD
from shared.pods import POD_DECODER, Pod

SCHEDULER_NAME = "quality"
LABEL = "app=quality"
CLEARED = ("node_hot_value", "loadsched.io/requeue")
NODE_CPUS, NODE_MEMORY = 8.0, 32.0 * 2**30


class Bindings:
    """A watch store: when the watch first saw each pod bound, and where."""

    def __init__(self) -> None:
        self.bound: dict[str, tuple[str, float]] = {}
        self.lock = threading.Lock()

    def replace(self, items: Sequence[Pod]) -> None:
        for pod in items:
            self._see(pod)

    def apply(self, event: str, item: Pod) -> None:
        if event != "DELETED":
            self._see(item)

    def _see(self, pod: Pod) -> None:
        if pod.spec.nodeName:
            with self.lock:
                self.bound.setdefault(pod.metadata.name, (pod.spec.nodeName, time.monotonic()))

    def snapshot(self) -> dict[str, tuple[str, float]]:
        with self.lock:
            return dict(self.bound)


def watch(box: Sandbox, selector: str, store: Bindings) -> Callable[[], None]:
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
    skipped: str | None = None
    """Why the strategy did not run."""


@dataclass
class Harness:
    box: Sandbox
    stack: MetricsStack
    nodes: list[NodeSpec]
    background: dict[str, Load]
    folder: Path
    drain: float
    say: Callable[[str], None]

    def background_levels(self) -> dict[str, dict[str, float]]:
        return {n: {"cpu": b.cpu, "mem": b.memory} for n, b in self.background.items()}

    def reset(self) -> None:
        """Every bench pod gone, loadsched stopped, the exporter at background, the metrics
        back at it (1-minute averages and deviations forget the last run)."""
        for name in list(self.box.schedulers):
            self.box.stop_scheduler(name)
        for name in ("extender", "annotator"):
            if self.box.supervisor.running(name):
                self.box.supervisor.stop_named(name)
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

    def start(self, strategy: Strategy) -> str | None:
        """Start the strategy's annotator, extender (if it uses one) and kube-scheduler;
        the extender's URL, or ``None`` without one."""
        extender_policy, annotator_policy = strategy.write(self.folder)
        since = datetime.now(UTC).replace(microsecond=0)
        self.box.start_annotator(
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
            spec = ExtenderSpec(url, bind=True)
        self.box.start_scheduler(
            f"quality-{strategy.key}", scheduler_name=SCHEDULER_NAME, extender=spec
        )
        return url

    def _annotated_since(self, node: str, since: datetime) -> bool:
        metadata = self.box.core.read_node(node).metadata
        reading = decode(
            ((metadata.annotations if metadata else None) or {}).get("cpu_usage_avg_1m")
        )
        return isinstance(reading, Sample) and reading.timestamp >= since

    def run(self, strategy: Strategy, trace: Trace) -> Outcome:
        outcome = Outcome(strategy)
        self.say(f"{strategy.key}: resetting (metrics settle back to background)")
        self.reset()
        extender = self.start(strategy)
        self.say(f"{strategy.key}: playing the trace ({len(trace.arrivals)} pods)")
        selector = f"{LABEL},strategy={strategy.key}"
        store = Bindings()
        close = watch(self.box, selector, store)
        try:
            self._play(strategy, trace, store, outcome)
        finally:
            close()
        if extender is not None:
            with httpx.Client(base_url=extender, timeout=10) as client:
                text = client.get("/metrics").raise_for_status().text
                outcome.decisions, outcome.verbs = decision_counts(text), verb_seconds(text)
        self.say(
            f"{strategy.key}: {len(outcome.latencies)} of {outcome.created} pods bound, "
            f"{outcome.pending} pending at the end"
        )
        return outcome

    def _play(self, strategy: Strategy, trace: Trace, store: Bindings, outcome: Outcome) -> None:
        core = self.box.core
        created: dict[str, float] = {}
        deleted: set[str] = set()
        profiles = {a.name: a.profile for a in trace.arrivals}
        pending_arrivals = list(trace.arrivals)
        end = trace.shape.arrivals_for + self.drain
        names = [n.name for n in self.nodes]

        def create(name: str, body: Any) -> None:
            asked = time.monotonic()
            core.create_namespaced_pod("default", body)
            created[name] = asked

        def delete(name: str) -> None:
            core.delete_namespaced_pod(name, "default")

        with ThreadPoolExecutor(8) as pool:
            start = time.monotonic()
            next_sample = 0.0
            while (now := time.monotonic() - start) < end:
                while pending_arrivals and pending_arrivals[0].at <= now:
                    arrival = pending_arrivals.pop(0)
                    profile = arrival.profile
                    body = pod_body(
                        arrival.name,
                        scheduler_name=SCHEDULER_NAME,
                        cpu=f"{round(profile.cpu_request * 1000)}m",
                        memory=str(int(profile.memory_request)),
                        labels={"app": "quality", "strategy": strategy.key, "group": arrival.group},
                    )
                    # kwok starts it (Running, Ready) the profile's startup after binding
                    body["metadata"]["annotations"] = kwok.lifecycle(
                        starts_after=f"{profile.startup:.3f}s"
                    )
                    pool.submit(create, arrival.name, body)
                bound = store.snapshot()
                placed: dict[str, list[Placed]] = {n: [] for n in names}
                for name, (node, at) in bound.items():
                    relative = at - start
                    if name in deleted:
                        continue
                    if now >= relative + profiles[name].lifetime:
                        deleted.add(name)
                        pool.submit(delete, name)
                        continue
                    placed.setdefault(node, []).append(Placed(profiles[name], relative))
                if now >= next_sample:
                    loads = {
                        n: node_usage(
                            self.background[n],
                            placed[n],
                            now=now,
                            cpus=NODE_CPUS,
                            memory=NODE_MEMORY,
                        )
                        for n in names
                    }
                    self.stack.set_loads(
                        {n: {"cpu": v.cpu, "mem": v.memory} for n, v in loads.items()}
                    )
                    outcome.recording.add(now, loads)
                    next_sample += 1.0
                time.sleep(0.05)
        bound = store.snapshot()
        outcome.bound = {name: (node, at - start) for name, (node, at) in bound.items()}
        outcome.created = len(created)
        outcome.latencies = [
            at - created[name] for name, (_, at) in bound.items() if name in created
        ]
        outcome.pending = len(created) - len(bound)
