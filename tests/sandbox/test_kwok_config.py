"""kwok's configuration as the sandbox writes it (its stages run in tests/e2e), and the tools
pinned in hack/."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from sandbox import build, kwok
from sandbox.cluster_objects import node_schedulable
from sandbox.specs import NodeSpec


def documents(text: str) -> list[dict[str, object]]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


def test_the_configuration_manages_labelled_nodes_with_leases_and_every_stage() -> None:
    docs = documents(kwok.config_text(lease_seconds=120))
    options = docs[0]
    assert options["kind"] == "KwokConfiguration"
    assert options["options"] == {
        "manageNodesWithLabelSelector": "sandbox.loadsched.io/kubelet=kwok",
        "nodeLeaseDurationSeconds": 120,
        "cidr": kwok.POD_CIDR,
        "nodeLeaseParallelism": 4,
        "nodePlayStageParallelism": 4,
        "podPlayStageParallelism": 4,
        "podsOnNodeSyncParallelism": 1,
    }
    stages = {doc["metadata"]["name"]: doc for doc in docs[1:]}  # type: ignore[index]
    assert set(stages) == {
        "node-initialize",
        "node-heartbeat",
        "pod-ready",
        "pod-exit",
        "pod-stop",
        "pod-delete",
    }
    assert {doc["kind"] for doc in stages.values()} == {"Stage"}
    assert stages["pod-delete"]["spec"]["next"] == {"delete": True}  # type: ignore[index]
    # The kubelet reports a deleted pod terminal before it finishes the delete, and only then.
    stop = stages["pod-stop"]["spec"]["selector"]["matchExpressions"]  # type: ignore[index]
    delete = stages["pod-delete"]["spec"]["selector"]["matchExpressions"]  # type: ignore[index]
    terminal = ["Succeeded", "Failed"]
    assert {"key": ".status.phase", "operator": "NotIn", "values": terminal} in stop
    assert {"key": ".status.phase", "operator": "In", "values": terminal} in delete


def test_every_annotation_a_stage_reads_is_one_lifecycle_writes() -> None:
    text = kwok.STAGES.read_text()
    read = {
        key
        for key in (kwok.STARTS_AFTER, kwok.RUNS, kwok.EXIT_CODE, kwok.STOPS_AFTER)
        if key in text
    }
    assert read == {kwok.STARTS_AFTER, kwok.RUNS, kwok.EXIT_CODE, kwok.STOPS_AFTER}
    written = kwok.lifecycle(starts_after="1s", runs="2s", exit_code=3, stops_after="500ms")
    assert written == {
        kwok.STARTS_AFTER: "1s",
        kwok.RUNS: "2s",
        kwok.EXIT_CODE: "3",
        kwok.STOPS_AFTER: "500ms",
    }
    assert kwok.lifecycle() == {}


class FakeCore:
    def __init__(self) -> None:
        self.patches: list[tuple[str, str, dict[str, object]]] = []

    def patch_namespaced_pod(self, name: str, namespace: str, body: dict[str, object]) -> None:
        self.patches.append((name, namespace, body))


def test_start_and_exit_now_change_the_annotations_kwok_acts_on() -> None:
    core = FakeCore()
    kwok.start_now(core, "p", "ns")
    kwok.exit_now(core, "p", "ns", exit_code=2)
    assert core.patches == [
        ("p", "ns", {"metadata": {"annotations": {kwok.STARTS_AFTER: "0s"}}}),
        ("p", "ns", {"metadata": {"annotations": {kwok.RUNS: "0s", kwok.EXIT_CODE: "2"}}}),
    ]


def test_a_node_registers_for_kwok_with_no_status_conditions() -> None:
    body = NodeSpec("n", "127.0.0.9").body()
    assert body["metadata"]["labels"][kwok.KUBELET_LABEL] == "kwok"
    assert "conditions" not in body["status"]  # kwok reports Ready


def node(ready: str, taints: list[str]) -> dict[str, object]:
    return {
        "status": {"conditions": [{"type": "Ready", "status": ready}]},
        "spec": {"taints": [{"key": key, "effect": "NoSchedule"} for key in taints]},
    }


@pytest.mark.parametrize(
    ("ready", "taints", "expected"),
    [
        ("True", [], True),
        ("True", ["node.kubernetes.io/not-ready"], False),
        ("Unknown", ["node.kubernetes.io/unreachable"], False),
        ("False", [], False),
        (None, [], False),
        ("True", ["dedicated"], True),
    ],
)
def test_a_node_is_schedulable_once_ready_and_untainted(
    ready: str | None, taints: list[str], expected: bool
) -> None:
    body = node(ready, taints) if ready else {"metadata": {"name": "new"}}
    assert node_schedulable(body) is expected


def test_tools_are_pinned_in_their_modules() -> None:
    assert build.kwok_version().startswith("v0.")
    assert build.etcd_version().startswith("v3.6.")
    assert build.helm_version().startswith("v3.")


def test_a_module_without_the_pin_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "go.mod").write_text("module x\n\ngo 1.26.0\n")
    with pytest.raises(RuntimeError, match="no 'require sigs.k8s.io/kwok vX.Y.Z' line"):
        build.pinned_version(tmp_path, "sigs.k8s.io/kwok")


def test_a_small_dev_shm_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    from sandbox import cluster

    usage = shutil.disk_usage("/")
    monkeypatch.setattr(shutil, "disk_usage", lambda _: usage._replace(free=64 << 20))
    assert cluster.memory_backed_folder() is None
    monkeypatch.setattr(shutil, "disk_usage", lambda _: usage._replace(free=8 << 30))
    assert cluster.memory_backed_folder() == (
        Path("/dev/shm") if Path("/dev/shm").is_dir() else None
    )
