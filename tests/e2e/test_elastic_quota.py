"""Elastic quota end to end: the real kube-scheduler (its own preemption active) calling the
extender (with --elastic-quota), the annotator's quota controller, and the real Job controller.

Each test creates its own quotas and pods on its own pool of tainted nodes, and deletes every
ElasticQuota when it ends: the sum of ``min`` is cluster-wide. Priorities 0, 100 and 1000
come from PriorityClasses; "online" (1000000, preemptionPolicy Never) is an online service.

- the user story: 2 nodes × 7 CPU. A {min 6, max 10} CPU runs a Job (2 × 2 CPU) and two
  online notebook pods; B {min 12, max 14} runs job-1 (3 CPU), then job-2 (5 CPU);
- a borrower in one resource (memory) while under its min in another (CPU) gives back;
- a lender's guarantee comes back while the nodes still have room (the sum of min);
- a burst: kube-scheduler preempts for pods right after others were admitted, with the
  extender's watches lagging (the room promised to admitted pods is counted);
- the room reclaimed for a waiting pod goes to that pod, not to one of equal priority
  created after it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from sandbox import kwok
from sandbox.cluster import Sandbox
from sandbox.lag import LaggingRelay
from sandbox.processes import wait_for
from sandbox.specs import ExtenderSpec, NodeSpec
from tests.e2e.objects import sent_as
from tests.e2e.scrape import exported

pytestmark = pytest.mark.e2e

CRD = Path(__file__).resolve().parents[2] / "charts" / "loadsched" / "crds" / "elasticquota.yaml"
A, B, C = "quota-a", "quota-b", "quota-c"
X, Y = "quota-x", "quota-y"
LENDER, BORROWER = "quota-lender", "quota-borrower"
W, IDLE = "quota-w", "quota-idle"
FIRST, LENT, THIRD = "quota-first", "quota-lent", "quota-third"
NAMESPACES = (A, B, C, X, Y, LENDER, BORROWER, W, IDLE, FIRST, LENT, THIRD)
SCHEDULER = "loadsched-quota"
GROUP, VERSION, PLURAL = "scheduling.x-k8s.io", "v1alpha1", "elasticquotas"
PRIORITIES = {"eq-0": 0, "eq-100": 100, "eq-1000": 1000}
BOUND_WELL_BEFORE_THE_FLUSH = 60.0
"""kube-scheduler's own flush of unschedulable pods retries after 300 s."""


NO_PROMETHEUS = "http://127.0.0.1:9"
"""Load sync is not under test here."""
ANNOTATOR_ARGS = [
    "--elastic-quota",
    "--no-leader-elect",
    "--eviction-grace-seconds",
    "0",
    "--quota-period",
    "1",
]


def pool_node(name: str, ip: str, pool: str, cpu: str, memory: str = "32Gi") -> dict[str, Any]:
    body = NodeSpec(name, ip, cpu=cpu, memory=memory, labels={"loadsched.test/pool": pool}).body()
    body["spec"] = {"taints": [taint(pool)]}
    return body


def taint(pool: str) -> dict[str, str]:
    return {"key": "loadsched.test/pool", "value": pool, "effect": "NoSchedule"}


NODES = [
    pool_node("quota-1", "127.0.0.31", "quota", "7"),
    pool_node("quota-2", "127.0.0.32", "quota", "7"),
    pool_node("quota-mem-1", "127.0.0.33", "mem", "8", "10Gi"),
    pool_node("quota-room-1", "127.0.0.34", "room", "8"),
    pool_node("quota-room-2", "127.0.0.35", "room", "8"),
    pool_node("quota-burst-1", "127.0.0.36", "burst", "4"),
    pool_node("quota-burst-2", "127.0.0.37", "burst", "4"),
]


def pod_spec(
    cpu: str,
    *,
    pool: str = "quota",
    memory: str = "16Mi",
    scheduler: str = SCHEDULER,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "schedulerName": scheduler,
        "nodeSelector": {"loadsched.test/pool": pool},
        "tolerations": [{**taint(pool), "operator": "Equal"}],
        # Deliberately grace 0 (and the annotator's --eviction-grace-seconds 0): these tests
        # pin preemption and reclaim with victims that vanish at once, the race kube-scheduler's
        # asynchronous preemption opens; graceful evictions: test_kubelet_lifecycle.py.
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": "main",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": cpu, "memory": memory}},
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


