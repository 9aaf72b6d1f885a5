"""Nodes, pods, PriorityClasses and CRDs in the sandbox, through the admin's client: create
them, wait until they are usable, read where pods were bound, delete them."""

from __future__ import annotations

import json
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from sandbox.kubeconfigs import Kubeconfigs
from sandbox.processes import Supervisor, wait_for
from sandbox.specs import PAUSE_IMAGE, NodeSpec
from shared.quantity import parse_quantity


class ClusterObjects(Kubeconfigs):
    """The admin's API client (``api``, ``core``) and the objects the sandbox's users create
    and wait on; ``supervisor`` guards the waits."""

    supervisor: Supervisor
    _api: k8s.ApiClient | None

    @property
    def api(self) -> k8s.ApiClient:
        if self._api is None:
            self._api = k8s_config.new_client_from_config(config_file=str(self.kubeconfig))  # type: ignore[no-untyped-call]
        return self._api

    @property
    def core(self) -> k8s.CoreV1Api:
        return k8s.CoreV1Api(self.api)

    def create_nodes(
        self, nodes: Iterable[NodeSpec], *, workers: int = 8, timeout: float | None = None
    ) -> None:
        """Register ``nodes`` and wait until they take pods (``wait_schedulable``)."""
        core = self.core
        specs = list(nodes)
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(lambda spec: core.create_node(spec.body()), specs))
        self.wait_schedulable({spec.name for spec in specs}, timeout=timeout)

    def wait_schedulable(self, names: set[str], *, timeout: float | None = None) -> None:
        """Wait until kwok reports the nodes ``names`` Ready and the node lifecycle controller
        has lifted their ``not-ready`` taint: by default up to 2 minutes, or a tenth of a
        second a node for thousands."""
        core = self.core

        def schedulable() -> bool:
            # the watch cache's view, read as plain JSON: thousands of nodes decode fast
            listed: Any = core.list_node(resource_version="0", _preload_content=False)
            items = json.loads(listed.data)["items"]
            ready = {n["metadata"]["name"] for n in items if node_schedulable(n)}
            return names <= ready

        wait_for(
            schedulable,
            timeout=timeout or max(120.0, len(names) / 10),
            what=f"{len(names)} nodes Ready and untainted",
            # a list of thousands of nodes is work for the API server: ask less often
            interval=max(0.5, len(names) / 1000),
            guard=self.supervisor,
        )

    def annotate_node(self, name: str, annotations: dict[str, str | None]) -> None:
        self.core.patch_node(name, {"metadata": {"annotations": annotations}})

    def install_crd(self, manifest: Path) -> None:
        """Create the CustomResourceDefinition in ``manifest`` (if absent); wait until served."""
        extensions = k8s.ApiextensionsV1Api(self.api)
        body = yaml.safe_load(manifest.read_text())
        try:
            extensions.create_custom_resource_definition(body)
        except k8s.ApiException as e:
            if e.status != 409:
                raise
        name = body["metadata"]["name"]

        def established() -> bool:
            crd = extensions.read_custom_resource_definition(name)
            conditions = crd.status.conditions if crd.status else None
            return any(c.type == "Established" and c.status == "True" for c in conditions or ())

        wait_for(established, timeout=30, what=f"CRD {name} to be established")

    def create_priority_class(
        self, name: str, value: int, *, preemption_policy: str | None = None, description: str = ""
    ) -> None:
        """Create the PriorityClass (if absent) and wait until pods may name it: the API
        server's Priority admission reads PriorityClasses from its own informer, so a pod
        created just after one can be refused ("no PriorityClass with name ... was found").
        The wait asks admission itself, with a dry-run pod; any other refusal ends it at once."""
        body = k8s.V1PriorityClass(
            metadata=k8s.V1ObjectMeta(name=name),
            value=value,
            preemption_policy=preemption_policy,
            description=description or None,
        )
        try:
            k8s.SchedulingV1Api(self.api).create_priority_class(body)
        except k8s.ApiException as e:
            if e.status != 409:
                raise
        probe = k8s.V1Pod(
            metadata=k8s.V1ObjectMeta(generate_name="priority-probe-"),
            spec=k8s.V1PodSpec(
                containers=[k8s.V1Container(name="main", image=PAUSE_IMAGE)],
                priority_class_name=name,
            ),
        )

        refused: list[k8s.ApiException] = []

        def answered() -> bool:
            try:
                self.core.create_namespaced_pod("default", probe, dry_run="All")
            except k8s.ApiException as e:
                if e.status == 403 and "no PriorityClass with name" in str(e.body):
                    raise  # not in admission's informer yet: wait_for tries again, keeps it
                refused.append(e)
            return True

        wait_for(answered, timeout=30, what=f"admission to know PriorityClass {name}")
        if refused:
            raise refused[0]

    def create_pods(self, bodies: Iterable[dict[str, Any]], *, workers: int = 8) -> None:
        core = self.core
        with ThreadPoolExecutor(workers) as pool:
            list(
                pool.map(
                    lambda b: core.create_namespaced_pod(b["metadata"]["namespace"], b), bodies
                )
            )

    def placements(self, selector: str, namespace: str = "default") -> dict[str, str | None]:
        """Pod name → node name (``None`` while unbound) for pods matching ``selector``."""
        pods = self.core.list_namespaced_pod(namespace, label_selector=selector).items
        return {
            p.metadata.name: p.spec.node_name
            for p in pods
            if p.metadata and p.metadata.name and p.spec
        }

    def wait_bound(
        self, selector: str, count: int, *, timeout: float = 120, namespace: str = "default"
    ) -> dict[str, str]:
        """Wait until ``count`` pods matching ``selector`` are bound; their placements."""
        result: dict[str, str] = {}

        def bound() -> bool:
            nonlocal result
            placed = self.placements(selector, namespace)
            result = {pod: node for pod, node in placed.items() if node}
            return len(result) >= count

        try:
            wait_for(
                bound, timeout=timeout, what=f"{count} pods {selector!r} to be bound", interval=0.5
            )
        except TimeoutError as e:
            raise TimeoutError(f"{e}; {self.why_pending(selector, namespace)}") from None
        return result

    def why_pending(self, selector: str, namespace: str = "default") -> str:
        """For a failed wait: each unbound pod's last scheduling event, and what every node
        already runs (pods, CPU requested) and carries (loadsched annotations)."""
        unbound = [p for p, node in self.placements(selector, namespace).items() if not node]
        events = self.core.list_namespaced_event(namespace).items
        last: dict[str, str] = {}
        for ev in sorted(events, key=lambda e: str(e.last_timestamp or e.event_time or "")):
            if ev.involved_object and ev.involved_object.name in unbound:
                last[ev.involved_object.name] = f"{ev.reason}: {ev.message}"
        running: dict[str, list[str]] = {}
        for pod in self.core.list_pod_for_all_namespaces().items:
            if pod.spec and pod.spec.node_name and pod.metadata:
                cpu = sum(
                    float(parse_quantity((c.resources.requests or {}).get("cpu", "0")))
                    for c in pod.spec.containers
                    if c.resources
                )
                running.setdefault(pod.spec.node_name, []).append(
                    f"{pod.metadata.namespace}/{pod.metadata.name}({cpu:g})"
                )
        nodes = []
        for node in self.core.list_node().items:
            meta = node.metadata or k8s.V1ObjectMeta()
            notes = {
                k: v
                for k, v in (meta.annotations or {}).items()
                if "loadsched" in k or k.endswith("_5m") or "usage" in k
            }
            nodes.append(f"{meta.name}: pods {running.get(meta.name or '', [])}, {notes}")
        return f"unbound {len(unbound)}: {last or 'no events'}; nodes: " + " | ".join(nodes)

    def delete_pods(
        self, selector: str, namespace: str = "default", *, force: bool = False
    ) -> None:
        """Delete gracefully (kwok finishes each delete) and wait until they are gone: kwok
        writes twice per pod (terminal status, then the final delete), so thousands of pods on a
        busy machine take minutes. ``force``: gone at once (grace period 0, as ``kubectl delete
        --force``), for benches that only clear a batch before the next."""
        self.core.delete_collection_namespaced_pod(
            namespace, label_selector=selector, grace_period_seconds=0 if force else None
        )
        wait_for(
            lambda: not self.placements(selector, namespace),
            timeout=300,
            what=f"pods {selector!r} deleted",
        )


NOT_READY_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def node_schedulable(node: dict[str, Any]) -> bool:
    """Ready, and free of the taints the control plane puts on a node that is not (a Node as
    the API server sends it)."""
    conditions = (node.get("status") or {}).get("conditions") or ()
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    taints = (node.get("spec") or {}).get("taints") or ()
    return ready and not any(t.get("key") in NOT_READY_TAINTS for t in taints)
