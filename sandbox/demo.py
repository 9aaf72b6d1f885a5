"""The demo: a local cluster where pods visibly avoid loaded nodes.

It starts the sandbox (8 fake nodes with varied real-looking load from the synthetic exporter),
Prometheus with the recording rules, loadsched's annotator and extender, the plain
kube-scheduler and one with the extender. It schedules the same batch of pods through each (one
batch after the other, on the same node load), prints the placements side by side, writes the
same as an HTML page (out/demo.html) and the chart alone (out/demo.svg), and shuts everything
down. ``make demo-picture`` runs it and copies the chart to docs/assets/demo.svg, the README's
picture.

    make demo        # or: .venv/bin/python -m sandbox.demo [--pods 24] [--out out]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from sandbox.cluster import Sandbox
from sandbox.demo_report import Row, render_html, render_svg, render_table
from sandbox.metrics_stack import MetricsStack
from sandbox.processes import wait_for
from sandbox.specs import ExtenderSpec, NodeSpec, pod_body
from shared.annotations import Sample, decode
from shared.policy import default_policy

NODES = [NodeSpec(f"node-{i}", f"127.0.0.{i + 1}") for i in range(1, 9)]
# cpu, memory: two nodes are over the default 65 % limits, two more are close.
LOADS = {
    "node-1": (0.18, 0.30),
    "node-2": (0.86, 0.40),
    "node-3": (0.35, 0.25),
    "node-4": (0.55, 0.82),
    "node-5": (0.25, 0.45),
    "node-6": (0.62, 0.35),
    "node-7": (0.44, 0.55),
    "node-8": (0.30, 0.20),
}
METRICS = [s.name for s in default_policy().spec.sync_policy]


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def annotated_load(box: Sandbox, node: str) -> dict[str, float]:
    metadata = box.core.read_node(node).metadata
    found = (metadata.annotations if metadata else None) or {}
    out = {}
    for key in METRICS:
        reading = decode(found.get(key))
        if isinstance(reading, Sample):
            out[key] = reading.value
    return out


def run_batch(box: Sandbox, scheduler: str, label: str, count: int, pace: float) -> dict[str, int]:
    for i in range(count):
        box.create_pods(
            [
                pod_body(
                    f"{label}-{i}", scheduler_name=scheduler, cpu="250m", labels={"batch": label}
                )
            ]
        )
        time.sleep(pace)
    placed = box.wait_bound(f"batch={label}", count, timeout=120)
    box.delete_pods(f"batch={label}")
    per_node = dict.fromkeys((n.name for n in NODES), 0)
    for node in placed.values():
        per_node[node] += 1
    return per_node


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pods", type=int, default=24, help="pods per batch")
    parser.add_argument("--pace", type=float, default=0.25, help="seconds between pod creations")
    parser.add_argument("--out", default="out", help="folder for demo.html and demo.svg")
    options = parser.parse_args()
    started = time.monotonic()
    with Sandbox(say=say) as box:
        box.create_nodes(NODES)
        say("starting the synthetic node exporter and Prometheus (recording rules every 5 s)")
        loads = {name: {"cpu": cpu, "mem": mem} for name, (cpu, mem) in LOADS.items()}
        stack = MetricsStack(box, NODES, loads=loads).start()
        wait_for(
            lambda: (
                len(stack.prometheus.query("cpu_usage_avg_5m")) == len(NODES)
                and len(stack.prometheus.query("mem_usage_max_avg_1d")) == len(NODES)
            ),
            timeout=90,
            what="recording rules for every node",
            interval=1,
        )
        say("starting loadsched's annotator (crane's default policy) and extender")
        box.start_annotator(
            prometheus_url=stack.prometheus.url, args=["--lease-namespace", "default"]
        )
        wait_for(
            lambda: all(len(annotated_load(box, n.name)) == len(METRICS) for n in NODES),
            timeout=60,
            what="load annotations on every node",
            interval=1,
        )
        url = box.start_extender(args=["--log-level", "warning"])
        say("starting kube-scheduler twice: plain, and with the loadsched extender")
        box.start_scheduler("plain")
        box.start_scheduler("loadsched", scheduler_name="loadsched", extender=ExtenderSpec(url))
        say(
            f"scheduling {options.pods} pods through the plain kube-scheduler (about {options.pods * options.pace + 3:.0f}s)"
        )
        plain = run_batch(box, "default-scheduler", "plain", options.pods, options.pace)
        say(f"scheduling the same {options.pods} pods through kube-scheduler + loadsched")
        loadsched = run_batch(box, "loadsched", "loadsched", options.pods, options.pace)
        policy = default_policy()
        limits = {p.name: p.max_limit_percent for p in policy.spec.predicate}
        rows = []
        for node in NODES:
            load = annotated_load(box, node.name)
            over = any(load.get(metric, 0) > limit for metric, limit in limits.items() if limit)
            rows.append(
                Row(
                    node.name,
                    load["cpu_usage_avg_5m"],
                    load["mem_usage_avg_5m"],
                    over,
                    plain[node.name],
                    loadsched[node.name],
                )
            )
        say("shutting down")
    print(render_table(rows))
    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "demo.html").write_text(render_html(rows))
    (out / "demo.svg").write_text(render_svg(rows))
    print(f"\nchart: {out / 'demo.html'}   (whole demo: {time.monotonic() - started:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
