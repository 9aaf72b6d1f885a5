"""Extender CPU per pod, loadsched's against the no-op Go extender, with nothing else running:
the same client sends both the same filter + prioritize pairs, over HTTP, while node
annotations change at the production rate.

Each pair is what kube-scheduler sends for a pod in names-only mode: a filter call naming a
window of ``--window`` nodes, then a prioritize call naming the nodes the filter passed. The
windows are shaped as kube-scheduler's (v1.34, captured at 5,000 nodes and 50 %): each starts
where the last one started plus its size, and names the first nodes its parallel filter
finished, in the order they finished (:func:`scheduler_window`), so no two are alike: a few
nodes of the last chunks are left out and as many of the next taken in, and the chunks being
checked at once are interleaved. The API server is the fake one of
``bench/extender.py`` (10 KB nodes); CPU is each extender process's user + system time over its
blocks, which take turns (4 blocks each, after a warm-up), so the machine's other work falls on
both alike. ``bench/scheduling.py`` measures the same on the real control plane, where
kube-scheduler and the API server share the 2 cores.

    .venv/bin/python -m bench.extender_cpu [--window 500] [--pairs 2000]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import httpx

from bench.extender import (
    PRODUCTION_RATE,
    AnnotationWriter,
    add_extender_args,
    free_port,
    start_extender,
)
from bench.fake_apiserver import FakeNodeAPI
from sandbox.build import ensure_minimal_extender
from sandbox.loopback import http_ok
from sandbox.processes import wait_for
from shared.load_model import LoadRules
from shared.policy import default_policy
from tests import payloads

BLOCKS = 4
NODES = 5000


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


CHUNK = 70
"""Nodes per piece of kube-scheduler's parallel filter at 5,000 nodes: the smaller of the
square root of the node count and the node count over 16 workers, plus one."""
LANES = 2
"""Pieces checked at once: the workers that run at a time on this machine's 2 cores."""


def scheduler_window(
    names: list[str], start: int, size: int, rng: random.Random, *, chunk: int = CHUNK
) -> list[str]:
    """The ``size`` nodes kube-scheduler names for a pod, its filter starting at ``start``:
    pieces of ``chunk`` nodes from there, :data:`LANES` at a time, each lane taking the next
    piece when done with its own and each node taking a random time, the nodes named in the
    order they finish, until ``size`` have (all nodes pass kube-scheduler's own filters)."""
    count = len(names)
    pieces = (count + chunk - 1) // chunk
    taken = 0
    lanes: list[list[int]] = [[] for _ in range(LANES)]
    clocks = [0.0] * LANES
    out: list[str] = []
    while len(out) < min(size, count):
        lane = min(range(LANES), key=clocks.__getitem__)
        if not lanes[lane]:
            if taken == pieces:
                clocks[lane] = math.inf
                continue
            lanes[lane] = list(range(taken * chunk, min((taken + 1) * chunk, count)))[::-1]
            taken += 1
        clocks[lane] += rng.expovariate(1.0)
        out.append(names[(start + lanes[lane].pop()) % count])
    return out


def pairs(client: httpx.Client, names: list[str], count: int, window: int, seed: int) -> None:
    """``count`` filter + prioritize pairs, the window moving along ``names``."""
    rng = random.Random(seed)
    pod, start = payloads.pod(), 0
    for _ in range(count):
        asked = scheduler_window(names, start, window, rng)
        start = (start + window) % len(names)
        filtered = client.post("/filter", content=payloads.encode(payloads.names_args(asked, pod)))
        filtered.raise_for_status()
        passed = json.loads(filtered.content)["NodeNames"]
        scored = client.post(
            "/prioritize", content=payloads.encode(payloads.names_args(passed, pod))
        )
        scored.raise_for_status()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--window", type=int, default=500, help="nodes named per filter call")
    parser.add_argument("--pairs", type=int, default=2000, help="pairs measured per extender")
    add_extender_args(parser)
    options = parser.parse_args()
    if not 1 <= options.window <= NODES or options.pairs < BLOCKS:
        parser.error(f"--window must be 1..{NODES} and --pairs at least {BLOCKS}")
    rules = LoadRules.from_policy(default_policy())
    nodes = payloads.cluster(rules, NODES, datetime.now(UTC))
    names = [node["metadata"]["name"] for node in nodes]
    with tempfile.TemporaryDirectory() as tmp, FakeNodeAPI(nodes) as api:
        loadsched, url = start_extender(
            api.kubeconfig(Path(tmp) / "kubeconfig"), tuple(options.extender_arg)
        )
        port = free_port()
        minimal = subprocess.Popen([str(ensure_minimal_extender()), f"127.0.0.1:{port}"])
        try:
            ready = f"http://127.0.0.1:{port}/readyz"
            wait_for(lambda: http_ok(ready), timeout=30, what="minimal extender /readyz")
            targets = {
                "loadsched": (url, loadsched.pid),
                "minimal": (f"http://127.0.0.1:{port}", minimal.pid),
            }
            used = dict.fromkeys(targets, 0.0)
            per_block = options.pairs // BLOCKS
            with AnnotationWriter(api, rules, PRODUCTION_RATE) as writer:
                for block in range(BLOCKS):
                    for kind, (base, pid) in targets.items():
                        with httpx.Client(base_url=base, timeout=60) as client:
                            pairs(client, names, 50, options.window, block)  # warm-up
                            before = cpu_seconds(pid)
                            pairs(client, names, per_block, options.window, block)
                            used[kind] += cpu_seconds(pid) - before
        finally:
            loadsched.terminate()
            minimal.terminate()
            loadsched.wait(10)
            minimal.wait(10)
    count = per_block * BLOCKS
    print(
        f"extender CPU per pod (filter + prioritize over HTTP), {NODES} nodes, windows of "
        f"{options.window} nodes, {count} pods each, annotation churn "
        f"{writer.achieved:.1f} nodes/s, cpus={os.cpu_count()}, loadsched's extender flags: "
        f"{' '.join(options.extender_arg) or 'none'}"
    )
    for kind, seconds in used.items():
        print(f"  {kind:<10} {seconds / count * 1000:6.3f} ms")
    print(f"  loadsched / minimal: {used['loadsched'] / used['minimal']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
