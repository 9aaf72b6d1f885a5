"""Faults on the real control plane while work flows, and what they cost: one table row per
fault with the work in flight, the outcome, what was lost (must be 0) and the seconds until
the work was whole again.

- kube-apiserver restarted (SIGTERM, started again on the same port and etcd), etcd
  restarted, and etcd compacted to its head under a kube-apiserver restart (every watch then
  resumes from a compacted revision: 410 Gone), each during a burst of 200 pods, annotator
  rounds, and 50 duplicate POSTs of one key to /v1/jobs: pods bound (each once), Jobs for the
  key, LISTs of watched resources after recovery and in a quiet window after that;
- the extender SIGKILLed during a burst to an ignorable and a non-ignorable kube-scheduler;
- the annotator leader SIGKILLed mid-round (its writes slowed by a relay so the round is
  still being written): lease takeover, nodes on different rounds, nodes split between rounds;
- two extender replicas behind one round-robin balancer, a burst into a namespace near its
  ElasticQuota max: the peak of bound CPU (a watch on the API server) against max; with the
  replicas' watches on time and 0.2 s behind.

Lost: pods not bound, Jobs other than one, 5xx answers but 503, pods over the quota's max.
Prometheus faults are in bench/prometheus_faults.py.

    .venv/bin/python -m bench.faults [--only apiserver,etcd,compaction,extender,annotator,quota]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from bench.results import Figure, measured, record
from bench.targets import target
from sandbox.cluster import Sandbox
from sandbox.faults import FaultRow, quota_two_replicas
from sandbox.faults_cluster import (
    Flow,
    run_annotator_kill,
    run_control_plane,
    run_extender_kill,
)

FAULTS = ("apiserver", "etcd", "compaction", "extender", "annotator", "quota")


LOST = target("faults", "lost")


def say(line: str) -> None:
    print(f"  {line}", file=sys.stderr, flush=True)


def rows_for(flow: Flow, fault: str) -> list[FaultRow]:
    if fault in ("apiserver", "etcd", "compaction"):
        return [run_control_plane(flow, fault, say=say)]
    if fault == "extender":
        return run_extender_kill(flow, pods=100, say=say)
    if fault == "annotator":
        return [run_annotator_kill(flow, say=say)]
    flow.clear()  # the flow's nodes have room for every quota pod
    return [quota_two_replicas(flow.sandbox, watch_lag=lag, say=say) for lag in (0.0, 0.2)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(FAULTS), help="comma-separated faults")
    args = parser.parse_args()
    chosen = [f for f in args.only.split(",") if f]
    unknown = sorted(set(chosen) - set(FAULTS))
    if unknown:
        parser.error(f"--only: unknown fault(s) {', '.join(unknown)}; known: {', '.join(FAULTS)}")
    rows: list[FaultRow] = []
    with Sandbox(say=say) as box, tempfile.TemporaryDirectory() as workdir:
        flow = Flow(box, Path(workdir)).start()
        for fault in chosen:
            say(f"fault: {fault}")
            rows += rows_for(flow, fault)
    print()
    header = f"{'fault':<58} {'work in flight':<44} {'lost':>4} {'recover':>8}  outcome"
    print(header)
    print("-" * len(header))
    for row in rows:
        print(
            f"{row.fault:<58} {row.work:<44} {row.lost:>4} {row.recover_seconds:>7.1f}s  "
            f"{row.outcome}"
        )
    print()
    for row in rows:
        if row.target:
            print(f"{row.fault}: {row.target}: {'met' if row.met else 'MISSED'}")
    lost = sum(row.lost for row in rows)
    missed = sum(1 for row in rows if not row.met)
    print(f"lost in all: {lost} (target 0); targets missed: {missed}")
    record("faults", figures(rows))
    return 0 if lost == 0 and missed == 0 else 1


def figures(rows: list[FaultRow]) -> list[Figure]:
    """Each fault's work lost (judged by ``faults.lost``) and its recovery time, judged by the
    row's own target when it has one (as printed above)."""
    kept: list[Figure] = []
    for row in rows:
        kept.append(measured(LOST, row.lost, name=f"{row.fault}: work lost ({row.work})"))
        kept.append(
            Figure(
                f"{row.fault}: recovery",
                row.recover_seconds,
                "s",
                bound=row.target or None,
                verdict=("met" if row.met else "MISSED") if row.target else None,
            )
        )
    return kept


if __name__ == "__main__":
    sys.exit(main())
