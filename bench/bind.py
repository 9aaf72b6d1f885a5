"""The bind verb's Binding writes, as a burst arrives (kube-scheduler binds each pod in the
background, so a burst's bindings come at once): the extender's direct write against the same
Bindings sent through httpx, side by side in one run, on the real control plane (sandbox: etcd
and kube-apiserver on 127.0.0.1).

Both paths are the extender's own :class:`extender.scheduling.binding.Binder`, run in this
process: attached to a client the API server's socket can be written to directly (as the
served extender's is), and to one with a transport of its own, which goes through httpx (as a
client that cannot be written to directly does). Bursts of ``--pods`` bindings at once, and
the same one at a time, take turns between the two paths, each on fresh unscheduled pods;
measured: this process's CPU per binding over each burst (the API server's is apart), each
binding's time, and each burst's wall time.

    .venv/bin/python -m bench.bind [--pods 60] [--rounds 4]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from dataclasses import dataclass, field

import httpx

from extender.scheduling.binding import BINDS_AT_ONCE, Binder
from extender.scheduling.wire import BindingArgs
from sandbox.cluster import NodeSpec, Sandbox, pod_body
from shared.kube import direct
from shared.kube.config import KubeEndpoint, load_endpoint
from shared.kube.retrying import RetryPolicy

PATHS = ("direct", "httpx")


@dataclass
class Figures:
    cpu: list[float] = field(default_factory=list)
    """CPU seconds per binding, per burst."""
    each: list[float] = field(default_factory=list)
    """Seconds per binding."""
    wall: list[float] = field(default_factory=list)
    """Seconds per burst."""


def client(endpoint: KubeEndpoint, path: str) -> httpx.AsyncClient:
    return endpoint.client(direct=path == "direct")  # else through httpx


async def burst(endpoint: KubeEndpoint, path: str, pods: list[str], at_once: bool) -> Figures:
    binder = Binder(None)
    figures = Figures()
    async with client(endpoint, path) as kube:
        binder.attach(kube, RetryPolicy(attempts=1))
        assert (direct.route(kube) is not None) == (path == "direct")

        async def bind(name: str) -> None:
            began = time.perf_counter()
            args = BindingArgs(PodName=name, PodNamespace="default", PodUID="", Node="node-1")
            result = await binder.bind(args)
            if result.Error:
                raise RuntimeError(result.Error)
            figures.each.append(time.perf_counter() - began)

        cpu, wall = time.process_time(), time.perf_counter()
        if at_once:
            await asyncio.gather(*map(bind, pods))
        else:
            for name in pods:
                await bind(name)
        figures.wall.append(time.perf_counter() - wall)
        figures.cpu.append((time.process_time() - cpu) / len(pods))
        binder.detach()
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pods", type=int, default=60, help="bindings per burst")
    parser.add_argument("--rounds", type=int, default=4, help="bursts per path and kind")
    options = parser.parse_args()
    if options.pods < 1 or options.rounds < 1:
        parser.error("--pods and --rounds must be at least 1")
    results: dict[tuple[str, bool], Figures] = {}
    with Sandbox(say=print) as box:
        box.create_nodes([NodeSpec("node-1", "127.0.0.2")])
        endpoint = load_endpoint(str(box.kubeconfig))
        number = 0
        for round_ in range(options.rounds):
            for at_once in (True, False):
                # alternate which path goes first, so neither always meets a warmer server
                for path in PATHS if round_ % 2 == 0 else PATHS[::-1]:
                    names = [f"bind-{number}-{i}" for i in range(options.pods)]
                    number += 1
                    box.create_pods(pod_body(n, scheduler_name="nobody") for n in names)
                    got = asyncio.run(burst(endpoint, path, names, at_once))
                    kept = results.setdefault((path, at_once), Figures())
                    kept.cpu += got.cpu
                    kept.each += got.each
                    kept.wall += got.wall
    print()
    print(
        f"bind verb: {options.pods} Bindings per burst, {options.rounds} bursts per path and "
        f"kind, at most {BINDS_AT_ONCE} written at once; medians"
    )
    print(f"  {'path':8}{'kind':10}{'CPU/binding ms':>16}{'binding ms':>12}{'burst ms':>10}")
    for at_once in (True, False):
        for path in PATHS:
            f = results[(path, at_once)]
            print(
                f"  {path:8}{'at once' if at_once else 'in turn':10}"
                f"{statistics.median(f.cpu) * 1000:16.2f}"
                f"{statistics.median(f.each) * 1000:12.1f}"
                f"{statistics.median(f.wall) * 1000:10.0f}"
            )
    for at_once in (True, False):
        direct_cpu = statistics.median(results[("direct", at_once)].cpu)
        httpx_cpu = statistics.median(results[("httpx", at_once)].cpu)
        print(
            f"  {'at once' if at_once else 'in turn'}: httpx / direct CPU per binding "
            f"{httpx_cpu / direct_cpu:.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
