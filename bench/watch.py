"""Watch CPU per event on the real API server (TLS): the extender's node watch read through
httpx and read straight off its connection (:mod:`shared.kube.streaming`), side by side.

Both are the extender's own node watch (a :class:`~shared.kube.watching.Reflector` feeding a
:class:`~extender.scheduling.node_cache.NodeLoadCache`), one client built as the extender
builds it and one given httpx's own transport. They take turns, ``--rounds`` times each: the
watch is started and synced, then writer threads patch ``--events`` nodes' load annotations
through the API server and the watch's CPU is counted until it has applied every one. CPU is
this process's main thread (the event loop: reading, TLS, decoding, the store), not the
writers'. Each kind's figure is its median over rounds; the ratio is direct / httpx.

    .venv/bin/python -m bench.watch [--nodes 1000] [--events 3000] [--rounds 4]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import httpx
import uvloop

from bench.lease_option import add_lease_option, renewals
from extender.scheduling.node_cache import NodeLoadCache, decode_node
from sandbox.cluster import NodeSpec, Sandbox
from shared.annotations import encode_metric
from shared.kube import direct
from shared.kube.config import KubeEndpoint, load_endpoint
from shared.kube.paths import NODES
from shared.kube.watching import Reflector
from shared.load_model import LoadRules
from shared.nodes import Node
from shared.policy import default_policy

KINDS = ("httpx", "direct")


class CountingCache(NodeLoadCache):
    """The extender's node store, counting the events applied."""

    applied = 0

    def apply(self, event: str, item: Node) -> None:
        super().apply(event, item)
        self.applied += 1


def client_for(endpoint: KubeEndpoint, kind: str) -> httpx.AsyncClient:
    # the same client both ways; without direct, every request, the watch too, through httpx
    return endpoint.client(direct=kind == "direct")


def patch_nodes(box: Sandbox, names: list[str], keys: list[str], first: int) -> None:
    """Patch each of ``names`` in turn, each patch with a value of its own (numbered from
    ``first``), so that none leaves its node unchanged and every one is an event."""
    now = datetime.now(UTC)

    def patch(numbered: tuple[int, str]) -> None:
        value = encode_metric(0.1 + numbered[0] * 1e-5, now)
        box.annotate_node(numbered[1], dict.fromkeys(keys, value))

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(patch, enumerate(names, first)))


async def measure(
    box: Sandbox, endpoint: KubeEndpoint, kind: str, names: list[str], first: int
) -> float:
    """CPU seconds of this thread per event the watch applied."""
    rules = LoadRules.from_policy(default_policy())
    keys = [k for k in rules.keys if k != "node_hot_value"]
    cache = CountingCache(rules)
    async with client_for(endpoint, kind) as client:
        assert (direct.route(client) is not None) == (kind == "direct")
        reflector = Reflector[Node](
            client=client, path=NODES.path(), decode=decode_node, store=cache, name=kind
        )
        task = asyncio.create_task(reflector.run())
        try:
            await reflector.synced.wait()
            await asyncio.sleep(0.5)  # the watch is open
            writer = threading.Thread(target=patch_nodes, args=(box, names, keys, first))
            before = time.thread_time()
            writer.start()
            while cache.applied < len(names):
                await asyncio.sleep(0.01)
            used = time.thread_time() - before
            writer.join()
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    return used / cache.applied


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--events", type=int, default=3000, help="node patches per measurement")
    parser.add_argument("--rounds", type=int, default=4)
    add_lease_option(parser)
    options = parser.parse_args()
    if options.nodes < 1 or options.events < 1 or options.rounds < 1:
        parser.error("--nodes, --events and --rounds must be positive")
    rules = LoadRules.from_policy(default_policy())
    now = datetime.now(UTC)
    specs = [
        NodeSpec(
            f"node-{i:04d}",
            f"127.0.{(i // 250) + 10}.{(i % 250) + 2}",
            annotations={k: encode_metric(0.3, now) for k in rules.keys if k != "node_hot_value"},
        )
        for i in range(options.nodes)
    ]
    names = [specs[i % len(specs)].name for i in range(options.events)]
    per_event: dict[str, list[float]] = {kind: [] for kind in KINDS}
    with Sandbox(lease_seconds=options.lease_seconds) as box:
        print(renewals(len(specs), options.lease_seconds), file=sys.stderr)
        box.create_nodes(specs)
        endpoint = load_endpoint(str(box.kubeconfig))
        for round_ in range(options.rounds + 1):  # round 0 warms up, uncounted
            order = KINDS if round_ % 2 == 0 else KINDS[::-1]
            for turn, kind in enumerate(order):
                first = (2 * round_ + turn) * len(names)
                with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:  # as served
                    seconds = runner.run(measure(box, endpoint, kind, names, first))
                if round_:
                    per_event[kind].append(seconds)
                    print(f"  round {round_} {kind:<7} {seconds * 1e6:7.1f} µs/event", flush=True)
    medians = {kind: statistics.median(values) for kind, values in per_event.items()}
    print(
        f"node watch CPU per event (main thread: read, TLS, decode, store), {options.nodes} "
        f"nodes, {options.events} patches per measurement, {options.rounds} rounds, "
        f"cpus={os.cpu_count()}"
    )
    for kind, value in medians.items():
        print(f"  {kind:<7} {value * 1e6:7.1f} µs (median)")
    print(f"  direct / httpx: {medians['direct'] / medians['httpx']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