def custom(sandbox: Sandbox) -> Any:
    return k8s.CustomObjectsApi(sandbox.api)


def create_quota(
    sandbox: Sandbox, namespace: str, minimum: dict[str, Any], maximum: dict[str, Any] | None
) -> None:
    spec: dict[str, Any] = {"min": minimum}
    if maximum is not None:
        spec["max"] = maximum
    custom(sandbox).create_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        PLURAL,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ElasticQuota",
            "metadata": {"name": "quota", "namespace": namespace},
            "spec": spec,
        },
    )


def drop_quotas(sandbox: Sandbox) -> None:
    """Delete every ElasticQuota: the sum of mins is cluster-wide, so none may be left."""
    listed = custom(sandbox).list_cluster_custom_object(GROUP, VERSION, PLURAL)
    for item in listed.get("items", []):
        meta = item["metadata"]
        custom(sandbox).delete_namespaced_custom_object(
            GROUP, VERSION, meta["namespace"], PLURAL, meta["name"]
        )


def clear(sandbox: Sandbox) -> None:
    batch = k8s.BatchV1Api(sandbox.api)
    for namespace in NAMESPACES:
        batch.delete_collection_namespaced_job(namespace, propagation_policy="Background")
        sandbox.core.delete_collection_namespaced_pod(namespace)
    wait_for(
        lambda: not any(sandbox.core.list_namespaced_pod(ns).items for ns in NAMESPACES),
        timeout=60,
        what="quota test pods deleted",
    )


@pytest.fixture(scope="module")
def quota_cluster(sandbox: Sandbox) -> Iterator[dict[str, str]]:
    sandbox.install_crd(CRD)
    for body in NODES:
        sandbox.core.create_node(sent_as(k8s.V1Node, body))
    sandbox.wait_schedulable({body["metadata"]["name"] for body in NODES})
    for namespace in NAMESPACES:
        sandbox.core.create_namespace(sent_as(k8s.V1Namespace, {"metadata": {"name": namespace}}))
    sandbox.create_priority_class(
        "online",
        1000000,
        preemption_policy="Never",
        description="online services: never preempt anyone",
    )
    for name, value in PRIORITIES.items():
        sandbox.create_priority_class(name, value)
    extender = sandbox.start_extender(name="extender-quota", args=["--elastic-quota"])
    sandbox.start_scheduler(
        SCHEDULER, scheduler_name=SCHEDULER, extender=ExtenderSpec(extender, ignorable=False)
    )
    annotator = sandbox.start_annotator(
        prometheus_url=NO_PROMETHEUS, name="annotator-quota", args=ANNOTATOR_ARGS
    )
    yield {"extender": extender, "annotator": annotator}
    sandbox.stop_scheduler(SCHEDULER)
    for name in ("annotator-quota", "extender-quota"):
        sandbox.supervisor.stop_named(name)
    clear(sandbox)
    for body in NODES:
        sandbox.core.delete_node(body["metadata"]["name"])
    for name in ("online", *PRIORITIES):
        k8s.SchedulingV1Api(sandbox.api).delete_priority_class(name)


@pytest.fixture
def quotas(
    sandbox: Sandbox, quota_cluster: dict[str, str]
) -> Iterator[Callable[[str, dict[str, Any], dict[str, Any] | None], None]]:
    """Create a namespace's quota; every quota and pod is gone after the test."""
    drop_quotas(sandbox)
    yield lambda namespace, minimum, maximum: create_quota(sandbox, namespace, minimum, maximum)
    clear(sandbox)
    drop_quotas(sandbox)


Pods = dict[str, tuple[str, str | None]]


def pods_of(sandbox: Sandbox, namespace: str) -> Pods:
    """name → (uid, node) of the namespace's pods that are not being deleted."""
    found: Pods = {}
    for p in sandbox.core.list_namespaced_pod(namespace).items:
        if p.metadata and p.spec and not p.metadata.deletion_timestamp:
            assert p.metadata.name is not None and p.metadata.uid is not None, p.metadata
            found[p.metadata.name] = (p.metadata.uid, p.spec.node_name)
    return found


