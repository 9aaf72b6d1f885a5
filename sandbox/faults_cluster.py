"""Control-plane and component faults while work flows: a burst of pods through
kube-scheduler and the extender, annotator rounds from Prometheus, and duplicate dispatch
POSTs; see :mod:`sandbox.faults` for the rows and the quota scenario.

:class:`Flow` starts the work's components once on a sandbox; each ``run_*`` function
injects one fault and returns its :class:`~sandbox.faults.FaultRow`.
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import yaml
from kubernetes import client as k8s

from bench.targets import target
from sandbox.cluster import Sandbox
from sandbox.faults import BoundPeak, FaultRow, burst, create_namespace
from sandbox.lag import LaggingRelay
from sandbox.loopback import free_port
from sandbox.metrics_stack import MetricsStack
from sandbox.processes import wait_for
from sandbox.specs import ExtenderSpec, NodeSpec
from shared.annotations import Sample, decode
from shared.policy import load_policy

ROOT = Path(__file__).resolve().parents[1]
POLICY = ROOT / "tests" / "e2e" / "policy-fast.yaml"
NAMESPACE = "faults"
NODES = [NodeSpec(f"node-{i}", f"127.0.0.{i + 1}") for i in range(1, 9)]
LOADS = {n.name: {"cpu": 0.1 + 0.05 * i, "mem": 0.3} for i, n in enumerate(NODES)}
NODE_NAMES = {n.name for n in NODES}


def _period_groups() -> list[tuple[str, ...]]:
    """The policy's metrics by period: a round writes each group's values on a node together."""
    groups: dict[timedelta, list[str]] = {}
    for sync in load_policy(POLICY).spec.sync_policy:
        groups.setdefault(sync.period, []).append(sync.name)
    return [tuple(names) for names in groups.values()]


PERIOD_GROUPS = _period_groups()
METRICS = {name for group in PERIOD_GROUPS for name in group}
LEASE_SLACK = target("faults", "lease-slack").bound
"""Seconds beyond the lease's own timing for the follower's Lease update and this harness's
polling to see it."""
STRICT_BACK = target("faults", "strict-back").bound
"""Seconds within which a non-ignorable scheduler's waiting pods are all bound once the
extender is back."""
WATCHED = ("nodes", "pods", "elasticquotas", "jobs", "cronjobs", "leases")
"""Resources loadsched's services watch (and kube-scheduler, for nodes and pods)."""


class Flow:
    """The work in flight: an extender (scheduling and dispatch, ``--dispatch-auth none``),
    kube-scheduler ``faults`` (ignorable) and ``faults-strict`` (not ignorable) calling it
    through one port, the annotator on a fast policy with Prometheus and the exporter."""

    def __init__(self, sandbox: Sandbox, workdir: Path) -> None:
        self.sandbox = sandbox
        self.workdir = workdir
        self.extender_port = free_port()
        self.stack = MetricsStack(sandbox, NODES, loads=LOADS)
        self.extender = ""
        self.rounds = 0

    def start(self) -> Flow:
        box = self.sandbox
        box.create_nodes(NODES)
        create_namespace(box, NAMESPACE)
        templates = self.workdir / "templates.yaml"
        templates.write_text(
            yaml.safe_dump(
                {
                    "templates": [
                        {
                            "name": "work",
                            "namespace": NAMESPACE,
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                            "allowedKeys": {"names": ["ROW_ID"]},
                            "schedulerName": "faults",
                        }
                    ]
                }
            )
        )
        self.extender = box.start_extender(
            port=self.extender_port,
            args=["--job-templates", str(templates), "--dispatch-auth", "none"],
        )
        box.start_scheduler("faults", scheduler_name="faults", extender=ExtenderSpec(self.extender))
        box.start_scheduler(
            "faults-strict",
            scheduler_name="faults-strict",
            extender=ExtenderSpec(self.extender, ignorable=False),
        )
        self.stack.start()
        box.start_annotator(
            prometheus_url=self.stack.prometheus.url,
            args=["--policy", str(POLICY), "--lease-namespace", "default"],
        )
        return self

    # -- checks ---------------------------------------------------------------------------
    def clear(self) -> None:
        box = self.sandbox
        k8s.BatchV1Api(box.api).delete_collection_namespaced_job(
            NAMESPACE, propagation_policy="Background"
        )
        box.core.delete_collection_namespaced_pod(NAMESPACE)
        wait_for(
            lambda: not box.core.list_namespaced_pod(NAMESPACE).items,
            timeout=60,
            what="the faults namespace to be empty",
        )

    def stale_nodes(self, since: datetime) -> list[str]:
        """Nodes with any of the policy's metrics not written after ``since``, or differing
        from what Prometheus answers now by more than its drift over a few seconds."""
        answers = {metric: self.stack.prometheus.query(metric) for metric in sorted(METRICS)}
        listed: Any = self.sandbox.core.list_node().items
        annotations = {node.metadata.name: node.metadata.annotations or {} for node in listed}
        stale = []
        for node in NODES:
            for metric, answer in answers.items():
                sample = decode(annotations.get(node.name, {}).get(metric, ""))
                latest = answer.get(self.stack.instance(node))
                if (
                    not isinstance(sample, Sample)
                    or sample.timestamp < since
                    or latest is None
                    or abs(sample.value - latest / 100) > 0.02
                ):
                    stale.append(node.name)
                    break
        return stale

    def jobs_with_key(self, key: str) -> int:
        jobs: Any = k8s.BatchV1Api(self.sandbox.api).list_namespaced_job(NAMESPACE).items
        return sum(1 for j in jobs if (j.metadata.annotations or {}).get("loadsched.io/key") == key)


