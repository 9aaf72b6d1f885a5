"""Node merge-PATCH throughput through the Kubernetes client layer, side by side in one run.

Starts the sandbox control plane (etcd, kube-apiserver), creates ``--nodes`` nodes, then sends
the annotator's annotation patch (one JSON merge patch of ``metadata.annotations`` per node,
``--concurrency`` writers, the annotator's default 8, on a client with the annotator's pool)
through:

- **send**: the one-shot request the annotator used before the layer (kept here, as it was);
- **layer**: ``shared.kube.patching.patch`` (the request function with the retry policy);
- **lightkube**: ``lightkube.AsyncClient.patch`` with ``PatchType.MERGE``, when lightkube is
  importable (it is not a dependency: ``pip install --target /tmp/lk lightkube`` and run with
  ``PYTHONPATH=/tmp/lk``).

The clients take turns, ``--rounds`` rounds each, every round patching every node with a new
value; it prints each round's patches/s, the median per client, and each median's ratio to
``send``'s.

    .venv/bin/python -m bench.kube_client [--nodes 1500] [--rounds 5] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import msgspec
import uvloop

from bench.lease_option import add_lease_option, renewals
from sandbox.cluster import Sandbox
from sandbox.specs import NodeSpec
from shared.kube import patching
from shared.kube.config import load_endpoint
from shared.kube.paths import NODES
from shared.kube.retrying import RetryPolicy
from shared.kube.status import raise_for_status, unreachable

MERGE = {"Content-Type": "application/merge-patch+json"}


async def send(
    client: httpx.AsyncClient, method: str, path: str, *, what: str, **kwargs: Any
) -> httpx.Response:
    """The one-shot request the annotator used before the client layer: never retried."""
    try:
        response = await client.request(method, path, **kwargs)
    except httpx.HTTPError as e:
        raise unreachable(e, what) from e
    raise_for_status(response)
    return response


Patch = Callable[[str, bytes], Awaitable[None]]


def body(round_: int, node: int) -> bytes:
    value = f"0.{(round_ * 7919 + node) % 100000:05d},2026-11-22T12:00:{round_ % 60:02d}Z"
    return msgspec.json.encode(
        {"metadata": {"annotations": {"cpu_usage_avg_5m": value, "mem_usage_avg_5m": value}}}
    )


async def one_round(names: list[str], round_: int, patch: Patch, concurrency: int) -> float:
    pending = iter(enumerate(names))

    async def writer() -> None:
        for i, name in pending:
            await patch(name, body(round_, i))

    started = time.perf_counter()
    await asyncio.gather(*(writer() for _ in range(concurrency)))
    return len(names) / (time.perf_counter() - started)


async def measure(box: Sandbox, names: list[str], rounds: int, concurrency: int) -> None:
    endpoint = load_endpoint(str(box.kubeconfig))
    policy = RetryPolicy()
    clients: dict[str, Patch] = {}
    async with (
        endpoint.client(max_connections=concurrency + 6) as old,
        endpoint.client(max_connections=concurrency + 6) as new,
    ):

        async def via_send(name: str, content: bytes) -> None:
            await send(
                old,
                "PATCH",
                f"/api/v1/nodes/{name}",
                what=f"node/{name}: patch",
                content=content,
                headers=MERGE,
            )

        async def via_layer(name: str, content: bytes) -> None:
            await patching.patch(
                new,
                NODES,
                name,
                content,
                what=f"node/{name}: patch",
                retry=policy,
                idempotent=True,
                conflicts=True,
            )

        clients["send"] = via_send
        clients["layer"] = via_layer
        lightkube = await lightkube_patch(box)
        if lightkube is not None:
            clients["lightkube"] = lightkube[0]
        else:
            print("lightkube: not importable, skipped", file=sys.stderr)
        for patch in clients.values():  # warm-up: connections, caches
            await one_round(names[:200], 0, patch, concurrency)
        rates: dict[str, list[float]] = {name: [] for name in clients}
        for round_ in range(1, rounds + 1):
            order = list(clients.items())
            shift = round_ % len(order)  # each client goes first in turn
            for name, patch in order[shift:] + order[:shift]:
                rate = await one_round(names, round_ * 10 + len(rates[name]), patch, concurrency)
                rates[name].append(rate)
                print(f"round {round_} {name:<10} {rate:8.0f} patches/s", file=sys.stderr)
        if lightkube is not None:
            await lightkube[1]()
    base = statistics.median(rates["send"])
    print(f"node merge patches, {len(names)} nodes, {concurrency} writers, {rounds} rounds each")
    print(f"{'client':<12} {'median patches/s':>17} {'ratio to send':>14}")
    for name, values in rates.items():
        median = statistics.median(values)
        print(f"{name:<12} {median:>17.0f} {median / base:>14.3f}")


async def lightkube_patch(
    box: Sandbox,
) -> tuple[Patch, Callable[[], Awaitable[None]]] | None:
    try:
        import lightkube  # type: ignore[import-not-found]
        from lightkube.resources.core_v1 import Node  # type: ignore[import-not-found]
        from lightkube.types import PatchType  # type: ignore[import-not-found]
    except ImportError:
        return None
    client = lightkube.AsyncClient(lightkube.KubeConfig.from_file(str(box.kubeconfig)))

    async def patch(name: str, content: bytes) -> None:
        await client.patch(Node, name, msgspec.json.decode(content), patch_type=PatchType.MERGE)

    async def close() -> None:
        await client.close()

    return patch, close


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=8)
    add_lease_option(parser)
    options = parser.parse_args()
    specs = [
        NodeSpec(f"node-{i:05d}", f"10.{i // 62500}.{(i // 250) % 250}.{i % 250 + 1}")
        for i in range(options.nodes)
    ]
    with Sandbox(lease_seconds=options.lease_seconds) as box:
        print(f"creating {len(specs)} nodes", file=sys.stderr)
        print(renewals(len(specs), options.lease_seconds), file=sys.stderr)
        box.create_nodes(specs, workers=16)
        uvloop.run(measure(box, [s.name for s in specs], options.rounds, options.concurrency))
    return 0


if __name__ == "__main__":
    sys.exit(main())
