"""Faults injected into a running sandbox while work flows, and what they cost: the scenarios
``bench/faults.py`` prints as a table and ``tests/e2e/test_faults_*.py`` assert on.

Each scenario returns a :class:`FaultRow`: the fault, the work in flight, the outcome, what
was lost (must be 0), and the seconds from the fault's end until the work was whole again.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from kubernetes import watch as k8s_watch

from sandbox.cluster import Sandbox
from sandbox.lag import LaggingRelay
from sandbox.loopback import free_port
from sandbox.processes import wait_for
from sandbox.round_robin import RoundRobin
from sandbox.specs import ExtenderSpec, pod_body
from shared.quantity import parse_quantity

ROOT = Path(__file__).resolve().parents[1]
CRD = ROOT / "charts" / "loadsched" / "crds" / "elasticquota.yaml"
GROUP, VERSION, PLURAL = "scheduling.x-k8s.io", "v1alpha1", "elasticquotas"
ADMITTED = "loadsched.io/admitted"
"""Where extender replicas record admissions on an ElasticQuota (shared/quota_objects.py)."""


@dataclass
class FaultRow:
    fault: str
    work: str
    outcome: str
    lost: int
    recover_seconds: float
    target: str = ""
    """What the fault must not exceed beyond losing nothing (empty: nothing more)."""
    met: bool = True
    details: dict[str, Any] = field(default_factory=dict)


class BoundPeak:
    """Watches the pods of a namespace (list, then watch from its resourceVersion; listed
    again when the watch breaks) and keeps the highest sum of CPU requests of bound,
    non-terminal pods it has seen at any event, and every node each pod was seen on."""

    def __init__(self, sandbox: Sandbox, namespace: str, selector: str = "") -> None:
        self._core: Any = sandbox.core
        self._namespace = namespace
        self._selector = selector
        self._cpu: dict[str, Fraction] = {}
        self.peak = Fraction(0)
        self.nodes: dict[str, set[str]] = {}
        """Pod UID → the nodes it was seen bound to (one, if it was bound once)."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._ready = threading.Event()

    @property
    def bindings(self) -> dict[str, int]:
        """Pod UID → how many nodes it was seen bound to."""
        return {uid: len(nodes) for uid, nodes in self.nodes.items()}

    def __enter__(self) -> BoundPeak:
        self._thread.start()
        self._ready.wait(30)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(15)

    def _record(self, pod: Any, deleted: bool = False) -> None:
        uid = pod.metadata.uid
        phase = pod.status.phase if pod.status else None
        node = pod.spec.node_name
        if not deleted and node and phase not in ("Succeeded", "Failed"):
            self.nodes.setdefault(uid, set()).add(node)
            self._cpu[uid] = sum(
                (
                    Fraction(parse_quantity((c.resources.requests or {}).get("cpu", "0")))
                    for c in pod.spec.containers
                ),
                Fraction(0),
            )
        else:
            self._cpu.pop(uid, None)
        self.peak = max(self.peak, sum(self._cpu.values(), Fraction(0)))

    def _list(self) -> str:
        while True:
            try:
                listed: Any = self._core.list_namespaced_pod(
                    self._namespace, label_selector=self._selector
                )
                break
            except Exception:  # noqa: BLE001 - a fault under test: try again
                if self._stop.wait(0.5):
                    return ""
        self._cpu.clear()
        for pod in listed.items:
            self._record(pod)
        return str(listed.metadata.resource_version)

    def _run(self) -> None:
        version = self._list()
        self._ready.set()
        while not self._stop.is_set():
            stream: Any = k8s_watch.Watch()  # type: ignore[no-untyped-call]
            try:
                for event in stream.stream(
                    self._core.list_namespaced_pod,
                    self._namespace,
                    label_selector=self._selector,
                    resource_version=version,
                    timeout_seconds=5,
                ):
                    pod = event["object"]
                    version = pod.metadata.resource_version
                    self._record(pod, deleted=event["type"] == "DELETED")
                    if self._stop.is_set():
                        break
            except Exception:  # noqa: BLE001 - a fault under test: list again
                version = self._list()


def create_namespace(sandbox: Sandbox, name: str) -> None:
    try:
        core: Any = sandbox.core
        core.create_namespace({"metadata": {"name": name}})
    except k8s.ApiException as e:
        if e.status != 409:
            raise


def create_quota(sandbox: Sandbox, namespace: str, cpu: str) -> None:
    k8s.CustomObjectsApi(sandbox.api).create_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        PLURAL,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ElasticQuota",
            "metadata": {"name": "quota", "namespace": namespace},
            "spec": {"min": {"cpu": cpu}, "max": {"cpu": cpu}},
        },
    )


def quota_annotations(sandbox: Sandbox, namespace: str) -> dict[str, str]:
    obj: Any = k8s.CustomObjectsApi(sandbox.api).get_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "quota"
    )
    return dict(obj["metadata"].get("annotations") or {})