class Duplicates:
    """``count`` POSTs of one new key to ``/v1/jobs``, ``interval`` apart, in a thread; the
    status of each (0: no connection)."""

    def __init__(self, url: str, key: str, count: int = 50, interval: float = 0.2) -> None:
        self.url, self.key, self.count, self.interval = url, key, count, interval
        self.statuses: list[int] = []
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Duplicates:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._thread.join(self.count * self.interval + 60)

    def _run(self) -> None:
        body = {"template": "work", "key": self.key, "data": {"ROW_ID": "1"}}
        with httpx.Client(timeout=30) as client:
            for _ in range(self.count):
                try:
                    self.statuses.append(client.post(f"{self.url}/v1/jobs", json=body).status_code)
                except httpx.HTTPError:
                    self.statuses.append(0)
                time.sleep(self.interval)


def lists(sandbox: Sandbox) -> dict[str, int]:
    """LISTs kube-apiserver has served per watched resource since it started (every client:
    kube-scheduler, kube-controller-manager and this harness included)."""
    counts = sandbox.apiserver_requests("LIST")
    return {r: counts.get(r, 0) for r in WATCHED}


STAMP = r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),\d+ INFO shared\.kube\.watching: (.+?): "
LISTED = re.compile(STAMP + "listed ")
GONE = re.compile(STAMP + r"resourceVersion \S+ expired; re-listing")


def relists(
    sandbox: Sandbox,
    since: datetime,
    components: tuple[str, ...],
    pattern: re.Pattern[str] = LISTED,
) -> Counter[str]:
    """How often each watch of loadsched's ``components`` logged ``pattern`` (a LIST, or a
    410 Gone with :data:`GONE`) at or after ``since`` (local time, as their logs write it):
    ``component/watch`` → count."""
    counts: Counter[str] = Counter()
    floor = since.replace(microsecond=0)
    for component in components:
        path = sandbox.supervisor.log_dir / f"{component}.log"
        for line in path.read_text(errors="replace").splitlines():
            found = pattern.match(line)
            if found and datetime.strptime(found[1], "%Y-%m-%d %H:%M:%S") >= floor:
                counts[f"{component}/{found[2]}"] += 1
    return counts


