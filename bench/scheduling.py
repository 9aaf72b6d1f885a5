"""Scheduling throughput on the real control plane, 1,000 fake nodes with load annotations:
the plain kube-scheduler, the same kube-scheduler with a minimal extender, and with loadsched's
extender (both names-only), side by side in one run.

The minimal extender (``hack/minimal-extender``, Go) does only what the extender protocol
requires: it reads the node names and lets every node pass with score 0. What it costs is
what any HTTP extender costs kube-scheduler (the JSON and HTTP of two calls per pod, inside
the scheduler's sequential cycle, on the same 2 cores); loadsched's extender can at best
match it.

A short uncounted batch of each kind warms the control plane up first. Each batch starts
from the same cluster: its pods are created while its scheduler is stopped,
the scheduler is started, and a watch times the bindings: pods/s = (pods - 1) / (last binding -
first binding); then the scheduler is stopped and the pods deleted. Rounds run plain, minimal,
loadsched in turn; ratios are taken within a round, and the median over rounds is reported.
CPU per pod comes from each process's user + system time over its batch.

    .venv/bin/python bench/scheduling.py [--nodes 1000] [--pods 2000] [--rounds 2] [--warmup 300]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import statistics
import sys
import threading
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sandbox.build import ensure_minimal_extender  # noqa: E402
from sandbox.cluster import ExtenderSpec, NodeSpec, Sandbox, free_port, http_ok, pod_body  # noqa: E402
from sandbox.processes import wait_for  # noqa: E402
from shared.annotations import encode_metric  # noqa: E402
from shared.kube.config import load_endpoint  # noqa: E402
from shared.kube.watching import Reflector  # noqa: E402
from shared.load_model import LoadRules  # noqa: E402
from shared.pods import POD_DECODER, Pod  # noqa: E402
from shared.policy import default_policy  # noqa: E402

TARGET_RATIO = 0.9
KINDS = ("plain", "minimal", "loadsched")
PROCESSES = ("kube-scheduler", "kube-apiserver", "etcd", "kube-controller-manager", "extender")


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


def extender_seconds(url: str) -> float:
    """Filter + prioritize time the extender has measured so far (its own metrics)."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as response:  # noqa: S310 - loopback
        text = response.read().decode()
    total = 0.0
    for verb in ("filter", "prioritize"):
        match = re.search(
            rf'loadsched_extender_request_duration_seconds_sum{{verb="{verb}"}} (\S+)', text
        )
        total += float(match.group(1)) if match else 0.0
    return total


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
    listed = threading.Event()
    endpoint = load_endpoint(str(box.kubeconfig))

    async def run() -> None:
        async with endpoint.client() as client:
            reflector = Reflector[Pod](
                client=client,
                path="/api/v1/namespaces/default/pods",
                decode=POD_DECODER.decode,
                store=clock,
                name=f"batch {label}",
                label_selector=f"batch={label}",
            )
            task = asyncio.create_task(reflector.run())
            await reflector.synced.wait()
            listed.set()
            while not clock.done.is_set() and not task.done():
                await asyncio.sleep(0.05)
            task.cancel()

    threading.Thread(target=asyncio.run, args=(run(),), daemon=True).start()
    return listed


@dataclass
class Batch:
    kind: str
    rate: float
    wall: float
    cpu: dict[str, float]
    extender_seconds: float = 0.0
    window: float = 0.0
    """Wall time over which ``cpu`` was measured (scheduler start to last binding)."""


@dataclass
class Bench:
    box: Sandbox
    pods: int
    extenders: dict[str, ExtenderSpec | None]
    batches: list[Batch] = field(default_factory=list)

    @property
    def loadsched_url(self) -> str:
        spec = self.extenders["loadsched"]
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
            "extender": used.get(extender, 0.0) if extender else 0.0,
            "bench": own.user + own.system,
        }

    def run(self, kind: str, index: int | str, warmup: int = 0) -> Batch:
        """One batch; a warm-up one (``warmup`` pods) is not counted."""
        box, count = self.box, warmup or self.pods
        label = f"{kind}-{index}"
        scheduler_name = "default-scheduler" if kind == "plain" else label
        box.create_pods(
            pod_body(
                f"{label}-{i}", scheduler_name=scheduler_name, cpu="10m", labels={"batch": label}
            )
            for i in range(count)
        )
        clock = BindingClock(count)
        if not watch_bindings(box, label, clock).wait(60):
            raise SystemExit(f"{label}: the watch did not list the batch's pods")
        process = {"minimal": "minimal-extender", "loadsched": "extender"}.get(kind)
        spent = extender_seconds(self.loadsched_url) if kind == "loadsched" else 0.0
        before = self.cpu_seconds(label, process)
        window = time.monotonic()
        box.start_scheduler(label, scheduler_name=scheduler_name, extender=self.extenders[kind])
        if not clock.done.wait(600):
            raise SystemExit(f"{label}: only {len(clock.bound)} of {count} pods bound")
        after = self.cpu_seconds(label, process)
        window = time.monotonic() - window
        if kind == "loadsched":
            spent = extender_seconds(self.loadsched_url) - spent
        box.stop_scheduler(label)
        box.delete_pods(f"batch={label}")
        first, last = min(clock.bound.values()), max(clock.bound.values())
        batch = Batch(
            kind,
            (count - 1) / (last - first),
            last - first,
            {name: after[name] - before[name] for name in after},
            spent,
            window,
        )
        if not warmup:
            self.batches.append(batch)
        print(f"  {label:<12} {batch.rate:7.1f} pods/s", file=sys.stderr, flush=True)
        return batch


