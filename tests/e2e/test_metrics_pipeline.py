"""Synthetic exporter → Prometheus → recording rules: the values the annotator reads."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator

import pytest

from sandbox.cluster import Sandbox, free_port
from sandbox.processes import wait_for
from sandbox.prometheus import Prometheus
from tests.e2e.conftest import NODES

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def exporter(sandbox: Sandbox) -> Iterator[str]:
    import sys

    control = f"127.0.0.1:{free_port()}"
    port = free_port()
    process = sandbox.supervisor.start(
        "exporter",
        [sys.executable, "-m", "sandbox.exporter", "--control", control, "--port", str(port)]
        + [f"{n.name}={n.ip}" for n in NODES],
    )
    prometheus = Prometheus(sandbox.supervisor, sandbox.workdir / "prometheus", free_port())
    prometheus.start([f"{n.ip}:{port}" for n in NODES])
    sandbox.prometheus = prometheus  # type: ignore[attr-defined]
    yield f"http://{control}|{port}"
    prometheus.stop()
    sandbox.supervisor.stop(process)


def set_exporter_load(control: str, loads: dict[str, dict[str, float]]) -> None:
    request = urllib.request.Request(
        f"{control}/load", data=json.dumps(loads).encode(), method="PUT"
    )
    with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310 - loopback
        assert response.status == 200


def test_recording_rules_follow_the_exporter(sandbox: Sandbox, exporter: str) -> None:
    control, port = exporter.split("|")
    set_exporter_load(
        control, {"node-1": {"cpu": 0.8, "mem": 0.4}, "node-2": {"cpu": 0.2, "mem": 0.9}}
    )
    prometheus: Prometheus = sandbox.prometheus  # type: ignore[attr-defined]
    n1, n2 = f"{NODES[0].ip}:{port}", f"{NODES[1].ip}:{port}"

    def settled() -> bool:
        cpu = prometheus.query("cpu_usage_active")
        mem = prometheus.query("mem_usage_active")
        return (
            abs(cpu.get(n1, -1) - 80) < 2
            and abs(cpu.get(n2, -1) - 20) < 2
            and abs(mem.get(n1, -1) - 40) < 0.5
            and abs(mem.get(n2, -1) - 90) < 0.5
        )

    wait_for(settled, timeout=90, what="recording rules to reflect the exporter's load", interval=2)
    everyone = {f"{n.ip}:{port}" for n in NODES}
    for rule in (
        "cpu_usage_avg_5m",
        "mem_usage_avg_5m",
        "cpu_usage_max_avg_1h",
        "mem_usage_max_avg_1d",
    ):
        wait_for(
            lambda rule=rule: set(prometheus.query(rule)) == everyone,
            timeout=30,
            what=f"{rule} for every node",
        )