def run_control_plane(
    flow: Flow,
    fault: str,
    *,
    pods: int = 200,
    quiet_window: float = 10.0,
    say: Callable[[str], None] = lambda _: None,
) -> FaultRow:
    """``fault``: ``apiserver`` (SIGTERM, started again on the same port and etcd),
    ``etcd`` (the same for etcd), or ``compaction`` (etcd compacted to its head, then
    kube-apiserver restarted, so every watch resumes from a compacted revision: 410 Gone).
    During a burst of ``pods`` and annotator rounds, with 50 duplicate POSTs of one key."""
    box = flow.sandbox
    flow.clear()
    key = f"dup-{fault}-{int(time.time())}"

    def compact_and_restart() -> None:
        box.compact_etcd()
        box.restart_apiserver()

    restart: Callable[[], None] = {
        "apiserver": box.restart_apiserver,
        "etcd": box.restart_etcd,
        "compaction": compact_and_restart,
    }[fault]
    before = lists(box)
    with (
        BoundPeak(box, NAMESPACE, f"burst={fault}") as peak,
        Duplicates(flow.extender, key) as duplicates,
    ):
        burst(box, fault, pods, scheduler="faults", namespace=NAMESPACE, cpu="10m")
        time.sleep(1)  # duplicates and bindings under way
        started = time.monotonic()
        fault_at = datetime.now()
        restart()
        up = time.monotonic()
        back = datetime.now(UTC)
        say(f"{fault}: control plane back after {up - started:.1f}s")
        box.wait_bound(f"burst={fault}", pods, namespace=NAMESPACE, timeout=180)
        bound_at = time.monotonic()
        wait_for(
            lambda: not flow.stale_nodes(back),
            timeout=60,
            what="every node's annotations from a round after the restart",
            interval=1,
        )
        fresh_at = time.monotonic()
    after_recovery = lists(box)
    recovered = datetime.now()
    time.sleep(quiet_window)
    later = lists(box)
    restarted = fault != "etcd"  # kube-apiserver's counters start again from 0
    relisted = {r: after_recovery[r] - (0 if restarted else before[r]) for r in WATCHED}
    quiet = {r: later[r] - after_recovery[r] for r in WATCHED}
    ours = relists(box, fault_at, ("extender", "annotator"))
    ours_quiet = relists(box, recovered, ("extender", "annotator"))
    gone = relists(box, fault_at, ("extender", "annotator"), GONE)
    jobs = flow.jobs_with_key(key)
    bindings = sorted(set(peak.bindings.values()))
    lost = (
        (pods - len(peak.bindings))
        + sum(1 for times in peak.bindings.values() if times != 1)
        + abs(jobs - 1)
        + sum(count - 1 for count in ours.values() if count > 1)
        + sum(ours_quiet.values())
        + sum(1 for s in duplicates.statuses if s >= 500 and s != 503)
    )
    return FaultRow(
        fault={
            "apiserver": "kube-apiserver restarted",
            "etcd": "etcd restarted",
            "compaction": "etcd compacted, kube-apiserver restarted",
        }[fault],
        work=f"{pods} pods, annotator rounds, 50 duplicate POSTs",
        outcome=(
            f"{len(peak.bindings)}/{pods} bound (each {bindings}), {jobs} Job, "
            f"{len(gone)} of loadsched's watches got 410 Gone; "
            f"re-listed {sum(ours.values())} watches "
            f"(max {max(ours.values(), default=0)} per watch), then {sum(ours_quiet.values())} "
            f"in {quiet_window:g}s; all clients' LISTs {sum(relisted.values())} "
            f"then {sum(quiet.values())}"
        ),
        lost=lost,
        recover_seconds=max(bound_at, fresh_at) - started,
        details={
            "bound": len(peak.bindings),
            "bindings": bindings,
            "jobs": jobs,
            "statuses": sorted(set(duplicates.statuses)),
            "relisted": relisted,
            "quiet": quiet,
            "ours": dict(ours),
            "ours_quiet": dict(ours_quiet),
            "gone": dict(gone),
            "down_seconds": up - started,
            "bound_seconds": bound_at - started,
            "fresh_seconds": fresh_at - started,
        },
    )


