"""The container image, built from the Dockerfile and run with podman the way a cluster runs it:
read-only root filesystem, the image's own unprivileged user, every capability dropped. The
extender answers kube-scheduler's calls from it, the annotator and the dispatch poller start
from it, and it carries nothing to build or install with."""

from __future__ import annotations

import json
import os
import re
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from sandbox.cluster import Sandbox
from sandbox.image import Container, Image, build_image, container_kubeconfig, podman
from sandbox.loopback import free_port
from sandbox.metrics_stack import MetricsStack
from sandbox.specs import ExtenderSpec, pod_body
from tests.e2e.conftest import LOADS, NODES, OVERLOADED, RULES
from tests.e2e.objects import meta_of
from tests.e2e.scrape import exported

pytestmark = pytest.mark.e2e

USER = "10001:10001"
SIZE_BUDGET = 300_000_000
"""Bytes, as podman counts them, on the local Debian base."""
# How a cluster runs it (the chart's securityContext); the host's network, so the sandbox's
# API server and Prometheus on 127.0.0.1 are in reach.
LOCKED_DOWN = [
    "--read-only",
    "--cap-drop",
    "ALL",
    "--security-opt",
    "no-new-privileges",
    "--network",
    "host",
]
KUBECONFIG = "/etc/loadsched/kubeconfig"
# Every process in the container's PID namespace: its user and group ids, effective capabilities.
PROCESSES = """
import json, pathlib
found = {}
for status in pathlib.Path('/proc').glob('[0-9]*/status'):
    try:
        fields = dict(line.split(':', 1) for line in status.read_text().splitlines())
    except OSError:
        continue
    found[fields['Name'].strip()] = {
        'uid': fields['Uid'].split(), 'gid': fields['Gid'].split(), 'caps': fields['CapEff'].strip()
    }
print(json.dumps(found))
"""
# Compilers, build tools and installers that must not be there; pip's wheels anywhere.
TOOLCHAIN = """
import importlib.util, json, os, shutil
tools = ['gcc', 'cc', 'c++', 'g++', 'clang', 'as', 'ld', 'make', 'pip', 'pip3', 'pip3.11', 'easy_install']
modules = ['pip', 'setuptools', 'ensurepip', 'wheel']
wheels = [
    os.path.join(folder, name)
    for top in ('/usr', '/opt', '/etc', '/var')
    for folder, _, names in os.walk(top)
    for name in names
    if name.endswith('.whl') or (name.startswith('pip-') and name.endswith('-info'))
]
print(json.dumps({
    'tools': [t for t in tools if shutil.which(t)],
    'modules': [m for m in modules if importlib.util.find_spec(m)],
    'wheels': wheels,
}))
"""


@pytest.fixture(scope="session")
def image() -> Iterator[Image]:
    """This checkout's image, built once per test run (the base once per machine)."""
    built = build_image(f"localhost/loadsched:e2e-{os.getpid()}")
    yield built
    podman("untag", built.id, built.tag, check=False)


@pytest.fixture(scope="module")
def lone_extender(image: Image) -> Iterator[tuple[Container, str]]:
    """The image's default command with no cluster: full-node requests only."""
    port = free_port()
    options = [*LOCKED_DOWN, "--env", "LOADSCHED_HOST=127.0.0.1", "--env", f"LOADSCHED_PORT={port}"]
    with Container.run(image, options, name="extender") as container:
        url = f"http://127.0.0.1:{port}"
        container.wait_http(f"{url}/healthz")
        yield container, url


def post_json(url: str, body: object) -> Any:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read())


def test_the_extender_runs_read_only_unprivileged_and_filters(
    lone_extender: tuple[Container, str],
) -> None:
    container, url = lone_extender
    config = container.inspect()
    assert config["Config"]["User"] == USER  # the image's own, not given on the command line
    assert config["HostConfig"]["ReadonlyRootfs"] is True
    mounts = container.exec("cat", "/proc/self/mounts").stdout.splitlines()
    root = [line.split()[3].split(",") for line in mounts if line.split()[1] == "/"]
    assert root and "ro" in root[-1], mounts
    assert container.exec("touch", "/tmp/scratch").returncode == 0  # /tmp is the one place
    processes = json.loads(container.exec("python", "-c", PROCESSES).stdout)
    assert any(name.startswith("loadsched-ext") for name in processes), processes
    for name, ids in processes.items():
        assert set(ids["uid"]) == set(ids["gid"]) == {"10001"}, (name, ids)
        assert int(ids["caps"], 16) == 0, (name, ids)
    # full-node mode, as kube-scheduler sends it with nodeCacheCapable: false
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    nodes = [
        {"metadata": {"name": name, "annotations": {"cpu_usage_avg_5m": f"{usage:.5f},{now}"}}}
        for name, usage in (("n1", 0.21), ("n2", 0.812))
    ]
    body = {
        "Pod": {"metadata": {"name": "web-0", "namespace": "default"}},
        "Nodes": {"items": nodes},
    }
    answer = post_json(f"{url}/filter", {**body, "NodeNames": None})
    assert [n["metadata"]["name"] for n in answer["Nodes"]["items"]] == ["n1"]
    assert answer["FailedAndUnresolvableNodes"] == {}  # listed only when no node passes
    assert answer["Error"] == ""
    answer = post_json(f"{url}/filter", {**body, "Nodes": {"items": nodes[1:]}, "NodeNames": None})
    assert answer["Nodes"]["items"] == []
    assert answer["FailedAndUnresolvableNodes"] == {
        "n2": "Load[cpu_usage_avg_5m]=0.81200 of node[n2] is above 0.65"
    }