def start_minimal_extender(box: Sandbox) -> str:
    binary = ensure_minimal_extender()
    port = free_port()
    box.supervisor.start("minimal-extender", [str(binary), f"127.0.0.1:{port}"])
    url = f"http://127.0.0.1:{port}"
    wait_for(
        lambda: http_ok(f"{url}/readyz"),
        timeout=30,
        what="minimal extender /readyz",
        guard=box.supervisor,
    )
    return url


def report(bench: Bench, rounds: int, nodes_count: int) -> bool:
    """Print the results; True when the target is met."""
    by_kind = {kind: [b for b in bench.batches if b.kind == kind] for kind in KINDS}
    rates = {kind: [b.rate for b in batches] for kind, batches in by_kind.items()}
    ratio: dict[str, float] = {}
    for kind in ("minimal", "loadsched"):
        ratio[kind] = statistics.median(
            r / p for r, p in zip(rates[kind], rates["plain"], strict=True)
        )
    of_minimal = statistics.median(
        r / m for r, m in zip(rates["loadsched"], rates["minimal"], strict=True)
    )
    pods = bench.pods

    def mean_ms(kind: str, name: str) -> float:
        return statistics.mean(b.cpu[name] for b in by_kind[kind]) * 1000 / pods

    print(
        f"scheduling throughput: {nodes_count} nodes, {pods} pods per batch, {rounds} round(s), "
        f"names-only extenders, cpus={os.cpu_count()}"
    )
    print(f"  {'':<28}{'pods/s (each round)':<26}{'ratio to plain (median)':>24}")
    for kind, title in (
        ("plain", "plain kube-scheduler"),
        ("minimal", "+ minimal extender"),
        ("loadsched", "+ loadsched extender"),
    ):
        cells = " ".join(f"{r:6.1f}" for r in rates[kind])
        shown = "" if kind == "plain" else f"{ratio[kind]:8.2f}"
        print(f"  {title:<28}{cells:<26}{shown:>24}")
    met = ratio["loadsched"] >= TARGET_RATIO
    print(
        f"  loadsched / plain {ratio['loadsched']:.2f} (target ≥ {TARGET_RATIO}: "
        f"{'met' if met else 'MISSED'}); loadsched / minimal extender {of_minimal:.2f}"
    )
    loadsched = by_kind["loadsched"]
    spent = statistics.mean(b.extender_seconds for b in loadsched)
    wall = statistics.mean(b.wall for b in loadsched)
    print(
        f"  loadsched's own time per pod {1000 * spent / pods:.2f} ms (filter + prioritize, "
        f"its metrics): {100 * spent / wall:.1f} % of the batch's {wall:.1f} s"
    )
    print("  CPU per pod, ms (user + system over the batch; mean of rounds)")
    print(f"    {'process':<26}" + "".join(f"{kind:>11}" for kind in KINDS))
    for name in (*PROCESSES, "bench"):
        label = "bench's watch" if name == "bench" else name
        print(f"    {label:<26}" + "".join(f"{mean_ms(kind, name):11.2f}" for kind in KINDS))
    totals = [sum(mean_ms(kind, n) for n in (*PROCESSES, "bench")) for kind in KINDS]
    print(f"    {'total':<26}" + "".join(f"{t:11.2f}" for t in totals))
    busy = [
        statistics.mean(sum(b.cpu.values()) / b.window for b in by_kind[kind]) for kind in KINDS
    ]
    print(f"    {'cores busy (CPU / wall)':<26}" + "".join(f"{c:11.2f}" for c in busy))
    return met


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=300, help="pods per uncounted first batch")
    options = parser.parse_args()
    with Sandbox() as box:
        print(f"creating {options.nodes} nodes", file=sys.stderr)
        box.create_nodes(nodes(options.nodes), workers=16)
        loadsched_url = box.start_extender(args=["--log-level", "warning"])
        minimal_url = start_minimal_extender(box)
        bench = Bench(
            box,
            options.pods,
            {
                "plain": None,
                "minimal": ExtenderSpec(minimal_url, preempt=False),
                "loadsched": ExtenderSpec(loadsched_url),
            },
        )
        for kind in KINDS:  # warm-up, not counted: the first batches after start-up run slow
            bench.run(kind, "warm-up", options.warmup)
        for index in range(options.rounds):
            for kind in KINDS:
                bench.run(kind, index)
    met = report(bench, options.rounds, options.nodes)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
