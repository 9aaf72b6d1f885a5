"""Decode cost of the Kubernetes object structs on the hot paths, before and now, side by side.

"before" are copies of the structs as they were when each kind had its own metadata struct
(``PodMeta``, the extender's ``NodeMeta``, the annotator's ``Meta``, dispatch's
``ObjectMeta``); "now" are the structs the code decodes with today. Each row decodes the same
bodies one object at a time (as watch events and a full-node request's items arrive), the two
in alternating blocks; it prints the best block of each and now/before.

- pods: 100,000 real-looking pods (labels, owner reference, three annotations), the pod
  watches of the quota ledger, the annotator and dispatch.
- extender nodes: 5,000 nodes (8 labels, ~40 images) decoded by the extender's node decoder,
  as each item of a full-node request and each node watch event.
- annotator nodes: the same nodes decoded by the annotator, then read for node fit and
  addresses (what its node store does with each).
- jobs: 10,000 dispatched Jobs.

    .venv/bin/python -m bench.decode [--quick]
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import msgspec

from annotator import objects as annotator_objects
from annotator.matching import NodeAddresses
from bench.extender import quick_option
from extender.dispatch.caches import JOB_DECODER
from extender.scheduling.wire import NODE_DECODER
from shared.load_model import LoadRules
from shared.node_fit import FitNode, taints_of
from shared.pods import POD_DECODER, PodSpec, PodStatus
from shared.policy import default_policy
from tests import payloads

# -- before: the structs as they were ---------------------------------------------------------


class OldOwnerReference(msgspec.Struct, gc=False):
    kind: str = ""
    name: str = ""


class OldPodMeta(msgspec.Struct, gc=False):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    creationTimestamp: str | None = None
    deletionTimestamp: str | None = None
    ownerReferences: list[OldOwnerReference] | None = None
    labels: dict[str, str] | None = None


class OldPod(msgspec.Struct, gc=False):
    metadata: OldPodMeta = msgspec.field(default_factory=OldPodMeta)
    spec: PodSpec = msgspec.field(default_factory=PodSpec)
    status: PodStatus = msgspec.field(default_factory=PodStatus)


class OldNodeMeta(msgspec.Struct, gc=False):
    name: str = ""
    annotations: dict[str, str] | None = None
    labels: msgspec.Raw = msgspec.Raw()


class OldNodeStatus(msgspec.Struct, gc=False):
    allocatable: dict[str, str] | None = None


class OldNodeSpec(msgspec.Struct, gc=False):
    unschedulable: bool = False
    taints: msgspec.Raw = msgspec.Raw()


class OldNode(msgspec.Struct, gc=False):
    metadata: OldNodeMeta = msgspec.field(default_factory=OldNodeMeta)
    spec: OldNodeSpec = msgspec.field(default_factory=OldNodeSpec)
    status: OldNodeStatus = msgspec.field(default_factory=OldNodeStatus)


class OldAddress(msgspec.Struct, gc=False):
    type: str = ""
    address: str = ""


class OldAnnotatorNodeStatus(msgspec.Struct, gc=False):
    addresses: list[OldAddress] | None = None
    allocatable: dict[str, str] | None = None


class OldAnnotatorMeta(msgspec.Struct, gc=False):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    labels: dict[str, str] | None = None


class OldAnnotatorNodeSpec(msgspec.Struct, gc=False):
    unschedulable: bool = False
    taints: list[Any] | None = None


class OldAnnotatorNode(msgspec.Struct, gc=False):
    metadata: OldAnnotatorMeta = msgspec.field(default_factory=OldAnnotatorMeta)
    spec: OldAnnotatorNodeSpec = msgspec.field(default_factory=OldAnnotatorNodeSpec)
    status: OldAnnotatorNodeStatus = msgspec.field(default_factory=OldAnnotatorNodeStatus)


class OldJobMeta(msgspec.Struct, gc=False):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    creationTimestamp: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class OldJobCondition(msgspec.Struct, gc=False):
    type: str = ""
    status: str = ""
    reason: str | None = None
    message: str | None = None
    lastTransitionTime: str | None = None


class OldJobSpec(msgspec.Struct, gc=False):
    completions: int | None = None
    parallelism: int | None = None
    backoffLimit: int | None = None


class OldJobStatus(msgspec.Struct, gc=False):
    active: int = 0
    succeeded: int = 0
    failed: int = 0
    ready: int | None = None
    startTime: str | None = None
    completionTime: str | None = None
    conditions: list[OldJobCondition] | None = None


class OldJob(msgspec.Struct, gc=False):
    metadata: OldJobMeta = msgspec.field(default_factory=OldJobMeta)
    spec: OldJobSpec = msgspec.field(default_factory=OldJobSpec)
    status: OldJobStatus = msgspec.field(default_factory=OldJobStatus)


OLD_POD = msgspec.json.Decoder(OldPod)
OLD_NODE = msgspec.json.Decoder(OldNode)
OLD_ANNOTATOR_NODE = msgspec.json.Decoder(OldAnnotatorNode)
OLD_JOB = msgspec.json.Decoder(OldJob)


def old_annotator_read(node: OldAnnotatorNode) -> None:
    """What the annotator's node store did with each node before (``Node.capacity`` and
    ``Node.addresses``)."""
    FitNode(
        name=node.metadata.name,
        allocatable=node.status.allocatable or {},
        labels=node.metadata.labels or {},
        taints=taints_of(node.spec.taints),
        unschedulable=node.spec.unschedulable,
    )
    found = node.status.addresses or ()
    NodeAddresses(
        name=node.metadata.name,
        internal_ips=tuple(a.address for a in found if a.type == "InternalIP"),
        hostnames=tuple(a.address for a in found if a.type == "Hostname"),
    )


def now_annotator_read(node: Any) -> None:
    node.fit()
    annotator_objects.addresses_of(node)


# -- bodies ----------------------------------------------------------------------------------


def pod_bodies(count: int) -> list[bytes]:
    out = []
    for i in range(count):
        body = payloads.pod(f"web-{i}", f"ns-{i % 50}")
        body["metadata"]["annotations"] = {
            "kubectl.kubernetes.io/restartedAt": "2026-11-20T10:00:00Z",
            "prometheus.io/scrape": "true",
            "prometheus.io/port": "9090",
        }
        out.append(msgspec.json.encode(body))
    return out


def node_bodies(count: int) -> list[bytes]:
    rules = LoadRules.from_policy(default_policy())
    taints = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    out = []
    for i, node in enumerate(payloads.cluster(rules, count, datetime.now(UTC))):
        if i % 10 == 0:
            node["spec"]["taints"] = taints
        out.append(msgspec.json.encode(node))
    return out


def job_bodies(count: int) -> list[bytes]:
    out = []
    for i in range(count):
        body = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": f"work-{i:08x}",
                "namespace": "batch",
                "uid": f"uid-{i}",
                "resourceVersion": str(1000 + i),
                "generation": 1,
                "creationTimestamp": "2026-11-22T02:00:00Z",
                "labels": {"loadsched.io/template": "work", "app": "work"},
                "annotations": {"loadsched.io/key": f"key-{i}"},
                "managedFields": [{"manager": "loadsched", "operation": "Update"}],
            },
            "spec": {"completions": 1, "parallelism": 1, "backoffLimit": 6, "template": {}},
            "status": {"active": 1, "ready": 0, "startTime": "2026-11-22T02:00:01Z"},
        }
        out.append(msgspec.json.encode(body))
    return out


# -- timing ----------------------------------------------------------------------------------


def block_ms(work: Callable[[bytes], object], bodies: Sequence[bytes]) -> float:
    started = time.perf_counter()
    for body in bodies:
        work(body)
    return (time.perf_counter() - started) * 1000


def compare(
    before: Callable[[bytes], object],
    now: Callable[[bytes], object],
    bodies: Sequence[bytes],
    blocks: int,
) -> tuple[float, float]:
    """Best block of each, the two alternating (``now`` first every other block)."""
    b: list[float] = []
    n: list[float] = []
    for i in range(blocks):
        if i % 2:
            n.append(block_ms(now, bodies))
            b.append(block_ms(before, bodies))
        else:
            b.append(block_ms(before, bodies))
            n.append(block_ms(now, bodies))
    return min(b), min(n)


def main() -> int:
    quick = quick_option(__doc__)
    blocks = 6 if quick else 20
    pods = pod_bodies(100_000)
    nodes = node_bodies(5000)
    jobs = job_bodies(10_000)
    rows: list[tuple[str, Callable[[bytes], object], Callable[[bytes], object], list[bytes]]] = [
        ("pods 100k", OLD_POD.decode, POD_DECODER.decode, pods),
        ("extender nodes 5k", OLD_NODE.decode, NODE_DECODER.decode, nodes),
        (
            "extender nodes 5k + fit",
            lambda b: fit_old(OLD_NODE.decode(b)),
            lambda b: NODE_DECODER.decode(b).fit(),
            nodes,
        ),
        (
            "annotator nodes 5k + read",
            lambda b: old_annotator_read(OLD_ANNOTATOR_NODE.decode(b)),
            lambda b: now_annotator_read(annotator_objects.NODE_DECODER.decode(b)),
            nodes,
        ),
        ("jobs 10k", OLD_JOB.decode, JOB_DECODER.decode, jobs),
    ]
    print(f"decode, ms per block (best of {blocks}, before and now alternating)")
    print(f"{'objects':<26} {'before':>9} {'now':>9} {'now/before':>11}")
    for name, before, now, bodies in rows:
        b, n = compare(before, now, bodies, blocks)
        print(f"{name:<26} {b:9.1f} {n:9.1f} {n / b:10.3f}x")
    return 0


def fit_old(node: OldNode) -> None:
    """The extender's node-watch read before (``node_view.fit_node``)."""
    labels = msgspec.json.decode(node.metadata.labels) if node.metadata.labels else None
    taints = msgspec.json.decode(node.spec.taints) if node.spec.taints else None
    FitNode(
        name=node.metadata.name,
        allocatable=node.status.allocatable or {},
        labels={k: v for k, v in labels.items() if isinstance(v, str)}
        if isinstance(labels, dict)
        else {},
        taints=taints_of({"taints": taints}),
        unschedulable=node.spec.unschedulable,
    )


if __name__ == "__main__":
    raise SystemExit(main())