def test_the_healthcheck_passes_inside_the_container(
    image: Image, lone_extender: tuple[Container, str]
) -> None:
    healthcheck = image.inspect()["Healthcheck"]  # kept: the image is docker-format
    assert "/healthz" in " ".join(healthcheck["Test"])
    container, _ = lone_extender
    result = podman("healthcheck", "run", container.name, check=False)
    assert result.returncode == 0, result.stdout + result.stderr + container.logs()
    assert container.inspect()["State"]["Health"]["Status"] == "healthy"


@pytest.mark.parametrize(
    "command", ["loadsched-extender", "loadsched-annotator", "loadsched-dispatch-poll"]
)
def test_every_entry_point_starts_from_the_image(image: Image, command: str) -> None:
    result = podman(
        "run", "--rm", *LOCKED_DOWN[:-2], "--network", "none", image.id, command, "--help"
    )
    assert result.stdout.startswith(f"usage: {command}"), result.stdout


@pytest.fixture(scope="module")
def stack(sandbox: Sandbox) -> Iterator[MetricsStack]:
    loads = {name: {"cpu": usage, "mem": 0.3} for name, usage in LOADS.items()}
    stack = MetricsStack(sandbox, NODES, loads=loads).start()
    yield stack
    stack.stop()


def test_the_annotator_dry_runs_once_against_the_cluster(
    image: Image, sandbox: Sandbox, stack: MetricsStack, tmp_path: Path
) -> None:
    """Its ServiceAccount's kubeconfig mounted read-only; every metric of the image's policy
    queried, every node's values logged, nothing written."""
    kubeconfig = container_kubeconfig(
        sandbox.service_kubeconfigs["annotator"], tmp_path / "kubeconfig"
    )

    def load_annotations() -> dict[str, dict[str, str]]:
        found = {n.name: meta_of(sandbox.core.read_node(n.name)).annotations or {} for n in NODES}
        return {node: {k: v for k, v in a.items() if k in RULES.keys} for node, a in found.items()}

    before = load_annotations()
    argv = [
        "run",
        "--rm",
        *LOCKED_DOWN,
        "--volume",
        f"{kubeconfig}:{KUBECONFIG}:ro",
        image.id,
        "loadsched-annotator",
        "--once",
        "--dry-run",
        "--kubeconfig",
        KUBECONFIG,
        "--prometheus-url",
        stack.prometheus.url,
        "--port",
        str(free_port()),
    ]

    # Prometheus's rules need a few evaluations before every node has a series: a round exits
    # 0 once each metric has a series for some node, so it runs again until one logs every node
    def logs_every_node(logged: str) -> bool:
        return all(f"node/{node.name}: dry run, would write" in logged for node in NODES)

    deadline = time.monotonic() + 120
    result = podman(*argv, check=False)
    logged = result.stdout + result.stderr
    while not (result.returncode == 0 and logs_every_node(logged)) and time.monotonic() < deadline:
        time.sleep(3)
        result = podman(*argv, check=False)
        logged = result.stdout + result.stderr
    assert result.returncode == 0, logged
    for node in NODES:
        assert f"node/{node.name}: dry run, would write" in logged, logged
    assert re.search(r"one round: \d+ queries, 0 node writes", logged), logged
    assert load_annotations() == before


def filter_calls(url: str) -> float:
    return exported(url, "loadsched_extender_responses_total", code="200", verb="filter")


def test_a_kube_scheduler_places_pods_through_the_extender_container(
    image: Image,
    sandbox: Sandbox,
    set_loads: Callable[[dict[str, float]], None],
    tmp_path: Path,
) -> None:
    """Names-only (nodeCacheCapable: true): the container watches the nodes with the chart's
    ServiceAccount and kube-scheduler sends it node names."""
    kubeconfig = container_kubeconfig(
        sandbox.service_kubeconfigs["extender"], tmp_path / "kubeconfig"
    )
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    options = [
        *LOCKED_DOWN,
        "--volume",
        f"{kubeconfig}:{KUBECONFIG}:ro",
        "--env",
        f"LOADSCHED_KUBECONFIG={KUBECONFIG}",
        "--env",
        "LOADSCHED_HOST=127.0.0.1",
        "--env",
        f"LOADSCHED_PORT={port}",
    ]
    set_loads(LOADS)
    with Container.run(image, options, name="scheduled") as container:
        container.wait_http(f"{url}/readyz")  # the node cache is in
        time.sleep(1)  # and has seen the annotations
        sandbox.start_scheduler(
            "image", scheduler_name="loadsched-image", extender=ExtenderSpec(url)
        )
        try:
            sandbox.create_pods(
                pod_body(f"image-{i}", scheduler_name="loadsched-image", labels={"batch": "image"})
                for i in range(8)
            )
            placed = sandbox.wait_bound("batch=image", 8, timeout=60)
            assert not set(placed.values()) & OVERLOADED, placed
            assert filter_calls(url) >= 1, container.logs()
        finally:
            sandbox.delete_pods("batch=image")
            sandbox.stop_scheduler("image")


def test_the_image_holds_no_toolchain_or_installer_and_fits_its_budget(
    image: Image, capsys: pytest.CaptureFixture[str]
) -> None:
    config = image.inspect()["Config"]
    assert config["User"] == USER
    assert config["Cmd"] == ["loadsched-extender"]
    found = json.loads(
        podman(
            "run", "--rm", "--read-only", "--network", "none", image.id, "python", "-c", TOOLCHAIN
        ).stdout
    )
    assert found == {"tools": [], "modules": [], "wheels": []}
    size = image.size
    with capsys.disabled():
        sys.stdout.write(f"\n{image.build_output}\n")
        sys.stdout.write(f"image size: {size / 1e6:.0f} MB (budget {SIZE_BUDGET / 1e6:.0f} MB)\n")
    assert size <= SIZE_BUDGET