def wait_bound(
    sandbox: Sandbox, namespace: str, names: list[str] | str, count: int, timeout: float = 90
) -> float:
    """Seconds until ``count`` of the pods (by name, or by name prefix) are bound."""
    start = time.monotonic()

    def done() -> bool:
        pods = pods_of(sandbox, namespace)
        prefix = names if isinstance(names, str) else None
        chosen = [
            node
            for name, (_, node) in pods.items()
            if (name.startswith(prefix) if prefix else name in names)
        ]
        return sum(1 for node in chosen if node) >= count

    try:
        wait_for(
            done, timeout=timeout, what=f"{count} pods {names} bound in {namespace}", interval=0.25
        )
    except TimeoutError as e:
        raise TimeoutError(f"{e}; {sandbox.why_pending('', namespace)}") from None
    return time.monotonic() - start


def scheduling_message(sandbox: Sandbox, namespace: str, name: str) -> str:
    status = sandbox.core.read_namespaced_pod(name, namespace).status
    for condition in (status.conditions if status else None) or ():
        if condition.type == "PodScheduled" and condition.status == "False":
            return condition.message or ""
    return ""


def used(sandbox: Sandbox, namespace: str, resource: str = "cpu") -> str | None:
    quota = custom(sandbox).get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "quota")
    return ((quota.get("status") or {}).get("used") or {}).get(resource)


def events_for(sandbox: Sandbox, namespace: str, name: str) -> list[tuple[str, str]]:
    events = sandbox.core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={name}"
    ).items
    return [(e.reason or "", e.message or "") for e in events]


def create_in_order(sandbox: Sandbox, bodies: list[dict[str, Any]]) -> None:
    """One at a time, bound before the next (placement and creation order as listed)."""
    for body in bodies:
        sandbox.create_pods([body])
        wait_bound(sandbox, body["metadata"]["namespace"], [body["metadata"]["name"]], 1)


def test_the_user_story(
    sandbox: Sandbox, quota_cluster: dict[str, str], quotas: Callable[..., None]
) -> None:
    annotator = quota_cluster["annotator"]
    quotas(A, {"cpu": 6}, {"cpu": 10})
    quotas(B, {"cpu": 12}, {"cpu": 14})
    batch = k8s.BatchV1Api(sandbox.api)
    evicted_before = exported(
        annotator, "loadsched_annotator_reclaim_evictions_total", result="evicted"
    )
    batch.create_namespaced_job(
        A,
        sent_as(
            k8s.V1Job,
            {
                "metadata": {"name": "job"},
                "spec": {
                    "parallelism": 2,
                    "completions": 2,
                    "backoffLimit": 20,
                    # its pods run until evicted (kwok ends a Job's pods after 1 s otherwise)
                    "template": {
                        "metadata": {"annotations": kwok.lifecycle(runs="1h")},
                        "spec": pod_spec("2", restartPolicy="Never"),
                    },
                },
            },
        ),
    )
    wait_bound(sandbox, A, "job-", 2)
    sandbox.create_pods(
        [pod(f"notebook-{i}", A, "2", priorityClassName="online") for i in range(2)]
    )
    # the second notebook pod borrows: A is at 8 > min 6, and B leaves its min unused
    wait_bound(sandbox, A, ["notebook-0", "notebook-1"], 2)
    wait_for(lambda: used(sandbox, A) == "8", timeout=30, what="status.used of A = 8")
    before = pods_of(sandbox, A)
    assert {node for _, node in before.values()} == {"quota-1", "quota-2"}

    # max is enforced, with the numbers in the pod's condition
    sandbox.create_pods([pod("over-max", A, "3")])
    expected = f"elastic quota of namespace {A}: cpu used + request 11 > max 10"
    wait_for(
        lambda: expected in scheduling_message(sandbox, A, "over-max"),
        timeout=60,
        what="over-max to be refused by the quota",
    )
    sandbox.core.delete_namespaced_pod("over-max", A)
    # a namespace without a quota is unaffected
    sandbox.create_pods([pod("free", C, "1")])
    wait_bound(sandbox, C, ["free"], 1)
    sandbox.core.delete_namespaced_pod("free", C)

    # a borrower is not evicted while the lender has no waiting pods
    passes = exported(annotator, "loadsched_annotator_quota_passes_total")
    wait_for(
        lambda: exported(annotator, "loadsched_annotator_quota_passes_total") >= passes + 3,
        timeout=30,
        what="three more quota passes",
    )
    assert pods_of(sandbox, A) == before

    sandbox.create_pods([pod("job-1", B, "3")])
    wait_bound(sandbox, B, ["job-1"], 1)
    sandbox.create_pods([pod("job-2", B, "5")])
    waited = wait_bound(sandbox, B, ["job-2"], 1)
    assert waited < BOUND_WELL_BEFORE_THE_FLUSH

    after = pods_of(sandbox, A)
    gone = {name for name, (uid, _) in before.items() if after.get(name, ("",))[0] != uid}
    assert len(gone) == 1 and next(iter(gone)).startswith("job-"), (gone, after)
    assert all(after[f"notebook-{i}"] == before[f"notebook-{i}"] for i in range(2))
    victim = next(iter(gone))
    assert any(reason == "Reclaimed" for reason, _ in events_for(sandbox, A, victim))
    assert any(reason == "Reclaiming" for reason, _ in events_for(sandbox, B, "job-2"))

    # the Job controller's replacement pod waits Pending: A would borrow, and no room is left
    def replacement() -> str | None:
        for name, (_, node) in pods_of(sandbox, A).items():
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
    wait_for(lambda: used(sandbox, B) == "8", timeout=30, what="status.used of B = 8")
    # the victim counts until the Job controller has taken its tracking finalizer off
    wait_for(lambda: used(sandbox, A) == "6", timeout=30, what="status.used of A = 6")
    evicted = exported(annotator, "loadsched_annotator_reclaim_evictions_total", result="evicted")
    assert evicted == evicted_before + 1


