"""Pods that loadsched refused, and the changes that should get them bound: one scenario per
cause, on the sandbox's real control plane. Used by ``tests/e2e/test_requeue.py`` (asserts)
and ``bench/requeue.py`` (measures).

Each run: make every node (or the pod's namespace) refuse the pod, create the pod, wait until
kube-scheduler has marked it Unschedulable, make the change, and time change → binding.
The extender runs with its own policy (failClosed, a hot-value limit, two metrics) and
elastic quotas, optionally behind a :class:`sandbox.lag.LaggingRelay` so that its watches see
every change ``lag`` seconds after kube-scheduler does.
"""

from __future__ import annotations

import contextlib
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import yaml
from kubernetes import client as k8s

from sandbox import kwok
from sandbox.build import ROOT
from sandbox.cluster import Sandbox
from sandbox.lag import LaggingRelay
from sandbox.processes import wait_for
from sandbox.specs import ExtenderSpec, pod_body
from shared.annotations import encode_hot_value, encode_metric

CRD = ROOT / "charts" / "loadsched" / "crds" / "elasticquota.yaml"
GROUP, VERSION, PLURAL = "scheduling.x-k8s.io", "v1alpha1", "elasticquotas"
METRICS = ("cpu_usage_avg_5m", "mem_usage_avg_5m")
HOT_LIMIT = 2
POLICY = {
    "apiVersion": "scheduler.policy.crane.io/v1alpha1",
    "kind": "DynamicSchedulerPolicy",
    "spec": {
        "staleData": "failClosed",
        "hotValueLimit": HOT_LIMIT,
        "syncPolicy": [{"name": m, "period": "3m"} for m in METRICS],
        "predicate": [{"name": m, "maxLimitPecent": 0.65} for m in METRICS],
        "priority": [{"name": m, "weight": 0.5} for m in METRICS],
        "hotValue": [{"timeRange": "5m", "count": 5}, {"timeRange": "1m", "count": 2}],
    },
}
HOT_WINDOW = timedelta(minutes=5)
CAUSES = (
    "load",
    "hot-value",
    "stale",
    "quota-max",
    "quota-min",
    "quota-pod-deleted",
    "quota-pod-finished",
    "borrowed-returned",
)
MODES = {"names-only": True, "full-node": False}
HIGH = "requeue-high"
"""A PriorityClass above the waiting pods: kube-scheduler's own preemption leaves such pods."""


@dataclass
class Run:
    cause: str
    mode: str
    seconds: float
    """Change → pod bound."""
    writes: float
    """Requeue annotation writes the extender made meanwhile."""
    node: str