def run_extender_kill(
    flow: Flow, *, pods: int = 100, down: float = 5.0, say: Callable[[str], None] = lambda _: None
) -> list[FaultRow]:
    """A burst of ``pods`` to each scheduler (ignorable and not); once 10 are bound the
    extender is SIGKILLed, and started again (same port) ``down`` seconds later; half of each
    scheduler's pods are created only after the kill (so some need the extender while it is
    down, however fast the first half went). Ignorable: they are all bound while it is down
    (plain placement); not ignorable: none is bound while it is down, all once it is back.
    Pods already past filter when it died may still bind: the counts "at the kill" are taken
    1 s after it."""
    box = flow.sandbox
    flow.clear()
    half = pods // 2

    def bound(*labels: str) -> int:
        selector = f"burst in ({', '.join(labels)})"
        return sum(1 for node in box.placements(selector, NAMESPACE).values() if node)

    def create() -> None:
        burst(box, "strict", half, scheduler="faults-strict", namespace=NAMESPACE, cpu="10m")
        burst(box, "plain", half, scheduler="faults", namespace=NAMESPACE, cpu="10m")

    with BoundPeak(box, NAMESPACE, "burst in (plain, late, strict, strict-late)") as peak:
        creating = threading.Thread(target=create, daemon=True)
        creating.start()
        wait_for(lambda: bound("strict") >= 10, timeout=60, what="the burst under way")
        box.supervisor.kill_named("extender")
        killed = time.monotonic()
        say("extender killed")
        time.sleep(1)
        plain_at_kill, strict_at_kill = bound("plain"), bound("strict")
        creating.join(60)
        burst(
            box,
            "strict-late",
            pods - half,
            scheduler="faults-strict",
            namespace=NAMESPACE,
            cpu="10m",
        )
        burst(box, "late", pods - half, scheduler="faults", namespace=NAMESPACE, cpu="10m")
        box.wait_bound("burst in (plain, late)", pods, namespace=NAMESPACE, timeout=120)
        plain_at = time.monotonic()
        time.sleep(max(0.0, down - (time.monotonic() - killed)))
        strict_before_return = bound("strict", "strict-late")
        plain_before_return = bound("plain", "late")
        box.supervisor.start_again("extender")
        wait_for(lambda: _ready(flow.extender), timeout=60, what="the extender back")
        returned = time.monotonic()
        box.wait_bound("burst in (strict, strict-late)", pods, namespace=NAMESPACE, timeout=120)
        strict_at = time.monotonic()
    twice = sum(1 for times in peak.bindings.values() if times != 1)
    return [
        FaultRow(
            fault="extender SIGKILLed, ignorable: true",
            work=f"{pods} pods",
            outcome=(
                f"{plain_before_return - plain_at_kill} of {pods} bound while it was down "
                f"({pods - half} created after the kill)"
            ),
            lost=twice + (pods - bound("plain", "late")),
            recover_seconds=plain_at - killed,
            target="every pod bound while it is down",
            met=plain_before_return == pods,
            details={"at_kill": plain_at_kill, "before_return": plain_before_return},
        ),
        FaultRow(
            fault="extender SIGKILLed, ignorable: false",
            work=f"{pods} pods",
            outcome=(
                f"{strict_before_return - strict_at_kill} bound while down, "
                f"all {pods} {strict_at - returned:.1f}s after its return"
            ),
            lost=twice + (pods - bound("strict", "strict-late")),
            recover_seconds=strict_at - returned,
            target=f"none bound while down, all ≤ {STRICT_BACK:g}s after its return",
            met=strict_before_return == strict_at_kill and strict_at - returned <= STRICT_BACK,
            details={
                "at_kill": strict_at_kill,
                "before_return": strict_before_return,
                "after_return": strict_at - returned,
            },
        ),
    ]


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def lease_holder(sandbox: Sandbox, name: str = "loadsched-annotator") -> str:
    lease: Any = k8s.CoordinationV1Api(sandbox.api).read_namespaced_lease(name, "default")
    return str(lease.spec.holder_identity or "")


def node_stamps(sandbox: Sandbox) -> dict[str, dict[str, datetime]]:
    """Every node's loadsched metric annotations: metric → the timestamp of its value."""
    stamps: dict[str, dict[str, datetime]] = {}
    nodes: Any = sandbox.core.list_node().items
    for node in nodes:
        for key, text in (node.metadata.annotations or {}).items():
            sample = decode(text)
            if isinstance(sample, Sample) and key in METRICS:
                stamps.setdefault(node.metadata.name, {})[key] = sample.timestamp
    return stamps


def round_stamps(sandbox: Sandbox, metric: str = "cpu_usage_avg_5m") -> dict[str, datetime]:
    """The timestamp of ``metric`` on every node (one round writes one per node)."""
    return {
        node: metrics[metric]
        for node, metrics in node_stamps(sandbox).items()
        if node in NODE_NAMES and metric in metrics
    }


def rounds_mixed(stamps: dict[str, datetime]) -> bool:
    """True while the nodes carry values of different rounds (stamps over 1 s apart)."""
    if len(stamps) < len(NODES):
        return True
    return (max(stamps.values()) - min(stamps.values())).total_seconds() > 1.0


def split_nodes(stamps: dict[str, dict[str, datetime]]) -> set[str]:
    """Nodes a round wrote only in part: for metrics of one period, the node has one value of
    a round and an older value of another metric that the same round wrote on other nodes.
    (A round writes a node's due values in one patch, so a crash mid-round never splits a
    node. A metric retried alone after a failed query is no split: its round wrote only it.)"""
    split = set()
    for group in PERIOD_GROUPS:
        wrote: dict[datetime, set[str]] = {}
        for metrics in stamps.values():
            for name in group:
                if name in metrics:
                    wrote.setdefault(metrics[name], set()).add(name)
        for node, metrics in stamps.items():
            for name in group:
                stamp = metrics.get(name)
                if stamp is None:
                    continue
                for other in wrote[stamp] - {name}:
                    if other not in metrics or metrics[other] < stamp:
                        split.add(node)
    return split


def _every_metric_written(sandbox: Sandbox) -> bool:
    stamps = node_stamps(sandbox)
    return all(set(stamps.get(name, {})) == METRICS for name in NODE_NAMES)


