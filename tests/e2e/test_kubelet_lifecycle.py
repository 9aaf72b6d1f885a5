"""What a kubelet does, done by kwok on the sandbox's nodes, with the control plane's own
controllers reacting: a node that stops renewing its Lease goes NotReady and the taint manager
evicts its pods, which their ReplicaSet replaces through loadsched; evictions through the
Eviction API are graceful and honour PodDisruptionBudgets. No test here writes a pod's status;
only the clean-up of a node that is gone forces deletes, as an operator does."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from kubernetes import client as k8s
from kubernetes import watch

from sandbox import kwok
from sandbox.cluster import Sandbox
from sandbox.processes import wait_for
from sandbox.specs import NodeSpec
from tests.e2e.conftest import LOADS, load_annotations
from tests.e2e.objects import meta_of, name_of, sent_as, spec_of, status_of

pytestmark = pytest.mark.e2e

NAMESPACE = "lifecycle"
LOST = NodeSpec("lost-1", "127.0.0.30")
COOL = "node-5"
LOADS_ONE_COOL = {name: 0.12 if name == COOL else max(usage, 0.80) for name, usage in LOADS.items()}
"""Every node but one over the 0.65 limits: where the replacements land is loadsched's doing."""


@pytest.fixture(scope="module")
def namespace(sandbox: Sandbox) -> Iterator[str]:
    sandbox.core.create_namespace(sent_as(k8s.V1Namespace, {"metadata": {"name": NAMESPACE}}))
    yield NAMESPACE
    sandbox.core.delete_namespace(NAMESPACE)


def replica_set(
    name: str, replicas: int, *, scheduler: str, stops_after: str = "500ms", **spec: Any
) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": kwok.lifecycle(stops_after=stops_after),
                },
                "spec": {
                    "schedulerName": scheduler,
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": "100m", "memory": "32Mi"}},
                        }
                    ],
                    **spec,
                },
            },
        },
    }


def pods(sandbox: Sandbox, app: str) -> list[k8s.V1Pod]:
    return list(sandbox.core.list_namespaced_pod(NAMESPACE, label_selector=f"app={app}").items)


def running(sandbox: Sandbox, app: str) -> list[k8s.V1Pod]:
    """Pods of ``app`` that kwok runs and nobody is deleting."""
    return [
        p
        for p in pods(sandbox, app)
        if status_of(p).phase == "Running" and not meta_of(p).deletion_timestamp
    ]


def ready(node: k8s.V1Node) -> str:
    return next((c.status for c in status_of(node).conditions or () if c.type == "Ready"), "")