def test_a_borrower_in_any_resource_gives_back(
    sandbox: Sandbox, quota_cluster: dict[str, str], quotas: Callable[..., None]
) -> None:
    """X's min is 4 CPU and 4 GiB; it runs 1.2 CPU and 8 GiB: over its memory min, under its
    CPU min. Y, within its min, needs memory on a node (8 CPU, 10 GiB) full of memory."""
    quotas(X, {"cpu": 4, "memory": "4Gi"}, {"cpu": 8, "memory": "8Gi"})
    quotas(Y, {"cpu": 4, "memory": "8Gi"}, {"cpu": 8, "memory": "12Gi"})

    def mem_pod(name: str, namespace: str, cpu: str, priority: str) -> dict[str, Any]:
        return pod(name, namespace, cpu, pool="mem", memory="2Gi", priorityClassName=priority)

    xs = [("x-0", "eq-0"), ("x-100", "eq-100"), ("x-1000-0", "eq-1000"), ("x-1000-1", "eq-1000")]
    create_in_order(sandbox, [mem_pod(name, X, "300m", pc) for name, pc in xs])
    create_in_order(sandbox, [mem_pod("y-0", Y, "1", "eq-0")])
    before = pods_of(sandbox, X)

    # kube-scheduler's preemption (y-100 outranks x-0 and y-0): the extender answers with
    # x-0, the lowest-priority pod of the borrower; x pushed below its CPU min is no reason
    sandbox.create_pods([mem_pod("y-100", Y, "1", "eq-100")])
    assert wait_bound(sandbox, Y, ["y-100"], 1) < BOUND_WELL_BEFORE_THE_FLUSH
    # nothing ranks below y-0b: the reclaim controller evicts x-100, whatever its priority
    sandbox.create_pods([mem_pod("y-0b", Y, "1", "eq-0")])
    assert wait_bound(sandbox, Y, ["y-0b"], 1) < BOUND_WELL_BEFORE_THE_FLUSH
    assert any(reason == "Reclaimed" for reason, _ in events_for(sandbox, X, "x-100"))
    # x is at its memory min now: y-1000 waits, nobody else of x's is taken
    sandbox.create_pods([mem_pod("y-1000", Y, "1", "eq-1000")])
    wait_for(
        lambda: any(r == "ReclaimImpossible" for r, _ in events_for(sandbox, Y, "y-1000")),
        timeout=30,
        what="y-1000 found impossible to make room for",
    )
    after = pods_of(sandbox, X)
    assert set(after) == {"x-1000-0", "x-1000-1"}
    assert all(after[name] == before[name] for name in after)
    assert pods_of(sandbox, Y)["y-1000"][1] is None
    wait_for(
        lambda: used(sandbox, X, "memory") == str(4 * 2**30),
        timeout=30,
        what="status.used of X: 4 GiB of memory",
    )


