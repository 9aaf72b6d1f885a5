"""kwok as the kubelet of the sandbox's nodes: it manages every Node labelled
``KUBELET_LABEL=kwok``, reports it Ready, renews its Lease, runs the pods bound to it, lets them
exit and finishes their graceful deletion, all through the API server as a kubelet would
(stages in ``kwok-stages.yaml``). Containers are simulated: nothing is pulled or executed.

A pod picks its behaviour with annotations (or labels of the same keys); ``lifecycle`` writes
them. kwok times each delay from the pod's latest change it sees (a status or metadata update
restarts the clock), not from binding or start. ``start_now`` and ``exit_now`` change them on a live pod, which kwok then acts on: the
moment an image pull ends, the moment a program exits.

    pod["metadata"]["annotations"] = lifecycle(runs="5s", exit_code=1)   # fails after 5 s
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

STAGES = Path(__file__).with_name("kwok-stages.yaml")
KUBELET_LABEL = "sandbox.loadsched.io/kubelet"
"""Nodes with this label set to ``kwok`` have kwok as their kubelet; a node whose label is
removed loses its kubelet (no more Lease renewals: the node lifecycle controller takes over)."""
STARTS_AFTER = "sandbox.loadsched.io/starts-after"
RUNS = "sandbox.loadsched.io/runs"
EXIT_CODE = "sandbox.loadsched.io/exit-code"
STOPS_AFTER = "sandbox.loadsched.io/stops-after"
POD_CIDR = "10.244.0.0/16"
LEASE_SECONDS = 40
"""kubelet's default ``nodeLeaseDurationSeconds``; renewed every quarter of it."""


def lifecycle(
    *,
    starts_after: str | None = None,
    runs: str | None = None,
    exit_code: int | None = None,
    stops_after: str | None = None,
) -> dict[str, str]:
    """The annotations that make kwok start a pod after ``starts_after``, end its containers
    ``runs`` after that with ``exit_code``, and finish its graceful deletion ``stops_after``
    the delete (durations as Go writes them: ``"500ms"``, ``"5s"``)."""
    chosen = {STARTS_AFTER: starts_after, RUNS: runs, STOPS_AFTER: stops_after}
    notes = {key: value for key, value in chosen.items() if value is not None}
    if exit_code is not None:
        notes[EXIT_CODE] = str(exit_code)
    return notes


def start_now(core: Any, name: str, namespace: str) -> None:
    """Let a pod waiting on ``starts_after`` start now."""
    core.patch_namespaced_pod(name, namespace, {"metadata": {"annotations": {STARTS_AFTER: "0s"}}})


def exit_now(core: Any, name: str, namespace: str, exit_code: int = 0) -> None:
    """Make a running pod's containers exit now with ``exit_code``."""
    notes = lifecycle(runs="0s", exit_code=exit_code)
    core.patch_namespaced_pod(name, namespace, {"metadata": {"annotations": notes}})


def config_text(*, lease_seconds: int = LEASE_SECONDS) -> str:
    """kwok's configuration: which nodes it manages, its Lease duration, its stages."""
    options = {
        "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
        "kind": "KwokConfiguration",
        "options": {
            "manageNodesWithLabelSelector": f"{KUBELET_LABEL}=kwok",
            "nodeLeaseDurationSeconds": lease_seconds,
            "cidr": POD_CIDR,
            # kwok's own defaults, which it applies only when it reads no configuration.
            "nodeLeaseParallelism": 4,
            "nodePlayStageParallelism": 4,
            "podPlayStageParallelism": 4,
            "podsOnNodeSyncParallelism": 1,
        },
    }
    return yaml.safe_dump(options) + STAGES.read_text()


def argv(binary: Path, kubeconfig: Path, config: Path) -> list[str]:
    return [str(binary), "--kubeconfig", str(kubeconfig), "--config", str(config)]
