"""A cluster with elastic quotas: two nodes of 7 CPU, quotas ``a`` and ``b``, and the pods of
their story (``a`` borrows 2 CPU)."""

from typing import Any

from tests.fakes.kube import FakeCluster, FakeCollection
from tests.payloads import node
from tests.quota_objects import elastic_quota, quota_pod

# 7 CPU for the story's pods, plus room for a small lower-priority pod without a quota
SEVEN_CPU = {"cpu": "7500m", "memory": "32Gi", "pods": "110"}


def story_node(name: str, index: int) -> dict[str, Any]:
    body = node(name, index=index, images=0)
    body["status"]["allocatable"] = SEVEN_CPU
    return body


def story_pods() -> list[dict[str, Any]]:
    """A borrows 2 CPU: job and notebook pods one of each per node; B's job-1 on n1."""
    return [
        quota_pod("job-0", "a", 2, node="n1"),
        quota_pod("nb-0", "a", 2, node="n1", priority=1000000, never=True),
        quota_pod("job-1-b", "b", 3, node="n1"),
        quota_pod("job-1", "a", 2, node="n2", created="2026-11-22T10:01:00Z"),
        quota_pod("nb-1", "a", 2, node="n2", priority=1000000, never=True),
        quota_pod("low", "other", "500m", node="n1", priority=-10),
        quota_pod("low", "other2", "500m", node="n2", priority=-10),
    ]


def story_cluster(pods: list[dict[str, Any]] | None = None) -> FakeCluster:
    return FakeCluster(
        {
            "/api/v1/nodes": FakeCollection([(5, [story_node("n1", 1), story_node("n2", 2)])]),
            "/api/v1/pods": FakeCollection([(5, pods if pods is not None else story_pods())]),
            "/apis/scheduling.x-k8s.io/v1alpha1/elasticquotas": FakeCollection(
                [
                    (
                        5,
                        [
                            elastic_quota("a", min={"cpu": 6}, max={"cpu": 10}),
                            elastic_quota("b", min={"cpu": 12}, max={"cpu": 14}),
                        ],
                    )
                ]
            ),
        }
    )
