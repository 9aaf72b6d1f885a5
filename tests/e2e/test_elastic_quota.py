"""Elastic quota end to end: the real kube-scheduler calling the extender (with
--elastic-quota), the annotator's quota controller, and the real Job controller.

The user story: 2 schedulable nodes × 7 CPU. Namespace A has {min 6, max 10} CPU, B has
{min 12, max 14}. A runs "job" (a Job, 2 × 2 CPU, default priority) and "notebook" (2 × 2 CPU,
PriorityClass 1000000 with preemptionPolicy Never). B runs job-1 (3 CPU), then job-2 (5 CPU).
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from sandbox.cluster import ExtenderSpec, NodeSpec, Sandbox
from sandbox.processes import wait_for

pytestmark = pytest.mark.e2e

CRD = Path(__file__).resolve().parents[2] / "charts" / "loadsched" / "crds" / "elasticquota.yaml"
A, B, C = "quota-a", "quota-b", "quota-c"
SCHEDULER = "loadsched-quota"
POOL = {"loadsched.test/pool": "quota"}
TAINT = {"key": "loadsched.test/pool", "value": "quota", "effect": "NoSchedule"}
NODES = [
    NodeSpec("quota-1", "127.0.0.31", cpu="7", labels=POOL),
    NodeSpec("quota-2", "127.0.0.32", cpu="7", labels=POOL),
]
GROUP, VERSION, PLURAL = "scheduling.x-k8s.io", "v1alpha1", "elasticquotas"


def pod_spec(cpu: str, **extra: Any) -> dict[str, Any]:
    return {
        "schedulerName": SCHEDULER,
        "nodeSelector": POOL,
        "tolerations": [{**TAINT, "operator": "Equal"}],
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": "main",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": cpu, "memory": "16Mi"}},
            }
        ],
        **extra,
    }


def pod(name: str, namespace: str, cpu: str, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "spec": pod_spec(cpu, **extra),
    }


@pytest.fixture(scope="module")
def quota_cluster(sandbox: Sandbox) -> Iterator[dict[str, str]]:
    sandbox.install_crd(CRD)
    bodies = []
    for spec in NODES:
        body = spec.body()
        body["spec"] = {"taints": [TAINT]}
        bodies.append(body)
    for body in bodies:
        sandbox.core.create_node(body)
    for namespace in (A, B, C):
        sandbox.core.create_namespace({"metadata": {"name": namespace}})
    custom = k8s.CustomObjectsApi(sandbox.api)
    for namespace, minimum, maximum in ((A, 6, 10), (B, 12, 14)):
        custom.create_namespaced_custom_object(
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "ElasticQuota",
                "metadata": {"name": "quota", "namespace": namespace},
                "spec": {"min": {"cpu": minimum}, "max": {"cpu": maximum}},
            },
        )
    k8s.SchedulingV1Api(sandbox.api).create_priority_class(
        {
            "metadata": {"name": "online"},
            "value": 1000000,
            "preemptionPolicy": "Never",
            "description": "online services: never preempt anyone",
        }
    )
    extender = sandbox.start_extender(name="extender-quota", args=["--elastic-quota"])
    sandbox.start_scheduler(
        SCHEDULER, scheduler_name=SCHEDULER, extender=ExtenderSpec(extender, ignorable=False)
    )
    annotator = sandbox.start_annotator(
        prometheus_url="http://127.0.0.1:9",  # load sync is not under test here
        name="annotator-quota",
        args=[
            "--elastic-quota",
            "--no-leader-elect",
            "--eviction-grace-seconds",
            "0",
            "--quota-period",
            "1",
        ],
    )
    yield {"extender": extender, "annotator": annotator}
    sandbox.stop_scheduler(SCHEDULER)
    for name in ("annotator-quota", "extender-quota"):
        sandbox.supervisor.stop_named(name)
    for namespace in (A, B, C):
        sandbox.core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
    for spec in NODES:
        sandbox.core.delete_node(spec.name)


def bound_pods(sandbox: Sandbox, namespace: str) -> dict[str, tuple[str, str | None]]:
    """name → (uid, node) of the namespace's pods that are not being deleted."""
    pods = sandbox.core.list_namespaced_pod(namespace).items
    return {
        p.metadata.name: (p.metadata.uid, p.spec.node_name)
        for p in pods
        if p.metadata and p.spec and not p.metadata.deletion_timestamp
    }


def wait_bound(sandbox: Sandbox, namespace: str, names: list[str] | str, count: int) -> None:
    def done() -> bool:
        pods = bound_pods(sandbox, namespace)
        prefix = names if isinstance(names, str) else None
        chosen = [
            node
            for name, (_, node) in pods.items()
            if (name.startswith(prefix) if prefix else name in names)
        ]
        return sum(1 for node in chosen if node) >= count

    wait_for(done, timeout=90, what=f"{count} pods {names} bound in {namespace}", interval=0.5)


