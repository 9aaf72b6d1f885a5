"""The metrics side of the sandbox: the synthetic exporter for every fake node, and
Prometheus scraping it with the recording rules."""

from __future__ import annotations

import json
import sys
import urllib.request
from collections.abc import Iterable, Mapping
from typing import Any

from sandbox.build import ROOT
from sandbox.cluster import Sandbox
from sandbox.loopback import free_port
from sandbox.prometheus import Prometheus
from sandbox.specs import NodeSpec

Loads = Mapping[str, Mapping[str, Any]]
"""Per node: ``cpu`` and ``mem`` fractions, and optionally its ``pods`` (:mod:`sandbox.exporter`)."""


class MetricsStack:
    def __init__(
        self, sandbox: Sandbox, nodes: Iterable[NodeSpec], loads: Loads | None = None
    ) -> None:
        self.sandbox = sandbox
        self.nodes = list(nodes)
        self.control = f"http://127.0.0.1:{free_port()}"
        self.port = free_port()
        prometheus_port = free_port()
        workdir = sandbox.workdir / f"prometheus-{prometheus_port}"
        self.prometheus = Prometheus(sandbox.supervisor, workdir, prometheus_port)
        self._initial = dict(loads or {})

    def instance(self, node: NodeSpec) -> str:
        return f"{node.ip}:{self.port}"

    def start(self, *, scrape_interval: str = "5s") -> MetricsStack:
        self.sandbox.supervisor.start(
            "exporter",
            [
                sys.executable,
                "-m",
                "sandbox.exporter",
                "--control",
                self.control.removeprefix("http://"),
                "--port",
                str(self.port),
                "--loads",
                json.dumps(self._initial),
            ]
            + [f"{n.name}={n.ip}" for n in self.nodes],
            cwd=ROOT,
        )
        self.prometheus.start(self.targets(), scrape_interval=scrape_interval)
        return self

    def targets(self) -> list[str]:
        return [self.instance(n) for n in self.nodes]

    def set_loads(self, loads: Loads) -> None:
        request = urllib.request.Request(
            f"{self.control}/load", data=json.dumps(loads).encode(), method="PUT"
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            response.read()

    def stop(self) -> None:
        self.prometheus.stop()
        self.sandbox.supervisor.stop_named("exporter")
