"""A synthetic node exporter: one process serving node-exporter-style series for many fake
nodes, each on its own address (``127.0.0.N:9100``), at load levels set over HTTP.

    python -m sandbox.exporter --control 127.0.0.1:9099 --port 9100 node-1=127.0.0.2 ...
    curl -X PUT 127.0.0.1:9099/load -d '{"node-1": {"cpu": 0.8, "mem": 0.4}}'

Counters are integrated over time, so ``irate(node_cpu_seconds_total{mode="idle"}[30s])``
gives back ``(1 - cpu)`` per CPU, as on a real node. A node's ``pods`` (``{"node-1": {"cpu":
0.6, "pods": {"ns/web-1": {"cpu": 1.2, "mem": 2e8}}}}``; given, it replaces the node's list)
are served as the kubelet's cAdvisor series are: ``container_cpu_usage_seconds_total`` (a
counter of the pod's cores) and ``container_memory_working_set_bytes``, labelled with the
``namespace``, ``pod`` and ``container="main"``.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import signal
import time
from dataclasses import dataclass, field
from typing import Any

MEM_TOTAL = 32 * 1024**3
HEADERS = (
    "# HELP node_cpu_seconds_total Seconds the CPUs spent in each mode.\n"
    "# TYPE node_cpu_seconds_total counter",
    "# HELP node_memory_MemTotal_bytes Memory information field MemTotal_bytes.\n"
    "# TYPE node_memory_MemTotal_bytes gauge",
    "# HELP node_memory_MemAvailable_bytes Memory information field MemAvailable_bytes.\n"
    "# TYPE node_memory_MemAvailable_bytes gauge",
    "# HELP container_cpu_usage_seconds_total Cumulative cpu time consumed in seconds.\n"
    "# TYPE container_cpu_usage_seconds_total counter",
    "# HELP container_memory_working_set_bytes Current working set in bytes.\n"
    "# TYPE container_memory_working_set_bytes gauge",
)
Families = tuple[list[str], ...]
"""One list of exposition lines per family of :data:`HEADERS`, in order."""


def render_families(parts: list[Families]) -> bytes:
    """The text exposition format: each family's HELP and TYPE, then all of its samples."""
    lines: list[str] = []
    for index, header in enumerate(HEADERS):
        lines.append(header)
        for part in parts:
            lines += part[index]
    return ("\n".join(lines) + "\n").encode()


@dataclass
class PodUsage:
    cpu: float = 0.0
    """Cores."""
    mem: float = 0.0
    """Bytes."""
    seconds: float = 0.0
    """CPU seconds used so far."""


@dataclass
class NodeLoad:
    cpus: int = 8
    cpu: float = 0.0
    mem: float = 0.0
    idle: float = 0.0
    busy: float = 0.0
    at: float = 0.0
    pods: dict[str, PodUsage] = field(default_factory=dict)
    """By ``namespace/name``."""

    def advance(self, now: float) -> None:
        elapsed = max(now - self.at, 0.0) if self.at else 0.0
        self.idle += (1.0 - self.cpu) * elapsed
        self.busy += self.cpu * elapsed
        for pod in self.pods.values():
            pod.seconds += pod.cpu * elapsed
        self.at = now

    def set_pods(self, pods: dict[str, dict[str, float]]) -> None:
        """The pods on the node now, with their usage; a pod kept keeps its counter."""
        self.pods = {
            key: PodUsage(
                max(float(usage.get("cpu", 0.0)), 0.0),
                max(float(usage.get("mem", 0.0)), 0.0),
                self.pods[key].seconds if key in self.pods else 0.0,
            )
            for key, usage in pods.items()
        }

    def series(self, instance: str = "") -> Families:
        """Exposition lines of the families; with ``instance``, every series carries that
        label (for one endpoint that speaks for many nodes, scraped with ``honor_labels``)."""
        extra = f',instance="{instance}"' if instance else ""
        cpu = []
        for n in range(self.cpus):
            cpu.append(f'node_cpu_seconds_total{{cpu="{n}",mode="idle"{extra}}} {self.idle:.6f}')
            cpu.append(f'node_cpu_seconds_total{{cpu="{n}",mode="user"{extra}}} {self.busy:.6f}')
        plain = f"{{{extra.lstrip(',')}}}" if extra else ""
        total = [f"node_memory_MemTotal_bytes{plain} {MEM_TOTAL}"]
        available = [f"node_memory_MemAvailable_bytes{plain} {int(MEM_TOTAL * (1.0 - self.mem))}"]
        container_cpu, container_mem = [], []
        for key, pod in sorted(self.pods.items()):
            namespace, _, name = key.partition("/")
            labels = f'namespace="{namespace}",pod="{name}",container="main"{extra}'
            container_cpu.append(f"container_cpu_usage_seconds_total{{{labels}}} {pod.seconds:.6f}")
            container_mem.append(f"container_memory_working_set_bytes{{{labels}}} {int(pod.mem)}")
        return cpu, total, available, container_cpu, container_mem

    def render(self) -> bytes:
        return render_families([self.series()])


