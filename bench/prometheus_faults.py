"""Prometheus faults on the sandbox: the annotator runs against the real Prometheus behind
:mod:`sandbox.prometheus_faults`, and each fault is held for four of its rounds, then healed.
Prints one row per fault: the queries answered under it, what happened to the annotations
(nothing fake written: unchanged, or ``0.00000`` where the annotation contract says NaN and
negative values are written so), whether the values left in place age out (stale one period
+ 5 minutes after they were measured), and the time from healthy to fresh real values on
every node, which must come from the first round that started after Prometheus was healthy
(within one period; a round under the fault may still have been under way).

Two metrics on a 1 s period, 8 nodes, the annotator's query timeout 1 s, the slow fault
answering after 2.5 s (the same setup as ``tests/e2e/test_prometheus_faults.py``). Exits 1
when a row fails.

    .venv/bin/python -m bench.prometheus_faults [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from bench.results import Figure, record
from sandbox.cluster import Sandbox
from sandbox.metrics_stack import MetricsStack
from sandbox.processes import wait_for
from sandbox.prometheus_faults import PrometheusFaults
from tests.e2e.test_prometheus_faults import (
    FAULTS,
    LOADS,
    NODES,
    SLOW_SECONDS,
    WRITES_ZERO,
    Outcome,
    exercise,
    fresh_since,
    metric_values,
    start_annotator,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="runs of every fault")
    args = parser.parse_args()
    results: dict[str, list[Outcome]] = {str(f): [] for f in FAULTS}
    with tempfile.TemporaryDirectory() as tmp, Sandbox(say=print) as box:
        box.create_nodes(NODES)
        stack = MetricsStack(box, NODES, loads=LOADS).start()
        try:
            with PrometheusFaults(stack.prometheus.url, slow_seconds=SLOW_SECONDS) as proxy:
                url = start_annotator(box, proxy, Path(tmp))
                begun = datetime.now(UTC)
                wait_for(
                    lambda: fresh_since(metric_values(box, NODES), begun),
                    timeout=120,
                    what="real values on every node",
                    interval=1,
                )
                for _ in range(args.repeat):
                    for fault in FAULTS:
                        outcome = exercise(box, NODES, url, proxy, fault)
                        results[str(fault)].append(outcome)
                        print(f"  {fault}: {outcome}")
        finally:
            stack.stop()
    print()
    print(
        f"{'fault':<13} {'queries':>7}  {'annotations while faulty':<34} {'ages out':<9} "
        f"{'recovery p50 / max':>20}  ok"
    )
    failed = 0
    kept: list[Figure] = []
    for fault in FAULTS:
        runs = results[str(fault)]
        queries = sum(o.queries for o in runs)
        if fault in WRITES_ZERO:
            what = f"0.00000 (contract) {sum(o.zeros for o in runs)}/{sum(o.values for o in runs)}"
            ages = "-"
        else:
            changed = sum(o.changed + o.zeros for o in runs)
            what = "unchanged" if changed == 0 else f"{changed} value(s) written"
            ages = "yes" if all(o.stale_later for o in runs) else "NO"
        times = [o.recovery for o in runs if o.recovery is not None]
        recovery = (
            f"{statistics.median(times):.2f} / {max(times):.2f} s"
            if len(times) == len(runs)
            else f"{len(runs) - len(times)} run(s) not fresh a round after"
        )
        ok = all(o.nothing_fake and o.recovery is not None for o in runs)
        failed += not ok
        kept.append(
            Figure(
                f"{fault}: recovery to fresh values, worst of {len(runs)} run(s)"
                + ("" if ok else " (fake values written or never fresh)"),
                max(times) if len(times) == len(runs) else float("nan"),
                "s",
                bound="nothing fake, fresh a round after",
                verdict="met" if ok else "MISSED",
            )
        )
        print(
            f"{fault!s:<13} {queries:>7}  {what:<34} {ages:<9} {recovery:>20}  "
            f"{'yes' if ok else 'NO'}"
        )
    print(
        "\nrecovery: every node fresh by the end of the first round that started after "
        "Prometheus was healthy (rounds every 1 s, query timeout 1 s); "
        f"faults failing: {failed} of {len(FAULTS)}"
    )
    record("prometheus_faults", kept)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