def delete_quota(sandbox: Sandbox, namespace: str) -> None:
    k8s.CustomObjectsApi(sandbox.api).delete_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "quota"
    )


def burst(
    sandbox: Sandbox, prefix: str, count: int, *, scheduler: str, namespace: str, cpu: str = "100m"
) -> None:
    sandbox.create_pods(
        [
            pod_body(
                f"{prefix}-{i}",
                scheduler_name=scheduler,
                cpu=cpu,
                memory="16Mi",
                namespace=namespace,
                labels={"burst": prefix},
            )
            for i in range(count)
        ],
        workers=16,
    )


@contextmanager
def extender_replicas(
    sandbox: Sandbox,
    count: int,
    args: list[str],
    prefix: str = "extender-replica",
    *,
    watch_lag: float = 0.0,
) -> Iterator[tuple[list[str], RoundRobin]]:
    """``count`` extender processes behind one round-robin balancer; (names, balancer).
    ``watch_lag``: each reaches the API server through its own relay that delays what the
    server sends by that many seconds (a busy API server, a slow link)."""
    ports = [free_port() for _ in range(count)]
    names = [f"{prefix}-{i}" for i in range(count)]
    with contextlib.ExitStack() as stack:
        try:
            for name, port in zip(names, ports, strict=True):
                api_port = None
                if watch_lag:
                    api_port = stack.enter_context(LaggingRelay(sandbox.api_port, watch_lag)).port
                sandbox.start_extender(port=port, name=name, args=args, api_port=api_port)
            with RoundRobin(ports) as balancer:
                yield names, balancer
        finally:
            for name in names:
                sandbox.supervisor.stop_named(name)


def quota_two_replicas(
    sandbox: Sandbox,
    *,
    namespace: str = "faults-quota",
    max_cpu: str = "5",
    prefill: int = 30,
    pods: int = 200,
    watch_lag: float = 0.0,
    say: Callable[[str], None] = lambda _: None,
) -> FaultRow:
    """Two extender replicas with ``--elastic-quota`` behind one round-robin balancer, one
    kube-scheduler (not ignorable) calling it; a namespace at ``prefill`` × 100m of its
    ``max`` takes a burst of ``pods`` × 100m. The peak of bound CPU, read from the API server
    by a watch, against ``max``. ``watch_lag``: the replicas' watches lag that far behind."""
    sandbox.install_crd(CRD)
    create_namespace(sandbox, namespace)
    create_quota(sandbox, namespace, max_cpu)
    scheduler = "faults-quota"
    ceiling = Fraction(parse_quantity(max_cpu))
    try:
        with (
            extender_replicas(
                sandbox, 2, ["--elastic-quota"], prefix="extender-quota", watch_lag=watch_lag
            ) as (
                _,
                balancer,
            ),
            BoundPeak(sandbox, namespace) as peak,
        ):
            sandbox.start_scheduler(
                scheduler,
                scheduler_name=scheduler,
                extender=ExtenderSpec(balancer.url, ignorable=False),
            )
            try:
                burst(sandbox, "prefill", prefill, scheduler=scheduler, namespace=namespace)
                sandbox.wait_bound("burst=prefill", prefill, namespace=namespace, timeout=120)
                say(f"{prefill} pods bound; a burst of {pods}")
                started = time.monotonic()
                burst(sandbox, "burst", pods, scheduler=scheduler, namespace=namespace)
                room = int((ceiling - Fraction(prefill, 10)) * 10)
                wait_for(
                    lambda: len(bound_pods(sandbox, namespace)) >= prefill + room,
                    timeout=120,
                    what=f"{room} burst pods bound",
                    interval=0.5,
                )
                settled = time.monotonic() - started
                time.sleep(3)  # anything still in flight lands (or not) now
                over = peak.peak - ceiling
            finally:
                sandbox.stop_scheduler(scheduler)
            served = dict(balancer.served)
        recorded = len(json.loads(quota_annotations(sandbox, namespace).get(ADMITTED, "{}")))
    finally:
        sandbox.core.delete_collection_namespaced_pod(namespace)
        delete_quota(sandbox, namespace)
    overshoot_pods = max(0, int(over * 10))
    return FaultRow(
        fault="2 extender replicas, 1 quota"
        + (f", watches {watch_lag:g} s behind" if watch_lag else ""),
        work=f"{pods} pods into a namespace at {prefill}/{int(ceiling * 10)} pods of max",
        outcome=f"peak {float(peak.peak):g} of max {max_cpu} CPU",
        lost=overshoot_pods,
        recover_seconds=settled,
        details={
            "peak": peak.peak,
            "max": ceiling,
            "served": served,
            "recorded": recorded,
            "bindings": peak.bindings,
        },
    )


def bound_pods(sandbox: Sandbox, namespace: str) -> list[str]:
    pods: Any = sandbox.core.list_namespaced_pod(namespace).items
    return [str(p.metadata.name) for p in pods if p.spec.node_name]