def test_a_lenders_guarantee_comes_back_while_nodes_have_room(
    sandbox: Sandbox, quota_cluster: dict[str, str], quotas: Callable[..., None]
) -> None:
    """The borrower runs 6 CPU on 16 (2 × 8): 4 of them are the lender's min {6}. The
    lender's pods, within its min, are refused while the sum of use would exceed the sum of
    min (8), and the borrower gives back: lowest priority first, whatever the priority."""
    quotas(LENDER, {"cpu": 6}, {"cpu": 12})
    quotas(BORROWER, {"cpu": 2}, {"cpu": 12})
    kept = ["b-1000-0", "b-1000-1"]
    taken = ["b-100-0", "b-100-1", "b-0-0", "b-0-1"]
    create_in_order(
        sandbox,
        [
            pod(name, BORROWER, "1", pool="room", priorityClassName=f"eq-{name.split('-')[1]}")
            for name in kept + taken
        ],
    )
    before = pods_of(sandbox, BORROWER)
    start = time.monotonic()
    sandbox.create_pods(
        [pod(f"l-{i}", LENDER, "1", pool="room", priorityClassName="eq-0") for i in range(6)]
    )
    wait_bound(sandbox, LENDER, "l-", 6)
    assert time.monotonic() - start < BOUND_WELL_BEFORE_THE_FLUSH
    after = pods_of(sandbox, BORROWER)
    assert set(after) == set(kept) and all(after[n] == before[n] for n in kept)
    for name in taken:
        assert any(reason == "Reclaimed" for reason, _ in events_for(sandbox, BORROWER, name))
    # the borrower at its min, the lender at its min: a new borrower pod (priority 1000,
    # nothing of its own below it) waits, and the lender keeps what it took back
    sandbox.create_pods([pod("b-more", BORROWER, "1", pool="room", priorityClassName="eq-1000")])
    expected = "would be borrowed beyond what other namespaces leave unused of their min"
    wait_for(
        lambda: expected in scheduling_message(sandbox, BORROWER, "b-more"),
        timeout=30,
        what="b-more refused by the sum of min",
    )
    assert all(node for _, node in pods_of(sandbox, LENDER).values())
    wait_for(lambda: used(sandbox, LENDER) == "6", timeout=30, what="status.used of the lender")
    assert used(sandbox, BORROWER) == "2"


@pytest.fixture
def lagging_scheduler(sandbox: Sandbox, quota_cluster: dict[str, str]) -> Iterator[tuple[str, str]]:
    """A second extender whose watches see everything 2 s late (through a relay), and a
    kube-scheduler calling it: kube-scheduler's preemption always runs before the extender
    has seen the bindings of the pods admitted just before."""
    with LaggingRelay(sandbox.api_port, 2.0) as relay:
        extender = sandbox.start_extender(
            name="extender-quota-lagging", args=["--elastic-quota"], api_port=relay.port
        )
        name = "loadsched-quota-lagging"
        sandbox.start_scheduler(
            name, scheduler_name=name, extender=ExtenderSpec(extender, ignorable=False)
        )
        try:
            yield name, extender
        finally:
            sandbox.stop_scheduler(name)
            sandbox.supervisor.stop_named("extender-quota-lagging")


def test_preempt_counts_room_promised_to_a_burst(
    sandbox: Sandbox, quotas: Callable[..., None], lagging_scheduler: tuple[str, str]
) -> None:
    """W (min 2, max 20; it borrows an idle lender's min) fills 2 × 4 CPU but 2 with six
    pods of priority 0 and 100, then bursts four pods of priority 1000. Two fit; for the
    other two kube-scheduler preempts right away, while the extender has not seen the first
    two bound: by bound pods alone the nodes have room. Exactly two priority-0 pods go."""
    scheduler, extender = lagging_scheduler
    quotas(W, {"cpu": 2}, {"cpu": 20})
    quotas(IDLE, {"cpu": 8}, None)

    def w_pod(name: str, priority: str) -> dict[str, Any]:
        return pod(name, W, "1", pool="burst", scheduler=scheduler, priorityClassName=priority)

    low = [w_pod(f"w-0-{i}", "eq-0") for i in range(4)]
    low += [w_pod(f"w-100-{i}", "eq-100") for i in range(2)]
    counted = exported(extender, "loadsched_extender_quota_cached_pods")
    sandbox.create_pods(low)
    wait_bound(sandbox, W, "w-", 6)
    # the lagging extender has seen them bound (2 s late, later on a busy machine): measured,
    # its count of the namespace's pods rises when its watch shows them
    wait_for(
        lambda: exported(extender, "loadsched_extender_quota_cached_pods") >= counted + 6,
        timeout=30,
        what="the lagging extender to count the six pods bound",
    )
    before = pods_of(sandbox, W)
    dropped = exported(extender, "loadsched_extender_quota_preemptions_total", outcome="dropped")
    start = time.monotonic()
    sandbox.create_pods([w_pod(f"w-1000-{i}", "eq-1000") for i in range(4)])
    wait_bound(sandbox, W, "w-1000-", 4)
    assert time.monotonic() - start < BOUND_WELL_BEFORE_THE_FLUSH
    after = pods_of(sandbox, W)
    gone = {name for name, (uid, _) in before.items() if after.get(name, ("",))[0] != uid}
    assert len(gone) == 2 and all(name.startswith("w-0-") for name in gone), gone
    assert len(after) == 8 and all(node for _, node in after.values())
    assert exported(extender, "loadsched_extender_quota_preemptions_total", outcome="dropped") == (
        dropped
    )


