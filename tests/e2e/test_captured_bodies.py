"""What kube-scheduler really sends: captured through a recording proxy, checked against the
fixtures the contract tests use (tests/fixtures/kube-scheduler), and rewritten with
``LOADSCHED_WRITE_FIXTURES=1``."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from sandbox.capture import CapturingProxy
from sandbox.cluster import Sandbox
from sandbox.processes import wait_for
from sandbox.specs import ExtenderSpec, pod_body
from tests.e2e.conftest import NODES

pytestmark = pytest.mark.e2e

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kube-scheduler"


def shape(value: Any, depth: int = 0) -> Any:
    """Keys and JSON types, two levels deep: what the contract depends on."""
    if isinstance(value, dict):
        return {k: shape(v, depth + 1) for k, v in value.items()} if depth < 2 else "object"
    if isinstance(value, list):
        return "array"
    return type(value).__name__


def test_capture_filter_prioritize_preempt(
    sandbox: Sandbox, extender: str, schedulers: dict[str, str]
) -> None:
    scheduling = k8s.SchedulingV1Api(sandbox.api)
    with CapturingProxy(extender) as proxy:
        sandbox.start_scheduler(
            "capture-names", scheduler_name="capture-names", extender=ExtenderSpec(proxy.url)
        )
        sandbox.start_scheduler(
            "capture-full",
            scheduler_name="capture-full",
            extender=ExtenderSpec(proxy.url, node_cache_capable=False),
        )
        try:
            for name in ("capture-names", "capture-full"):
                sandbox.create_pods(
                    [pod_body(f"{name}-0", scheduler_name=name, labels={"batch": "capture"})]
                )
            sandbox.wait_bound("batch=capture", 2)
            # Fill every node, then ask for room at a higher priority: kube-scheduler preempts.
            sandbox.create_pods(
                pod_body(
                    f"filler-{n.name}",
                    scheduler_name="default-scheduler",
                    cpu="7",
                    labels={"batch": "filler"},
                )
                for n in NODES
            )
            sandbox.wait_bound("batch=filler", len(NODES))
            sandbox.create_priority_class(
                "capture-high", 1000, preemption_policy="PreemptLowerPriority"
            )
            for name in ("capture-names", "capture-full"):
                sandbox.create_pods(
                    [
                        pod_body(
                            f"{name}-big",
                            scheduler_name=name,
                            cpu="7",
                            priority_class="capture-high",
                            labels={"batch": "big"},
                        )
                    ]
                )
            wait_for(
                lambda: len(proxy.bodies.get("preempt", [])) >= 2,
                timeout=60,
                what="two preempt calls",
            )
        finally:
            sandbox.stop_scheduler("capture-names")
            sandbox.stop_scheduler("capture-full")
            for batch in ("capture", "filler", "big"):
                sandbox.delete_pods(f"batch={batch}")
            with contextlib.suppress(k8s.ApiException):
                scheduling.delete_priority_class("capture-high")

    captured: dict[str, Any] = {}
    for verb in ("filter", "prioritize", "preempt"):
        for raw in proxy.bodies[verb]:
            body = json.loads(raw)
            if verb == "preempt":
                mode = "names" if body.get("NodeNameToMetaVictims") is not None else "full"
            else:
                mode = "names" if body.get("NodeNames") is not None else "full"
            captured.setdefault(f"{verb}-{mode}", body)
    assert set(captured) == {
        f"{v}-{m}" for v in ("filter", "prioritize", "preempt") for m in ("names", "full")
    }
    # the shapes DESIGN.md describes: the unused one is present and null
    assert (
        captured["filter-names"]["Nodes"] is None and captured["filter-full"]["NodeNames"] is None
    )
    assert captured["preempt-full"]["NodeNameToMetaVictims"] is None
    if os.environ.get("LOADSCHED_WRITE_FIXTURES"):
        FIXTURES.mkdir(parents=True, exist_ok=True)
        for key, body in captured.items():
            (FIXTURES / f"{key}.json").write_text(
                json.dumps(body, indent=1, sort_keys=False) + "\n"
            )
    for key, body in captured.items():
        committed = json.loads((FIXTURES / f"{key}.json").read_text())
        assert shape(body) == shape(committed), key
