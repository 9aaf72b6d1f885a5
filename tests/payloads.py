"""Request bodies in exactly the shape kube-scheduler sends them (Go field names as keys,
``null`` for the unused one of ``Nodes``/``NodeNames``), with real-looking node objects:
labels, conditions, addresses and ~40 images in status, as a kubelet reports them.

Shared by the contract tests and ``bench/extender.py``.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from shared.annotations import encode_hot_value, encode_metric
from shared.load_model import LoadRules

IMAGES_PER_NODE = 40


def pod(
    name: str = "web-0", namespace: str = "default", *, daemonset: bool = False
) -> dict[str, Any]:
    owner = (
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "name": "agent",
            "uid": "ds-1",
            "controller": True,
        }
        if daemonset
        else {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": "web-6d4cf56db6",
            "uid": "rs-1",
            "controller": True,
        }
    )
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{namespace}-{name}",
            "resourceVersion": "4711",
            "creationTimestamp": "2026-11-22T02:00:00Z",
            "labels": {"app": "web", "pod-template-hash": "6d4cf56db6"},
            "ownerReferences": [owner],
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update"}],
        },
        "spec": {
            "containers": [
                {
                    "name": "web",
                    "image": "registry.example/web:1.2.3",
                    "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}},
                    "terminationMessagePath": "/dev/termination-log",
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
            "restartPolicy": "Always",
            "schedulerName": "loadsched",
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    }


def node(
    name: str,
    annotations: Mapping[str, str] | None = None,
    *,
    index: int = 1,
    images: int = IMAGES_PER_NODE,
) -> dict[str, Any]:
    ip = f"10.{(index >> 16) & 255}.{(index >> 8) & 255}.{index & 255}"
    return {
        "metadata": {
            "name": name,
            "uid": f"node-uid-{index}",
            "resourceVersion": str(100000 + index),
            "creationTimestamp": "2026-10-01T08:00:00Z",
            "labels": {
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": "m5.2xlarge",
                "topology.kubernetes.io/region": "eu-west-1",
                "topology.kubernetes.io/zone": f"eu-west-1{'abc'[index % 3]}",
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                **(annotations or {}),
            },
            "managedFields": [
                {"manager": "kubelet", "operation": "Update", "time": "2026-11-22T01:00:00Z"}
            ],
        },
        "spec": {
            "podCIDR": f"10.244.{index & 255}.0/24",
            "providerID": f"aws:///eu-west-1a/i-{index:016x}",
        },
        "status": {
            "capacity": {
                "cpu": "8",
                "ephemeral-storage": "103079844Ki",
                "memory": "32408708Ki",
                "pods": "110",
            },
            "allocatable": {
                "cpu": "7910m",
                "ephemeral-storage": "94998384074",
                "memory": "31391876Ki",
                "pods": "110",
            },
            "conditions": [
                {
                    "type": kind,
                    "status": "True" if kind == "Ready" else "False",
                    "lastHeartbeatTime": "2026-11-22T02:00:00Z",
                    "lastTransitionTime": "2026-10-01T08:00:00Z",
                    "reason": f"Kubelet{kind}",
                    "message": f"kubelet reports {kind}",
                }
                for kind in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")
            ],
            "addresses": [
                {"type": "InternalIP", "address": ip},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": f"{index:032x}",
                "systemUUID": f"ec2{index:029x}",
                "bootID": f"{index:08x}-0000-4000-8000-000000000000",
                "kernelVersion": "6.1.0-27-cloud-amd64",
                "osImage": "Debian GNU/Linux 12 (bookworm)",
                "containerRuntimeVersion": "containerd://1.7.22",
                "kubeletVersion": "v1.34.4",
                "kubeProxyVersion": "v1.34.4",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
            "images": [
                {
                    "names": [
                        f"registry.example/team-{i % 7}/service-{i}@sha256:{(index * 7919 + i):064x}",
                        f"registry.example/team-{i % 7}/service-{i}:v{i}.{index % 10}.0",
                    ],
                    "sizeBytes": 50_000_000 + i * 1_234_567,
                }
                for i in range(images)
            ],
        },
    }


def load_annotations(
    rules: LoadRules, usage: float, now: datetime, *, hot: int | None = None
) -> dict[str, str]:
    """Every metric the rules read at ``usage``, stamped ``now``; the hot value if given."""
    out = {
        key: encode_metric(usage, now, rules.zone) for key in rules.keys if key != "node_hot_value"
    }
    if hot is not None:
        out["node_hot_value"] = encode_hot_value(hot, now, rules.zone)
    return out


def cluster(
    rules: LoadRules, count: int, now: datetime | None = None, *, seed: int = 7
) -> list[dict[str, Any]]:
    """``count`` nodes with usage spread over 0..0.9 (some above the default limits)."""
    now = now or datetime.now(UTC)
    rng = random.Random(seed)
    return [
        node(f"node-{i:05d}", load_annotations(rules, round(rng.uniform(0, 0.9), 3), now), index=i)
        for i in range(count)
    ]


def full_args(nodes: list[dict[str, Any]], the_pod: dict[str, Any] | None = None) -> dict[str, Any]:
    """``nodeCacheCapable: false``: the whole NodeList."""
    return {"Pod": the_pod or pod(), "Nodes": {"metadata": {}, "items": nodes}, "NodeNames": None}


def names_args(names: list[str], the_pod: dict[str, Any] | None = None) -> dict[str, Any]:
    """``nodeCacheCapable: true``: names only."""
    return {"Pod": the_pod or pod(), "Nodes": None, "NodeNames": names}


def encode(body: object) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()