def test_a_lost_node_s_pods_are_replaced_on_nodes_under_their_limits(
    sandbox: Sandbox,
    schedulers: dict[str, str],
    extender: str,
    namespace: str,
    set_loads: Callable[[dict[str, float]], None],
) -> None:
    apps = k8s.AppsV1Api(sandbox.api)
    set_loads(LOADS_ONE_COOL)
    sandbox.create_nodes([LOST])
    sandbox.annotate_node(LOST.name, load_annotations(0.05))
    try:
        # the least loaded node is preferred; the pods tolerate an unreachable node 5 s
        tolerate = [
            {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5}
            for key in ("node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready")
        ]
        prefer_lost = {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "preference": {
                            "matchExpressions": [
                                {
                                    "key": "kubernetes.io/hostname",
                                    "operator": "In",
                                    "values": [LOST.name],
                                }
                            ]
                        },
                    }
                ]
            }
        }
        body = replica_set(
            "moved", 3, scheduler="loadsched", tolerations=tolerate, affinity=prefer_lost
        )
        apps.create_namespaced_replica_set(namespace, sent_as(k8s.V1ReplicaSet, body))
        wait_for(lambda: len(running(sandbox, "moved")) == 3, timeout=60, what="3 pods running")
        first = {name_of(p): spec_of(p).node_name for p in running(sandbox, "moved")}
        on_lost = {name for name, node in first.items() if node == LOST.name}
        assert on_lost, first

        # kwok stops being its kubelet: no Lease renewals from now on
        sandbox.core.patch_node(LOST.name, {"metadata": {"labels": {kwok.KUBELET_LABEL: None}}})
        grace = sandbox.lease_seconds * 5 // 4
        wait_for(
            lambda: ready(sandbox.core.read_node(LOST.name)) == "Unknown",
            timeout=grace + 60,
            what=f"{LOST.name} NotReady after {grace}s without a Lease renewal",
        )

        def unreachable() -> set[str]:
            node = sandbox.core.read_node(LOST.name)
            keys = "node.kubernetes.io/unreachable"
            return {t.effect for t in spec_of(node).taints or () if t.key == keys}

        wait_for(
            lambda: unreachable() == {"NoExecute", "NoSchedule"},
            timeout=30,
            what=f"{LOST.name} tainted unreachable",
        )

        # the taint manager evicts them after their 5 s; nothing finishes the delete there
        def evicted() -> bool:
            gone = [p for p in pods(sandbox, "moved") if name_of(p) in on_lost]
            return len(gone) == len(on_lost) and all(meta_of(p).deletion_timestamp for p in gone)

        wait_for(evicted, timeout=60, what="the lost node's pods evicted")
        for pod in pods(sandbox, "moved"):
            if name_of(pod) in on_lost:
                conditions = status_of(pod).conditions
                reasons = {c.reason for c in conditions or () if c.type == "DisruptionTarget"}
                assert reasons == {"DeletionByTaintManager"}, conditions

        # the ReplicaSet replaces them, and loadsched puts them on the one node under the limits
        wait_for(lambda: len(running(sandbox, "moved")) == 3, timeout=60, what="3 pods again")
        now = {name_of(p): spec_of(p).node_name for p in running(sandbox, "moved")}
        replacements = {name: node for name, node in now.items() if name not in first}
        assert len(replacements) == len(on_lost)
        assert set(replacements.values()) == {COOL}, replacements
        # the extender is unharmed and still answers
        assert httpx.get(f"{extender}/readyz", timeout=5).status_code == 200
    finally:
        apps.delete_collection_namespaced_replica_set(namespace)
        sandbox.core.delete_node(LOST.name)
        # Deliberately forced, as an operator does for a node that is gone: no kubelet is
        # left to finish these deletes.
        for pod in sandbox.core.list_namespaced_pod(namespace).items:
            if spec_of(pod).node_name == LOST.name:
                sandbox.core.delete_namespaced_pod(name_of(pod), namespace, grace_period_seconds=0)
        wait_for(
            lambda: not sandbox.core.list_namespaced_pod(namespace).items,
            timeout=60,
            what="the lifecycle namespace empty",
        )


def evict(sandbox: Sandbox, name: str) -> int:
    """Ask the Eviction API to evict ``name``; the HTTP status of the answer."""
    body = sent_as(k8s.V1Eviction, {"metadata": {"name": name, "namespace": NAMESPACE}})
    try:
        sandbox.core.create_namespaced_pod_eviction(name, NAMESPACE, body)
    except k8s.ApiException as error:
        return int(error.status)
    return 201


def last_phases(sandbox: Sandbox, name: str, namespace: str, since: str) -> list[tuple[str, str]]:
    """The events of pod ``name`` after resource version ``since`` until it is deleted (at
    most 30 s), each as (type, phase)."""
    seen: list[tuple[str, str]] = []
    stream: Any = watch.Watch()  # type: ignore[no-untyped-call]  # kubernetes.watch is unannotated
    for event in stream.stream(
        sandbox.core.list_namespaced_pod,
        namespace,
        field_selector=f"metadata.name={name}",
        resource_version=since,
        timeout_seconds=30,
    ):
        seen.append((event["type"], event["object"].status.phase))
        if event["type"] == "DELETED":
            stream.stop()
    return seen


