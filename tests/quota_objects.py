"""Pods and ElasticQuotas as the API server serves them, for quota tests and the benchmark."""

from __future__ import annotations

from typing import Any


def quota_pod(
    name: str,
    namespace: str,
    cpu: str | int,
    *,
    node: str = "",
    nominated: str = "",
    priority: int = 0,
    created: str = "2026-11-22T10:00:00Z",
    never: bool = False,
    phase: str = "Pending",
    unschedulable: bool = False,
    uid: str | None = None,
    rv: int = 1,
) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase}
    if nominated:
        status["nominatedNodeName"] = nominated
    if unschedulable:
        status["conditions"] = [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
        ]
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": str(cpu)}}}],
        "priority": priority,
        "preemptionPolicy": "Never" if never else "PreemptLowerPriority",
    }
    if node:
        spec["nodeName"] = node
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid or f"uid-{namespace}-{name}",
            "resourceVersion": str(rv),
            "creationTimestamp": created,
        },
        "spec": spec,
        "status": status,
    }


def elastic_quota(
    namespace: str,
    *,
    min: dict[str, Any] | None = None,  # noqa: A002 - the CRD's field name
    max: dict[str, Any] | None = None,  # noqa: A002
    name: str = "quota",
    rv: int = 1,
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if min is not None:
        spec["min"] = min
    if max is not None:
        spec["max"] = max
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": name, "namespace": namespace, "resourceVersion": str(rv)},
        "spec": spec,
    }