@pytest.fixture
def lagging_annotator(sandbox: Sandbox, quota_cluster: dict[str, str]) -> Iterator[str]:
    """The quota controller in place of the module's, every answer it reads 2 s late
    (through a relay), as on a busy control plane: its evictions are 2 s apart, and it
    re-asserts a nomination kube-scheduler cleared only 2 s later."""
    sandbox.supervisor.stop_named("annotator-quota")
    port = int(quota_cluster["annotator"].rsplit(":", 1)[1])
    try:
        with LaggingRelay(sandbox.api_port, 2.0) as relay:
            url = sandbox.start_annotator(
                prometheus_url=NO_PROMETHEUS,
                name="annotator-quota-lagging",
                args=ANNOTATOR_ARGS,
                api_port=relay.port,
            )
            try:
                yield url
            finally:
                sandbox.supervisor.stop_named("annotator-quota-lagging")
    finally:
        sandbox.start_annotator(
            prometheus_url=NO_PROMETHEUS, name="annotator-quota", args=ANNOTATOR_ARGS, port=port
        )


def test_reclaimed_room_goes_to_the_pod_it_was_freed_for(
    sandbox: Sandbox, quotas: Callable[..., None], lagging_annotator: str
) -> None:
    """Three quotas, Σmin 8 CPU: FIRST {min 6}, LENT {min 1} running 4 × 1 CPU (it borrows
    THIRD's idle min {1}). FIRST's pods of 2 CPU, all of one priority, created in order: two
    fit; the third is within FIRST's min but the pool is full, so the reclaim controller
    evicts two of LENT's pods for it. The ones created after it would borrow beyond Σmin once
    the third counts, and must not take its room, whatever becomes of its nomination
    (kube-scheduler clears it when an attempt fails, as one made between the two evictions
    does). Without the controller's promise, a later pod took the room in 4 runs of 4."""
    quotas(FIRST, {"cpu": 6}, {"cpu": 12})
    quotas(LENT, {"cpu": 1}, {"cpu": 8})
    quotas(THIRD, {"cpu": 1}, None)
    lent = [pod(f"lent-{i}", LENT, "1", pool="room", priorityClassName="eq-0") for i in range(4)]
    create_in_order(sandbox, lent)
    before = pods_of(sandbox, LENT)
    first = [pod(f"f-{i}", FIRST, "2", pool="room", priorityClassName="eq-0") for i in range(6)]
    create_in_order(sandbox, first[:2])
    for body in first[2:]:  # in order, creationTimestamp (whole seconds) apart
        sandbox.create_pods([body])
        time.sleep(1.1)
    assert wait_bound(sandbox, FIRST, ["f-2"], 1) < BOUND_WELL_BEFORE_THE_FLUSH
    expected = "would be borrowed beyond what other namespaces leave unused of their min"

    def later_refused() -> bool:
        return all(expected in scheduling_message(sandbox, FIRST, f"f-{i}") for i in range(3, 6))

    wait_for(later_refused, timeout=30, what="the later pods refused by the sum of min")
    # a few more quota passes: nothing else is taken, and the later pods still wait
    passes = exported(lagging_annotator, "loadsched_annotator_quota_passes_total")
    wait_for(
        lambda: exported(lagging_annotator, "loadsched_annotator_quota_passes_total") >= passes + 3,
        timeout=30,
        what="three more quota passes",
    )
    placed = pods_of(sandbox, FIRST)
    assert {name for name, (_, node) in placed.items() if node} == {"f-0", "f-1", "f-2"}
    after = pods_of(sandbox, LENT)
    assert len(after) == 2 and all(after[name] == before[name] for name in after)
    assert any(reason == "Reclaiming" for reason, _ in events_for(sandbox, FIRST, "f-2"))
