"""Plain records for the sandbox: a Node to register, a pod body, a kube-scheduler's extender
entry, the handle of a started kube-scheduler. No I/O."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox import kwok

PAUSE_IMAGE = "registry.k8s.io/pause:3.10"


@dataclass(frozen=True)
class NodeSpec:
    name: str
    ip: str
    cpu: str = "8"
    memory: str = "32Gi"
    pods: str = "110"
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        resources = {
            "cpu": self.cpu,
            "memory": self.memory,
            "pods": self.pods,
            "ephemeral-storage": "100Gi",
        }
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "labels": {
                    "kubernetes.io/hostname": self.name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    kwok.KUBELET_LABEL: "kwok",
                    **self.labels,
                },
                "annotations": dict(self.annotations),
            },
            "status": {
                "capacity": resources,
                "allocatable": resources,
                "addresses": [
                    {"type": "InternalIP", "address": self.ip},
                    {"type": "Hostname", "address": self.name},
                ],
            },
        }


@dataclass(frozen=True)
class ExtenderSpec:
    """How a kube-scheduler calls the extender (its KubeSchedulerConfiguration entry)."""

    url: str
    node_cache_capable: bool = True
    ignorable: bool = True
    weight: int = 5
    preempt: bool = True
    http_timeout: str = "5s"
    bind: bool = False
    """kube-scheduler delegates binding to the extender (``bindVerb``)."""

    def config(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "urlPrefix": self.url,
            "filterVerb": "filter",
            "prioritizeVerb": "prioritize",
            "weight": self.weight,
            "nodeCacheCapable": self.node_cache_capable,
            "ignorable": self.ignorable,
            "enableHTTPS": False,
            "httpTimeout": self.http_timeout,
        }
        if self.preempt:
            entry["preemptVerb"] = "preempt"
        if self.bind:
            entry["bindVerb"] = "bind"
        return entry


@dataclass
class SchedulerHandle:
    name: str
    scheduler_name: str
    config: Path
    port: int
    process: Any


def pod_body(
    name: str,
    *,
    scheduler_name: str,
    cpu: str = "100m",
    memory: str = "64Mi",
    labels: dict[str, str] | None = None,
    namespace: str = "default",
    priority_class: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": scheduler_name,
        "containers": [
            {
                "name": "main",
                "image": PAUSE_IMAGE,
                "resources": {"requests": {"cpu": cpu, "memory": memory}},
            }
        ],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": spec,
    }