def scheduling_message(sandbox: Sandbox, namespace: str, name: str) -> str:
    status = sandbox.core.read_namespaced_pod(name, namespace).status
    for condition in (status.conditions if status else None) or ():
        if condition.type == "PodScheduled" and condition.status == "False":
            return condition.message or ""
    return ""


def metric(url: str, name: str) -> float:
    text = urllib.request.urlopen(f"{url}/metrics", timeout=5).read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and not line.startswith("#"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def used_cpu(sandbox: Sandbox, namespace: str) -> str | None:
    quota = k8s.CustomObjectsApi(sandbox.api).get_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "quota"
    )
    return ((quota.get("status") or {}).get("used") or {}).get("cpu")


def events_for(sandbox: Sandbox, namespace: str, name: str) -> list[tuple[str, str]]:
    events = sandbox.core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={name}"
    ).items
    return [(e.reason or "", e.message or "") for e in events]


def test_the_user_story(sandbox: Sandbox, quota_cluster: dict[str, str]) -> None:
    annotator = quota_cluster["annotator"]
    batch = k8s.BatchV1Api(sandbox.api)
    batch.create_namespaced_job(
        A,
        {
            "metadata": {"name": "job"},
            "spec": {
                "parallelism": 2,
                "completions": 2,
                "backoffLimit": 20,
                "template": {"spec": pod_spec("2", restartPolicy="Never")},
            },
        },
    )
    wait_bound(sandbox, A, "job-", 2)
    sandbox.create_pods(
        [pod(f"notebook-{i}", A, "2", priorityClassName="online") for i in range(2)]
    )
    # the second notebook pod borrows: A is at 8 > min 6, and B leaves its min unused
    wait_bound(sandbox, A, ["notebook-0", "notebook-1"], 2)
    wait_for(lambda: used_cpu(sandbox, A) == "8", timeout=30, what="status.used of A = 8")
    before = bound_pods(sandbox, A)
    assert {node for _, node in before.values()} == {"quota-1", "quota-2"}

    # max is enforced, with the numbers in the pod's condition
    sandbox.create_pods([pod("over-max", A, "3")])
    expected = f"elastic quota of namespace {A}: cpu used + request 11 > max 10"
    wait_for(
        lambda: expected in scheduling_message(sandbox, A, "over-max"),
        timeout=60,
        what="over-max to be refused by the quota",
    )
    sandbox.core.delete_namespaced_pod("over-max", A, grace_period_seconds=0)
    # a namespace without a quota is unaffected
    sandbox.create_pods([pod("free", C, "1")])
    wait_bound(sandbox, C, ["free"], 1)
    sandbox.core.delete_namespaced_pod("free", C, grace_period_seconds=0)

    # a borrower is not evicted while the lender has no waiting pods
    passes = metric(annotator, "loadsched_annotator_quota_passes_total")
    wait_for(
        lambda: metric(annotator, "loadsched_annotator_quota_passes_total") >= passes + 3,
        timeout=30,
        what="three more quota passes",
    )
    assert bound_pods(sandbox, A) == before
    assert metric(annotator, "loadsched_annotator_reclaim_evictions_total") == 0  # any result

    sandbox.create_pods([pod("job-1", B, "3")])
    wait_bound(sandbox, B, ["job-1"], 1)
    sandbox.create_pods([pod("job-2", B, "5")])
    wait_bound(sandbox, B, ["job-2"], 1)

    after = bound_pods(sandbox, A)
    gone = {name for name, (uid, _) in before.items() if after.get(name, ("",))[0] != uid}
    assert len(gone) == 1 and next(iter(gone)).startswith("job-"), (gone, after)
    assert all(after[f"notebook-{i}"] == before[f"notebook-{i}"] for i in range(2))
    victim = next(iter(gone))
    assert any(reason == "Reclaimed" for reason, _ in events_for(sandbox, A, victim))
    assert any(reason == "Reclaiming" for reason, _ in events_for(sandbox, B, "job-2"))

    # the Job controller's replacement pod waits Pending: A would borrow, and no room is left
    def replacement() -> str | None:
        for name, (_, node) in bound_pods(sandbox, A).items():
            if name.startswith("job-") and name not in before and node is None:
                return name
        return None

    wait_for(lambda: replacement() is not None, timeout=60, what="a replacement job pod")
    name = replacement()
    assert name is not None
    wait_for(
        lambda: "Insufficient cpu" in scheduling_message(sandbox, A, name),
        timeout=60,
        what="the replacement to be found unschedulable",
    )
    wait_for(lambda: used_cpu(sandbox, B) == "8", timeout=30, what="status.used of B = 8")
    assert used_cpu(sandbox, A) == "6"
    assert metric(annotator, 'loadsched_annotator_reclaim_evictions_total{result="evicted"}') == 1
