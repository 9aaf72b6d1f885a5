"""Loaded nodes with pods bound to them since their sample, for the extender's estimation: the
policy, the bodies, the fake cluster, and asking the extender's verbs over HTTP."""

from datetime import datetime, timedelta
from typing import Any

import httpx

from shared.annotations import encode_metric
from shared.policy import DynamicSchedulerPolicy, parse_policy
from tests import payloads
from tests.fakes.clock import NOW
from tests.fakes.extender_calls import wait_ready
from tests.fakes.kube import FakeCluster, FakeCollection

SAMPLED = NOW - timedelta(minutes=1)


def the_policy(**spec: Any) -> DynamicSchedulerPolicy:
    base: dict[str, Any] = {
        "syncPolicy": [
            {"name": "cpu_usage_avg_5m", "period": "3m"},
            {"name": "cpu_usage_stddev_5m", "period": "3m"},
            {"name": "mem_usage_avg_5m", "period": "3m"},
        ],
        "predicate": [{"name": "cpu_usage_avg_5m", "maxLimitPecent": 0.65}],
        "priority": [{"name": "cpu_usage_avg_5m", "weight": 1}],
    }
    base.update(spec)
    return parse_policy({"spec": base})


def bound_pod(name: str, node: str, at: datetime | None, cpu: str = "1") -> dict[str, Any]:
    body = payloads.pod(name)
    body["metadata"]["uid"] = f"uid-{name}"
    body["spec"]["nodeName"] = node
    body["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu, "memory": "1Gi"}}
    if at is not None:
        body["status"] = {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "True",
                    "lastTransitionTime": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                }
            ],
        }
    return body


def node(name: str, cpu: float, index: int, **extra: float) -> dict[str, Any]:
    annotations = {"cpu_usage_avg_5m": encode_metric(cpu, SAMPLED)}
    annotations.update({k: encode_metric(v, SAMPLED) for k, v in extra.items()})
    return payloads.node(name, annotations, index=index)


def cluster(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> FakeCluster:
    return FakeCluster(
        {
            "/api/v1/nodes": FakeCollection([(5, nodes)]),
            "/api/v1/pods": FakeCollection([(5, pods)]),
        }
    )


async def post(client: httpx.AsyncClient, verb: str, body: dict[str, Any]) -> Any:
    response = await client.post(f"/{verb}", content=payloads.encode(body))
    assert response.status_code == 200, response.text
    return response.json()


async def ready(client: httpx.AsyncClient) -> None:
    await wait_ready(client, "/readyz/scheduling")


BURST = [bound_pod(f"p{i}", "n1", NOW - timedelta(seconds=20)) for i in range(4)]
"""Four 1-core pods bound to n1 after its sample: 4 × 0.85 / 8 cores = 0.425 more."""


def placing(
    name: str, cpu: str, limit: str | None = None, *, daemonset: bool = False
) -> dict[str, Any]:
    body = payloads.pod(name, daemonset=daemonset)
    resources: dict[str, Any] = {"requests": {"cpu": cpu, "memory": "256Mi"}}
    if limit is not None:
        resources["limits"] = {"cpu": limit}
    body["spec"]["containers"][0]["resources"] = resources
    return body


def filter_args(mode: str, nodes: list[dict[str, Any]], pod: dict[str, Any]) -> dict[str, Any]:
    if mode == "names":
        return payloads.names_args([n["metadata"]["name"] for n in nodes], pod)
    return payloads.full_args(nodes, pod)


def passed(mode: str, result: dict[str, Any]) -> list[str]:
    if mode == "names":
        return list(result["NodeNames"])
    return [n["metadata"]["name"] for n in result["Nodes"]["items"]]
