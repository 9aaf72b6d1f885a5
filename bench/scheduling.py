"""Scheduling throughput on the real control plane: the plain kube-scheduler against the same
kube-scheduler with loadsched's extender (names-only mode), one batch after the other, on 1,000
fake nodes with load annotations.

Each batch is created while its scheduler is stopped; the scheduler is then started and the
bench watches the bindings: pods/s = (pods - 1) / (last binding - first binding). The extender's
share of scheduling time comes from its own metrics (filter + prioritize seconds).

    .venv/bin/python bench/scheduling.py [--nodes 1000] [--pods 2000]
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import threading
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kubernetes import watch  # noqa: E402

from sandbox.cluster import ExtenderSpec, NodeSpec, Sandbox, pod_body  # noqa: E402
from shared.annotations import encode_metric  # noqa: E402
from shared.load_model import LoadRules  # noqa: E402
from shared.policy import default_policy  # noqa: E402

TARGET_RATIO = 0.9


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
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as response:  # noqa: S310 - loopback
        text = response.read().decode()
    total = 0.0
    for verb in ("filter", "prioritize"):
        match = re.search(
            rf'loadsched_extender_request_duration_seconds_sum{{verb="{verb}"}} (\S+)', text
        )
        total += float(match.group(1)) if match else 0.0
    return total


def run_batch(
    box: Sandbox, label: str, scheduler_name: str, count: int, start: callable
) -> tuple[float, float]:
    """Create ``count`` pending pods, start their scheduler, time the bindings."""
    bound: dict[str, float] = {}
    done = threading.Event()
    ready = threading.Event()

    def watch_bindings() -> None:
        w = watch.Watch()
        ready.set()
        for event in w.stream(
            box.core.list_namespaced_pod,
            "default",
            label_selector=f"batch={label}",
            timeout_seconds=600,
        ):
            pod = event["object"]
            if pod.spec.node_name and pod.metadata.name not in bound:
                bound[pod.metadata.name] = time.monotonic()
                if len(bound) >= count:
                    w.stop()
        done.set()

    box.create_pods(
        pod_body(f"{label}-{i}", scheduler_name=scheduler_name, cpu="10m", labels={"batch": label})
        for i in range(count)
    )
    thread = threading.Thread(target=watch_bindings, daemon=True)
    thread.start()
    ready.wait()
    start()
    if not done.wait(600):
        raise SystemExit(f"{label}: only {len(bound)} of {count} pods bound")
    first, last = min(bound.values()), max(bound.values())
    return (count - 1) / (last - first), last - first


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=2000)
    options = parser.parse_args()
    with Sandbox() as box:
        print(f"creating {options.nodes} nodes", file=sys.stderr)
        box.create_nodes(nodes(options.nodes), workers=16)
        url = box.start_extender(args=["--log-level", "warning"])
        plain_rate, _ = run_batch(
            box, "plain", "default-scheduler", options.pods, lambda: box.start_scheduler("plain")
        )
        box.stop_scheduler("plain")
        before = extender_seconds(url)
        ext_rate, ext_wall = run_batch(
            box,
            "loadsched",
            "loadsched",
            options.pods,
            lambda: box.start_scheduler(
                "loadsched", scheduler_name="loadsched", extender=ExtenderSpec(url)
            ),
        )
        spent = extender_seconds(url) - before
    ratio = ext_rate / plain_rate
    print(
        f"scheduling throughput, {options.nodes} nodes, {options.pods} pods per batch (names-only extender)"
    )
    print(f"  plain kube-scheduler        {plain_rate:8.1f} pods/s")
    print(f"  with loadsched extender     {ext_rate:8.1f} pods/s")
    print(f"  ratio                       {ratio:8.2f}   (target ≥ {TARGET_RATIO})")
    print(
        f"  extender time per pod       {1000 * spent / options.pods:8.2f} ms (filter + prioritize, its own metrics)"
    )
    print(
        f"  extender share of the batch {100 * spent / ext_wall:8.1f} %  of {ext_wall:.1f}s wall time"
    )
    if ratio < TARGET_RATIO:
        print("TARGET MISSED")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