def test_evictions_are_graceful_honour_budgets_and_are_replaced(
    sandbox: Sandbox, schedulers: dict[str, str], namespace: str
) -> None:
    apps = k8s.AppsV1Api(sandbox.api)
    policy = k8s.PolicyV1Api(sandbox.api)
    # each pod takes 3 s to stop once asked, as a real program finishing its work
    apps.create_namespaced_replica_set(
        namespace,
        sent_as(
            k8s.V1ReplicaSet,
            replica_set("evicted", 3, scheduler="default-scheduler", stops_after="3s"),
        ),
    )
    try:
        wait_for(lambda: len(running(sandbox, "evicted")) == 3, timeout=60, what="3 pods")

        # no budget: the eviction is accepted and the pod stops gracefully
        victim = name_of(running(sandbox, "evicted")[0])
        assert evict(sandbox, victim) == 201
        stopping = sandbox.core.read_namespaced_pod(victim, namespace)
        assert meta_of(stopping).deletion_timestamp is not None
        assert spec_of(stopping).termination_grace_period_seconds == 30
        # as a kubelet, kwok reports it terminal after its 3 s (ended by SIGTERM: Failed), then
        # finishes the delete
        since = meta_of(stopping).resource_version
        assert since is not None
        seen = last_phases(sandbox, victim, namespace, since)
        assert seen[-2:] == [("MODIFIED", "Failed"), ("DELETED", "Failed")], seen
        wait_for(lambda: len(running(sandbox, "evicted")) == 3, timeout=60, what="a replacement")

        # a budget that allows no disruption refuses the eviction
        budget = {
            "metadata": {"name": "evicted"},
            "spec": {"minAvailable": 3, "selector": {"matchLabels": {"app": "evicted"}}},
        }
        policy.create_namespaced_pod_disruption_budget(
            namespace, sent_as(k8s.V1PodDisruptionBudget, budget)
        )

        def healthy(expected: int, pods_healthy: int = 3) -> Callable[[], bool]:
            def check() -> bool:
                status = policy.read_namespaced_pod_disruption_budget("evicted", namespace).status
                return (
                    status is not None
                    and status.current_healthy == pods_healthy
                    and status.disruptions_allowed == expected
                )

            return check

        wait_for(healthy(0), timeout=60, what="the budget to count 3 healthy pods")
        kept = name_of(running(sandbox, "evicted")[0])
        assert evict(sandbox, kept) == 429
        assert not meta_of(sandbox.core.read_namespaced_pod(kept, namespace)).deletion_timestamp

        # a budget of one: one eviction passes, a second one is refused. From here on the
        # replacements find no node, so the budget cannot count one of them healthy between
        # the two evictions (a replacement running in time would rightly let the second pass).
        apps.patch_namespaced_replica_set(
            "evicted",
            namespace,
            {"spec": {"template": {"spec": {"nodeSelector": {"loadsched.io/test": "nowhere"}}}}},
        )

        def template_seen() -> bool:
            replicas = apps.read_namespaced_replica_set("evicted", namespace)
            observed = status_of(replicas).observed_generation
            return observed is not None and observed >= (meta_of(replicas).generation or 0)

        wait_for(template_seen, timeout=60, what="the ReplicaSet to see its new template")
        policy.patch_namespaced_pod_disruption_budget(
            "evicted", namespace, {"spec": {"minAvailable": 2}}
        )
        wait_for(healthy(1), timeout=60, what="the budget to allow one disruption")
        first, second = (name_of(p) for p in running(sandbox, "evicted")[:2])
        assert evict(sandbox, first) == 201
        assert evict(sandbox, second) == 429
        assert not meta_of(sandbox.core.read_namespaced_pod(second, namespace)).deletion_timestamp

        def replacement_waiting() -> bool:
            return any(
                status_of(p).phase == "Pending" and not spec_of(p).node_name
                for p in pods(sandbox, "evicted")
            )

        wait_for(replacement_waiting, timeout=60, what="a replacement, waiting for a node")
        # once the budget has counted again, the waiting replacement is not healthy
        wait_for(healthy(0, pods_healthy=2), timeout=60, what="the budget to count 2 healthy")
        assert evict(sandbox, second) == 429
    finally:
        policy.delete_collection_namespaced_pod_disruption_budget(namespace)
        apps.delete_collection_namespaced_replica_set(namespace)
        wait_for(
            lambda: not pods(sandbox, "evicted"), timeout=60, what="the evicted app's pods gone"
        )