@dataclass
class RequeueRig:
    box: Sandbox
    nodes: list[str]
    lag: float = 0.0
    extender: str = ""
    schedulers: dict[str, str] = field(default_factory=dict)
    """mode → schedulerName."""
    last_target: int = 0
    """Index of the node the last run's change made pass (load, stale)."""
    _count: int = 0
    _held: set[str] = field(default_factory=set)
    """Namespaces :meth:`hold` put pods in: cleared when the rig stops."""

    @property
    def settle(self) -> float:
        """Seconds until the extender has surely seen a change (its watches lag by ``lag``),
        with room for a loaded 2-core machine (CI runs this after the rest of the e2e tier)."""
        return self.lag + 1.5

    # -- set-up ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def started(self) -> Iterator[RequeueRig]:
        box = self.box
        box.install_crd(CRD)
        policy = box.workdir / "requeue-policy.yaml"
        policy.write_text(yaml.safe_dump(POLICY))
        with contextlib.ExitStack() as stack:
            api_port = None
            if self.lag:
                relay = stack.enter_context(LaggingRelay(box.api_port, self.lag))
                api_port = relay.port
            self.extender = box.start_extender(
                name="extender-requeue",
                args=["--policy", str(policy), "--elastic-quota", "--requeue-period", "0.25"],
                api_port=api_port,
            )
            for mode, names_only in MODES.items():
                name = f"requeue-{mode}"
                box.start_scheduler(
                    name,
                    scheduler_name=name,
                    extender=ExtenderSpec(self.extender, node_cache_capable=names_only),
                )
                self.schedulers[mode] = name
            box.create_priority_class(HIGH, 1000, preemption_policy="Never")
            try:
                yield self
            finally:
                self.annotate_all(dict.fromkeys((*METRICS, "node_hot_value")))
                for namespace in sorted(self._held):
                    self.clear_namespace(namespace)  # no pod of the rig outlives it
                self.drop_quotas()
                for name in self.schedulers.values():
                    box.stop_scheduler(name)

    # -- cluster state -----------------------------------------------------------------------

    def annotate_all(self, annotations: dict[str, str | None]) -> None:
        for name in self.nodes:
            self.box.annotate_node(name, annotations)

    def loads(self, usage: float, when: datetime, hot: int | None = None) -> dict[str, str | None]:
        values: dict[str, str | None] = {m: encode_metric(usage, when) for m in METRICS}
        values["node_hot_value"] = None if hot is None else encode_hot_value(hot, when)
        return values

    @property
    def custom(self) -> Any:
        return k8s.CustomObjectsApi(self.box.api)

    @property
    def core(self) -> Any:
        """The core API, untyped: bodies here are plain dicts."""
        return self.box.core

    def drop_quotas(self) -> None:
        """Delete every ElasticQuota: the sum of mins is cluster-wide, so none may be left."""
        for item in self.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"]:
            meta = item["metadata"]
            with contextlib.suppress(k8s.ApiException):
                self.custom.delete_namespaced_custom_object(
                    GROUP, VERSION, meta["namespace"], PLURAL, meta["name"]
                )

    def quota(self, namespace: str, *, min_cpu: int | None, max_cpu: int | None) -> None:
        spec: dict[str, Any] = {}
        if min_cpu is not None:
            spec["min"] = {"cpu": str(min_cpu)}
        if max_cpu is not None:
            spec["max"] = {"cpu": str(max_cpu)}
        with contextlib.suppress(k8s.ApiException):
            self.core.create_namespace({"metadata": {"name": namespace}})
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ElasticQuota",
            "metadata": {"name": "quota", "namespace": namespace},
            "spec": spec,
        }
        try:
            self.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
        except k8s.ApiException as e:
            if e.status != 409:
                raise
            self.custom.patch_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, "quota", {"spec": spec}
            )

    def hold(self, namespace: str, name: str, cpu: str, *, high: bool = False) -> None:
        """A pod bound directly to the first node: it counts against its quota. Deleted, it
        stops at once (kwok finishes the delete as soon as it sees it), so a cause's moment
        is the delete's, not half a second before its end."""
        body = pod_body(name, scheduler_name="none", cpu=cpu, namespace=namespace)
        body["spec"]["nodeName"] = self.nodes[0]
        body["metadata"].setdefault("annotations", {}).update(kwok.lifecycle(stops_after="0s"))
        if high:
            body["spec"]["priorityClassName"] = HIGH
        self._held.add(namespace)
        self.core.create_namespaced_pod(namespace, body)

    def clear_namespace(self, namespace: str) -> None:
        core = self.core
        core.delete_collection_namespaced_pod(namespace)
        wait_for(
            lambda: not core.list_namespaced_pod(namespace).items,
            timeout=60,
            what=f"pods of {namespace} deleted",
        )

    def requeue_writes(self) -> float:
        with urllib.request.urlopen(f"{self.extender}/metrics", timeout=5) as response:
            text = response.read().decode()
        for line in text.splitlines():
            if line.startswith('loadsched_extender_requeue_writes_total{result="written"}'):
                return float(line.split()[-1])
        return 0.0

    # -- one run -----------------------------------------------------------------------------

    def run(self, cause: str, mode: str) -> Run:
        """Prepare ``cause``, get a pod refused, make the change; time change → bound."""
        self._count += 1
        namespace, change = self._prepare(cause)
        time.sleep(self.settle)  # the prepared state reaches the extender first
        name = f"rq-{self._count}"
        core = self.core
        body = pod_body(name, scheduler_name=self.schedulers[mode], cpu="1", namespace=namespace)
        core.create_namespaced_pod(namespace, body)
        try:
            wait_for(
                lambda: _unschedulable(core.read_namespaced_pod(name, namespace)),
                timeout=30,
                what=f"pod {namespace}/{name} refused ({cause}, {mode})",
                interval=0.05,
            )
            writes = self.requeue_writes()
            start = change()
            node = ""

            def bound() -> bool:
                nonlocal node
                node = core.read_namespaced_pod(name, namespace).spec.node_name or ""
                return bool(node)

            wait_for(
                bound,
                timeout=120,
                what=f"pod {namespace}/{name} bound ({cause}, {mode})",
                interval=0.05,
            )
            seconds = time.monotonic() - start
            time.sleep(self.settle)  # the extender counts a write once its answer is back
            return Run(cause, mode, seconds, self.requeue_writes() - writes, node)
        finally:
            if namespace == "default":
                core.delete_namespaced_pod(name, namespace)
            else:
                self.clear_namespace(namespace)

    def run_unrefused(self) -> None:
        """A pod that had a node (half the nodes overloaded), then a node that recovers."""
        self.drop_quotas()
        now = datetime.now(UTC)
        for i, name in enumerate(self.nodes):
            self.box.annotate_node(name, self.loads(0.95 if i % 2 else 0.20, now))
        time.sleep(self.settle)
        self._count += 1
        name = f"rq-{self._count}"
        body = pod_body(name, scheduler_name=self.schedulers["names-only"], cpu="1")
        self.core.create_namespaced_pod("default", body)
        try:
            wait_for(
                lambda: bool(self.core.read_namespaced_pod(name, "default").spec.node_name),
                timeout=30,
                what=f"pod {name} bound at once",
            )
            self.box.annotate_node(self.nodes[1], self.loads(0.20, datetime.now(UTC)))
            time.sleep(2 * self.settle)
        finally:
            self.core.delete_namespaced_pod(name, "default")

    def _prepare(self, cause: str) -> tuple[str, Callable[[], float]]:
        """The pod's namespace, after making it refused for ``cause``; and the change."""
        now = datetime.now(UTC)
        self.last_target = self._count % len(self.nodes)
        target = self.nodes[self.last_target]
        box, core = self.box, self.core
        if cause in ("load", "stale", "hot-value"):
            self.drop_quotas()
        else:
            self.annotate_all(self.loads(0.20, now))
        if cause == "load":
            self.annotate_all(self.loads(0.95, now))
            return "default", lambda: _at_once(
                lambda: box.annotate_node(target, self.loads(0.20, datetime.now(UTC)))
            )
        if cause == "stale":
            self.annotate_all(self.loads(0.20, now - timedelta(minutes=30)))
            return "default", lambda: _at_once(
                lambda: box.annotate_node(target, self.loads(0.20, datetime.now(UTC)))
            )
        if cause == "hot-value":
            # hot on every node, and going stale (nothing written) a few seconds from now
            stale_in = timedelta(seconds=self.settle + 4)
            stamped = (now - HOT_WINDOW + stale_in).replace(microsecond=0)
            self.annotate_all(
                self.loads(0.20, now) | {"node_hot_value": encode_hot_value(5, stamped)}
            )
            return "default", lambda: _until(stamped + HOT_WINDOW)
        self.drop_quotas()
        if cause == "quota-max":
            self.quota("rq-max", min_cpu=1, max_cpu=1)
            self.quota("rq-lender", min_cpu=20, max_cpu=None)
            self.hold("rq-max", "hold", "1")
            return "rq-max", lambda: _at_once(lambda: self.quota("rq-max", min_cpu=1, max_cpu=2))
        if cause == "quota-min":
            self.quota("rq-min", min_cpu=1, max_cpu=10)
            self.hold("rq-min", "hold", "1")
            return "rq-min", lambda: _at_once(lambda: self.quota("rq-min", min_cpu=2, max_cpu=10))
        if cause in ("quota-pod-deleted", "quota-pod-finished"):
            self.quota("rq-room", min_cpu=2, max_cpu=2)
            self.hold("rq-room", "hold-1", "1")
            self.hold("rq-room", "hold-2", "1")
            if cause == "quota-pod-deleted":
                return "rq-room", lambda: _at_once(
                    lambda: core.delete_namespaced_pod("hold-1", "rq-room")
                )
            return "rq-room", lambda: _at_once(lambda: kwok.exit_now(core, "hold-1", "rq-room"))
        if cause == "borrowed-returned":
            self.quota("rq-lender", min_cpu=2, max_cpu=None)
            self.quota("rq-borrower", min_cpu=1, max_cpu=10)
            self.quota("rq-waiting", min_cpu=2, max_cpu=10)
            self.clear_namespace("rq-borrower")
            self.hold("rq-borrower", "own", "1", high=True)
            self.hold("rq-borrower", "borrowed", "2", high=True)
            self.hold("rq-waiting", "hold", "2")
            return "rq-waiting", lambda: _at_once(
                lambda: core.delete_namespaced_pod("borrowed", "rq-borrower")
            )
        raise ValueError(f"unknown cause {cause!r}")


def _at_once(act: Callable[[], object]) -> float:
    """Do ``act``; the moment it was done (monotonic)."""
    act()
    return time.monotonic()


def _until(moment: datetime) -> float:
    """Wait until wall-clock ``moment``; the monotonic time it happened."""
    delay = (moment - datetime.now(UTC)).total_seconds()
    if delay > 0:
        time.sleep(delay)
    return time.monotonic()


def _unschedulable(pod: Any) -> bool:
    for condition in pod.status.conditions or ():
        if condition.type == "PodScheduled" and condition.reason == "Unschedulable":
            return True
    return False


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100)."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]