class Exporter:
    def __init__(self, nodes: dict[str, str]) -> None:
        self.addresses = nodes
        self.loads = {name: NodeLoad() for name in nodes}

    def set_loads(self, levels: dict[str, dict[str, Any]]) -> None:
        now = time.monotonic()
        for name, level in levels.items():
            load = self.loads.setdefault(name, NodeLoad())
            load.advance(now)
            load.cpu = min(max(float(level.get("cpu", load.cpu)), 0.0), 1.0)
            load.mem = min(max(float(level.get("mem", load.mem)), 0.0), 1.0)
            pods = level.get("pods")
            if isinstance(pods, dict):
                load.set_pods(pods)

    def metrics(self, name: str) -> bytes:
        load = self.loads[name]
        load.advance(time.monotonic())
        return load.render()

    def combined(self, port: int) -> bytes:
        """Every node's series on one endpoint, labelled ``instance="<ip>:<port>"``."""
        now = time.monotonic()
        parts = []
        for name, ip in self.addresses.items():
            load = self.loads[name]
            load.advance(now)
            parts.append(load.series(f"{ip}:{port}"))
        return render_families(parts)


async def _respond(
    writer: asyncio.StreamWriter, status: str, body: bytes, kind: str = "text/plain"
) -> None:
    writer.write(
        f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )
    await writer.drain()
    writer.close()


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    request_line, *header_lines = head.decode("latin-1").split("\r\n")
    method, path, _ = request_line.split(" ", 2)
    length = 0
    for line in header_lines:
        key, _, value = line.partition(":")
        if key.strip().lower() == "content-length":
            length = int(value.strip())
    body = await reader.readexactly(length) if length else b""
    return method, path, body


async def serve(
    exporter: Exporter, control: tuple[str, int], port: int, combined: str | None = None
) -> None:
    async def scrape(name: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await _read_request(reader)
            await _respond(writer, "200 OK", exporter.metrics(name), "text/plain; version=0.0.4")
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            writer.close()

    async def control_handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            method, path, body = await _read_request(reader)
            if path == "/load" and method == "PUT":
                exporter.set_loads(json.loads(body))
            if path == "/load":
                levels = {n: {"cpu": v.cpu, "mem": v.mem} for n, v in exporter.loads.items()}
                await _respond(writer, "200 OK", json.dumps(levels).encode(), "application/json")
            else:
                await _respond(writer, "404 Not Found", b"not found\n")
        except (asyncio.IncompleteReadError, ConnectionError, ValueError) as e:
            await _respond(writer, "400 Bad Request", str(e).encode())

    async def combined_handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await _read_request(reader)
            await _respond(writer, "200 OK", exporter.combined(port), "text/plain; version=0.0.4")
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            writer.close()

    servers = [await asyncio.start_server(control_handler, control[0], control[1])]
    if combined is not None:
        host, _, combined_port = combined.rpartition(":")
        servers.append(await asyncio.start_server(combined_handler, host, int(combined_port)))
    for name, ip in exporter.addresses.items() if combined is None else ():
        servers.append(await asyncio.start_server(functools.partial(scrape, name), ip, port))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    for server in servers:
        server.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--control", default="127.0.0.1:9099", help="host:port of the load-control API"
    )
    parser.add_argument("--port", type=int, default=9100, help="metrics port on every node address")
    parser.add_argument(
        "--loads", default="{}", help='initial loads, JSON: {"node-1": {"cpu": 0.8, "mem": 0.4}}'
    )
    parser.add_argument(
        "--combined",
        help="host:port serving every node's series, instance-labelled, instead of per-node sockets",
    )
    parser.add_argument("--loads-file", help="initial loads as a JSON file (same shape as --loads)")
    parser.add_argument("--nodes-file", help="file with one name=ip pair per line")
    parser.add_argument("nodes", nargs="*", help="name=ip pairs")
    args = parser.parse_args()
    pairs = list(args.nodes)
    if args.nodes_file:
        with open(args.nodes_file) as lines:
            pairs += [line.strip() for line in lines if line.strip()]
    nodes = dict(pair.split("=", 1) for pair in pairs)
    host, _, control_port = args.control.rpartition(":")
    exporter = Exporter(nodes)
    exporter.set_loads(json.loads(args.loads))
    if args.loads_file:
        with open(args.loads_file) as source:
            exporter.set_loads(json.load(source))
    asyncio.run(serve(exporter, (host, int(control_port)), args.port, args.combined))


if __name__ == "__main__":
    main()
