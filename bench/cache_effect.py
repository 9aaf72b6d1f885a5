"""loadsched's names-only decision for one pod (filter, then prioritize of the nodes passed),
in this process, with the CPU's caches warm and with them emptied before each pod: how much of
the extender's cost per pod is waiting on memory rather than computing.

The node view and the windows are those of ``bench/extender_cpu.py`` (5,000 nodes, windows
shaped as kube-scheduler's, so every answer is computed). Each call's body is decoded and its
answer encoded, as when served; preparing the prioritize answer is part of the filter call, as
the served extender does it right after writing the filter answer. A cold pod first writes
``--evict-mb`` of other memory, as kube-scheduler, the API server and the extender's own
other work do between two of its requests on a busy machine; warm and cold pods take turns.

    .venv/bin/python -m bench.cache_effect [--window 2500] [--pods 400] [--evict-mb 64]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from datetime import UTC, datetime

from bench.extender_cpu import NODES, scheduler_window
from extender.scheduling.metrics import ExtenderMetrics
from extender.scheduling.node_cache import NodeLoadCache
from extender.scheduling.verbs import LoadAwareExtender
from extender.scheduling.wire import ARGS_DECODER, ENCODER, NODE_DECODER
from shared.load_model import LoadRules
from shared.policy import default_policy
from tests import payloads


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--window", type=int, default=2500, help="nodes named per filter call")
    parser.add_argument("--pods", type=int, default=400, help="pods measured, warm and cold")
    parser.add_argument("--evict-mb", type=int, default=64, help="memory written before a cold pod")
    options = parser.parse_args()
    if not 1 <= options.window <= NODES or options.pods < 2 or options.evict_mb < 1:
        parser.error(f"--window must be 1..{NODES}, --pods at least 2, --evict-mb at least 1")
    rules = LoadRules.from_policy(default_policy())
    nodes = payloads.cluster(rules, NODES, datetime.now(UTC))
    names = [str(node["metadata"]["name"]) for node in nodes]
    cache = NodeLoadCache(rules)
    cache.replace([NODE_DECODER.decode(json.dumps(node)) for node in nodes])
    decide = LoadAwareExtender(
        rules=rules, clock=lambda: datetime.now(UTC), metrics=ExtenderMetrics(), node_cache=cache
    )
    pod = payloads.pod()
    rng, start = random.Random(1), 0
    other = bytearray(options.evict_mb * 2**20)
    times: dict[str, list[float]] = {"warm": [], "cold": []}
    for i in range(options.pods + 20):
        body = payloads.encode(
            payloads.names_args(scheduler_window(names, start, options.window, rng), pod)
        )
        start = (start + options.window) % NODES
        kind = "cold" if i % 2 else "warm"
        if kind == "cold":
            other[::64] = bytes(len(other) // 64)  # one write per cache line
        began = time.perf_counter()
        args = ARGS_DECODER.decode(body)
        assert args.Pod is not None
        answer = ENCODER.encode(decide.filter(args.Pod, args))
        spent = time.perf_counter() - began
        passed = json.loads(answer)["NodeNames"]
        body = payloads.encode(payloads.names_args(passed, pod))
        began = time.perf_counter()
        args = ARGS_DECODER.decode(body)
        assert args.Pod is not None
        ENCODER.encode(decide.prioritize(args.Pod, args))
        spent += time.perf_counter() - began
        if i >= 20:  # after a warm-up
            times[kind].append(spent * 1000)
    warm, cold = (statistics.median(times[k]) for k in ("warm", "cold"))
    print(
        f"names-only decision per pod in-process (filter + prioritize, decode and encode "
        f"included), {NODES} nodes, windows of {options.window} nodes shaped as "
        f"kube-scheduler's, {len(times['warm'])} pods each way, median ms"
    )
    print(f"  caches warm                         {warm:7.3f}")
    print(f"  caches emptied ({options.evict_mb} MB written) {cold:7.3f}")
    print(f"  cold / warm: {cold / warm:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