def run_annotator_kill(
    flow: Flow,
    *,
    period: float = 5.0,
    lease: float = 15.0,
    retry: float = 2.0,
    lag: float = 0.5,
    say: Callable[[str], None] = lambda _: None,
) -> FaultRow:
    """Two annotators share the Lease. The leader reaches the API server through a relay that
    answers ``lag`` seconds late and writes one node at a time, so each round takes at least
    ``len(NODES) × lag`` seconds; it is SIGKILLed as soon as one node has the new round's
    values: mid-round. Measured every 0.1 s until every node carries a round of the follower:
    when the follower holds the Lease (target: within ``lease`` + ``retry``), how long after
    that every node is on one round again (target: within one ``period``), and any node
    carrying metrics of one period from different rounds (target: none, ever)."""
    box = flow.sandbox
    args = ["--policy", str(POLICY), "--lease-namespace", "default"]
    box.supervisor.stop_named("annotator")
    try:
        return _kill_mid_round(
            flow, args, period=period, lease=lease, retry=retry, lag=lag, say=say
        )
    finally:  # the flow's own annotator leads again, whatever happened
        box.supervisor.kill_named("annotator-a")
        box.supervisor.stop_named("annotator-b")
        box.supervisor.start_again("annotator")


def _kill_mid_round(
    flow: Flow,
    args: list[str],
    *,
    period: float,
    lease: float,
    retry: float,
    lag: float,
    say: Callable[[str], None],
) -> FaultRow:
    box = flow.sandbox
    url = flow.stack.prometheus.url
    with LaggingRelay(box.api_port, lag) as relay:
        box.start_annotator(
            prometheus_url=url,
            name="annotator-a",
            api_port=relay.port,
            args=[*args, "--write-concurrency", "1"],
        )
        wait_for(
            lambda: lease_holder(box) == "annotator-a", timeout=lease + 30, what="annotator-a leads"
        )
        box.start_annotator(prometheus_url=url, name="annotator-b", args=args)
        wait_for(  # on a new sandbox, once Prometheus has every metric for every node
            lambda: _every_metric_written(box) and not rounds_mixed(round_stamps(box)),
            timeout=120,
            what="a whole round with every metric on every node",
            interval=0.05,
        )
        before = round_stamps(box)
        wait_for(
            lambda: round_stamps(box) != before,
            timeout=3 * period,
            what="a new round",
            interval=0.02,
        )
        box.supervisor.kill_named("annotator-a")
        killed = time.monotonic()
        say("annotator leader killed")
        at_kill = round_stamps(box)
    newest = max(at_kill.values())
    split: set[str] = set()
    took_over: float | None = None
    whole: float | None = None
    deadline = killed + lease + retry + 4 * period + 30
    while whole is None and time.monotonic() < deadline:
        now = time.monotonic()
        stamps = node_stamps(box)
        split |= split_nodes(stamps)
        if took_over is None and lease_holder(box) == "annotator-b":
            took_over = now - killed
        cpu = {n: m["cpu_usage_avg_5m"] for n, m in stamps.items() if "cpu_usage_avg_5m" in m}
        if took_over is not None and len(cpu) >= len(NODES) and min(cpu.values()) > newest:
            whole = now - killed
        time.sleep(0.1)
    new_at_kill = sum(1 for stamp in at_kill.values() if stamp == newest)
    after_lead = (whole - took_over) if whole is not None and took_over is not None else None
    met = (
        not split
        and took_over is not None
        and took_over <= lease + retry + LEASE_SLACK
        and after_lead is not None
        and after_lead <= period
    )
    return FaultRow(
        fault="annotator leader SIGKILLed mid-round",
        work=f"a round over {len(NODES)} nodes, {lag:g}s a patch; every {period:g}s",
        outcome=(
            f"killed with {new_at_kill} of {len(at_kill)} nodes on the new round; follower "
            + (f"led after {took_over:.1f}s" if took_over is not None else "never led")
            + f" (lease {lease:g}s + retry {retry:g}s); all nodes on one round "
            + (f"{after_lead:.1f}s later" if after_lead is not None else "never")
            + f" (period {period:g}s); {len(split)} node(s) split between rounds"
        ),
        lost=len(split) + (0 if whole is not None else len(NODES)),
        recover_seconds=whole if whole is not None else float("nan"),
        target=(
            f"lead ≤ {lease + retry:g}s (+{LEASE_SLACK:g}s to ask and see), one round ≤ "
            f"{period:g}s after, no node split"
        ),
        met=met,
        details={
            "took_over": took_over,
            "after_lead": after_lead,
            "mid_round": 0 < new_at_kill < len(at_kill),
            "split": sorted(split),
        },
    )
