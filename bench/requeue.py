"""Requeue: seconds from the change that makes loadsched admit a refused pod to that pod's
binding, for every cause, names-only and full-node side by side, on the real control plane
(sandbox: etcd, kube-apiserver, kube-scheduler v1.34.4 with loadsched's extender).

Each run refuses a fresh pod (every node overloaded, hot or stale; or its namespace's
ElasticQuota full), waits until kube-scheduler has marked it Unschedulable, makes one change
(see sandbox/requeue_story.py) and times change → bound. Every run counts, the first one on a
fresh extender included. Also printed: the extender's requeue annotation writes per run.

Target: p99 ≤ 5 s for every cause in names-only mode, over at least 20 runs each.
kube-scheduler's own flush of unschedulable pods, the only retry without a requeue for the
causes it sees no event for, comes after 300 s.

    .venv/bin/python -m bench.requeue [--runs 20] [--full-runs 10] [--lag 0] [--causes a,b]

``--lag S`` puts the extender's API connection behind a relay that delays what it receives
by S seconds (its watches then always trail kube-scheduler's, as in tests/e2e/test_requeue.py).
"""

from __future__ import annotations

import argparse
import time

from bench.results import Figure, measured, record
from bench.targets import target
from sandbox.cluster import Sandbox
from sandbox.requeue_story import CAUSES, RequeueRig, Run, percentile
from sandbox.specs import NodeSpec

P99 = target("requeue", "p99")
FIGURES: list[Figure] = []
NODES = [NodeSpec(f"node-{i}", f"127.0.0.{i + 1}") for i in range(1, 9)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="names-only runs per cause")
    parser.add_argument("--full-runs", type=int, default=10, help="full-node runs per cause")
    parser.add_argument("--lag", type=float, default=0.0, help="extender watch lag, seconds")
    parser.add_argument("--causes", default=",".join(CAUSES), help="comma-separated causes")
    args = parser.parse_args()
    causes = [c for c in args.causes.split(",") if c]
    runs: list[Run] = []
    started = time.monotonic()
    with Sandbox(say=print) as box:
        box.create_nodes(NODES)
        rig = RequeueRig(box, [n.name for n in NODES], lag=args.lag)
        with rig.started():
            for cause in causes:
                for mode, count in (("names-only", args.runs), ("full-node", args.full_runs)):
                    for _ in range(count):
                        run = rig.run(cause, mode)
                        runs.append(run)
                        print(
                            f"  {cause:20} {mode:10} {run.seconds:6.2f} s  writes {run.writes:.0f}"
                        )
    print()
    print(
        f"requeue: change → bound, seconds; 8 nodes, kube-scheduler v1.34.4; extender watch lag "
        f"{args.lag:g} s; {time.monotonic() - started:.0f} s in all"
    )
    header = (
        f"{'cause':20} {'mode':10} {'runs':>4} {'p50':>6} {'p99':>6} {'max':>6} {'writes/run':>10}"
    )
    print(header)
    print("-" * len(header))
    met = True
    for cause in causes:
        for mode in ("names-only", "full-node"):
            mine = [r for r in runs if r.cause == cause and r.mode == mode]
            if not mine:
                continue
            seconds = [r.seconds for r in mine]
            p99 = percentile(seconds, 99)
            writes = sum(r.writes for r in mine) / len(mine)
            flag = ""
            if mode == "names-only":
                FIGURES.append(measured(P99, p99, name=f"{cause}: cause to bound, p99"))
                ok = not P99.counts(p99) and len(mine) >= 20
                met &= ok
                flag = "" if ok else "  <- target missed" if len(mine) >= 20 else "  (< 20 runs)"
            print(
                f"{cause:20} {mode:10} {len(mine):4d} {percentile(seconds, 50):6.2f} "
                f"{p99:6.2f} {max(seconds):6.2f} {writes:10.2f}{flag}"
            )
    print()
    print(
        f"target: names-only p99 {P99.sign} {P99.bound:g} s for every cause over ≥ 20 runs: "
        f"{'met' if met else 'not met'}"
    )
    record("requeue", FIGURES)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
