"""How long before its annotation's timestamp a metric's window really ends: the delay that
``syncPolicy[].delay`` tells estimation.

A node's usage reaches its annotation through the scrape, the instantaneous-usage rule
(``irate`` over the last two scrapes), the averaging rule, and the annotator's query, each on
its own interval; the annotation's timestamp is when the annotator wrote it. This bench runs the
real pipeline (synthetic exporter, Prometheus with a rules file, the annotator, the API server),
steps each node's CPU from low to high and back at known times, staggered, and reads every
value written on the ramps: an average over ``window`` that reads ``v`` on a step from ``a`` to
``b`` at ``t`` ends at ``t + window × (v - a) / (b - a)``, and its delay is the timestamp minus
that. Annotation timestamps are whole seconds, cut: each is read as half a second later; a
step's time is the middle of the call that set it.

With the chart's rules it reads crane's hourly maximum too (``cpu_usage_max_avg_1h``, over the
5-minute averages, evaluated every 5 minutes): on a step up it follows the average, later.

    .venv/bin/python -m bench.sample_delay                 # the quality bench's rules (1m, 5 s)
    .venv/bin/python -m bench.sample_delay --rules chart   # the chart's, at their own intervals
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

from bench.quality_strategies import RULES as QUALITY_RULES
from sandbox.cluster import Sandbox
from sandbox.metrics_stack import MetricsStack
from sandbox.processes import wait_for
from sandbox.prometheus import RULES as CHART_RULES
from sandbox.specs import NodeSpec
from sandbox.workload import percentile
from shared.annotations import Sample, decode

LOW, HIGH = 0.2, 0.8
EDGE = 0.02
"""Values within this of either level are left out (the ramp's ends say nothing exact)."""
CUT = timedelta(seconds=0.5)
"""What a timestamp cut to whole seconds misses, on average."""

Reading = tuple[str, float, datetime]
"""(node, value, timestamp) as written."""


@dataclass(frozen=True)
class Pipeline:
    rules: Path
    metrics: tuple[str, ...]
    """The first is the average; any other follows it (a maximum over it)."""
    window: float
    """Seconds the average covers."""
    scrape: str
    rule_interval: str | None
    """Every group's interval, or ``None`` for the file's own."""
    period: str = "15s"
    """How often the annotator writes the metric (more often than crane's, for more samples;
    the delay does not depend on it)."""


PIPELINES = {
    "quality": Pipeline(QUALITY_RULES, ("cpu_usage_avg_1m",), 60.0, "5s", "5s"),
    "chart": Pipeline(
        CHART_RULES, ("cpu_usage_avg_5m", "cpu_usage_max_avg_1h"), 300.0, "15s", None
    ),
}


@dataclass(frozen=True)
class Step:
    node: str
    at: datetime
    before: float
    after: float


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def window_end(step: Step, value: float, window: float) -> datetime | None:
    """Where the window that reads ``value`` ends, if ``value`` is on the step's ramp."""
    span = step.after - step.before
    part = (value - step.before) / span
    if not EDGE / abs(span) < part < 1 - EDGE / abs(span):
        return None
    return step.at + timedelta(seconds=window * part)


def delays(steps: list[Step], readings: dict[Reading, None], window: float) -> list[float]:
    """Seconds from each ramp value's window end to its timestamp (read half a second on)."""
    out = []
    for node, value, stamp in readings:
        mine = [s for s in steps if s.node == node and s.at < stamp + CUT]
        if not mine:
            continue
        end = window_end(mine[-1], value, window)
        if end is not None:
            out.append((stamp + CUT - end).total_seconds())
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rules", choices=sorted(PIPELINES), default="quality")
    parser.add_argument("--nodes", type=int, default=8)
    options = parser.parse_args()
    pipeline = PIPELINES[options.rules]
    nodes = [NodeSpec(f"node-{i}", f"127.0.0.{i + 1}") for i in range(1, options.nodes + 1)]
    gap = pipeline.window / len(nodes)
    settle = 1.5 * pipeline.window  # the ramp, and room for the delay
    readings: dict[str, dict[Reading, None]] = {m: {} for m in pipeline.metrics}
    average = pipeline.metrics[0]
    steps: list[Step] = []
    with Sandbox(say=say) as box:
        box.create_nodes(nodes)
        stack = MetricsStack(box, nodes, loads={n.name: {"cpu": LOW, "mem": 0.3} for n in nodes})
        stack.prometheus.rules = pipeline.rules
        stack.prometheus.rule_interval = pipeline.rule_interval
        stack.start(scrape_interval=pipeline.scrape)
        wait_for(
            lambda: all(len(stack.prometheus.query(m)) == len(nodes) for m in pipeline.metrics),
            timeout=6 * pipeline.window,
            what=f"{', '.join(pipeline.metrics)} for every node",
            interval=2,
        )
        policy = box.workdir / "policy.yaml"
        policy.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "scheduler.policy.crane.io/v1alpha1",
                    "kind": "DynamicSchedulerPolicy",
                    "spec": {
                        "syncPolicy": [
                            {"name": m, "period": pipeline.period} for m in pipeline.metrics
                        ]
                    },
                }
            )
        )
        box.start_annotator(
            prometheus_url=stack.prometheus.url,
            args=["--policy", str(policy), "--no-leader-elect"],
        )

        def read() -> None:
            for node in box.core.list_node().items:
                metadata = node.metadata
                if metadata is None or not metadata.name:
                    continue
                for metric, seen in readings.items():
                    reading = decode((metadata.annotations or {}).get(metric))
                    if isinstance(reading, Sample):
                        seen[(metadata.name, reading.value, reading.timestamp)] = None

        def step_all(before: float, after: float) -> None:
            for node in nodes:
                asked = datetime.now(UTC)
                stack.set_loads({node.name: {"cpu": after, "mem": 0.3}})
                steps.append(
                    Step(node.name, asked + (datetime.now(UTC) - asked) / 2, before, after)
                )
                say(f"{node.name}: CPU {before:.0%} → {after:.0%}")
                until = time.monotonic() + gap
                while time.monotonic() < until:
                    read()
                    time.sleep(0.5)

        def hold(seconds: float) -> None:
            until = time.monotonic() + seconds
            while time.monotonic() < until:
                read()
                time.sleep(0.5)

        hold(pipeline.window / 2)
        step_all(LOW, HIGH)
        hold(settle)
        step_all(HIGH, LOW)
        hold(settle)
        say("shutting down")
    print(
        f"sample delay: rules {pipeline.rules.name} "
        f"({'intervals as in the file' if pipeline.rule_interval is None else 'every ' + pipeline.rule_interval}), "
        f"scrape every {pipeline.scrape}, annotator every {pipeline.period}, "
        f"{len(nodes)} nodes stepped {LOW:.0%} ↔ {HIGH:.0%}"
    )
    measured = False
    for metric, seen in readings.items():
        found = delays(steps, seen, pipeline.window)
        if not found:
            print(f"{metric}: no value was written on a ramp")
            continue
        measured = True
        print(
            f"{metric}: {len(found)} values on the ramps; delay (timestamp - window end): "
            f"median {statistics.median(found):.1f} s, mean {statistics.fmean(found):.1f} s, "
            f"p10 {percentile(found, 10):.1f} s, p90 {percentile(found, 90):.1f} s, "
            f"min {min(found):.1f} s, max {max(found):.1f} s"
            + (
                f" ({statistics.median(found) / pipeline.window:.0%} of the "
                f"{pipeline.window:.0f} s window)"
                if metric == average
                else f" (follows {average})"
            )
        )
    return 0 if measured else 1


if __name__ == "__main__":
    sys.exit(main())
