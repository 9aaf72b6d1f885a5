"""The elastic-quota controller against a recording fake API (evictions, events, status)."""

import asyncio
import copy
import json
from fractions import Fraction
from typing import Any

import httpx
import msgspec
import pytest

from annotator.evicting import TokenBucket
from annotator.metrics import AnnotatorMetrics, quota_series
from annotator.objects import NODE_DECODER, NodeStore
from annotator.quota.controller import QuotaController, WaitingPods
from annotator.recording import EventRecorder
from shared.pods import POD_DECODER
from shared.quota import ElasticQuota
from shared.quota_ledger import QUOTA_DECODER, QuotaLedger
from tests.fakes.clock import Clock
from tests.quota_objects import elastic_quota, quota_pod

pytestmark = pytest.mark.anyio

QUOTAS = "/apis/scheduling.x-k8s.io/v1alpha1"


class FakeAPI:
    def __init__(self, eviction_status: int = 201, quota_status: int = 200) -> None:
        self.requests: list[tuple[str, str, Any]] = []
        self.eviction_status = eviction_status
        self.quota_status = quota_status
        self.quotas: dict[str, dict[str, Any]] = {}
        """ElasticQuota objects by path: a patch of one is answered with the object patched
        (its annotations merged, its resourceVersion the next), as the API server does."""

    def serve_quotas(self, quotas: list[dict[str, Any]]) -> None:
        for q in quotas:
            meta = q["metadata"]
            path = f"{QUOTAS}/namespaces/{meta['namespace']}/elasticquotas/{meta['name']}"
            self.quotas[path] = copy.deepcopy(q)

    def handler(self, request: httpx.Request) -> httpx.Response:
        body: Any = json.loads(request.content) if request.content else None
        self.requests.append((request.method, request.url.path, body))
        quota = self.quotas.get(request.url.path)
        if quota is not None and request.method == "PATCH":
            if self.quota_status != 200:
                return httpx.Response(self.quota_status, json={"code": self.quota_status})
            meta = quota["metadata"]
            meta.setdefault("annotations", {}).update(body["metadata"]["annotations"])
            meta["resourceVersion"] = str(int(meta.get("resourceVersion") or 1) + 1)
            return httpx.Response(200, json=quota)
        if request.url.path.endswith("/eviction"):
            if self.eviction_status == 429:
                return httpx.Response(
                    429,
                    json={"code": 429, "reason": "TooManyRequests", "message": "violates PDB"},
                )
            return httpx.Response(self.eviction_status, json={})
        return httpx.Response(200, json={})

    def paths(self, suffix: str) -> list[str]:
        return [path for _, path, _ in self.requests if path.endswith(suffix)]

    def events(self) -> list[tuple[str, str, str]]:
        return [
            (b["involvedObject"]["name"], b["reason"], b["message"])
            for m, path, b in self.requests
            if path.endswith("/events")
        ]


def node(
    name: str, cpu: str = "7", labels: dict[str, str] | None = None, memory: str = "64Gi"
) -> Any:
    return NODE_DECODER.decode(
        msgspec.json.encode(
            {
                "metadata": {"name": name, "labels": labels or {}},
                "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"}},
            }
        )
    )


def pod(*args: Any, memory: str = "", **kwargs: Any) -> Any:
    body = quota_pod(*args, **kwargs)
    if memory:
        body["spec"]["containers"][0]["resources"]["requests"]["memory"] = memory
    return POD_DECODER.decode(msgspec.json.encode(body))


def story(
    api: FakeAPI,
    *,
    dry_run: bool = False,
    per_minute: float = 30,
    clock: Clock | None = None,
    extra_pods: list[Any] = (),  # type: ignore[assignment]
    quotas: list[dict[str, Any]] | None = None,
    pods: list[Any] | None = None,
    nodes: list[Any] | None = None,
    metrics: AnnotatorMetrics | None = None,
) -> QuotaController:
    clock = clock or Clock()
    ledger = QuotaLedger(shared_admission=True, wall_clock=clock.time)
    quotas = quotas or [
        elastic_quota("a", min={"cpu": 6}, max={"cpu": 10}),
        elastic_quota("b", min={"cpu": 12}, max={"cpu": 14}),
    ]
    api.serve_quotas(quotas)
    ledger.quota_store.replace([QUOTA_DECODER.decode(msgspec.json.encode(q)) for q in quotas])
    if pods is None:
        pods = [
            pod("job-0", "a", 2, node="n1"),
            pod("nb-0", "a", 2, node="n1", priority=1000000, never=True),
            pod("job-1-b", "b", 3, node="n1"),
            pod("job-1", "a", 2, node="n2", created="2026-11-22T10:01:00Z"),
            pod("nb-1", "a", 2, node="n2", priority=1000000, never=True),
        ]
    pods = [*pods, *extra_pods]
    ledger.pod_store.replace(pods)
    store = NodeStore()
    store.replace(nodes or [node("n1"), node("n2")])
    waiting = WaitingPods()
    waiting.replace(pods)
    client = httpx.AsyncClient(
        transport=httpx.MockTransport(api.handler), base_url="https://api.test"
    )
    return QuotaController(
        kube=client,
        ledger=ledger,
        nodes=store,
        waiting=waiting,
        recorder=EventRecorder(client, instance="test", monotonic=clock.monotonic),
        metrics=metrics or AnnotatorMetrics(),
        dry_run=dry_run,
        evictions_per_minute=per_minute,
        grace_seconds=0,
        monotonic=clock.monotonic,
    )


async def test_status_used_is_written_once_and_kept_current() -> None:
    api = FakeAPI()
    controller = story(api)
    await controller.write_status()
    patches = {path: body for m, path, body in api.requests if m == "PATCH"}
    base = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces"
    assert patches == {
        f"{base}/a/elasticquotas/quota/status": {"status": {"used": {"cpu": "8"}}},
        f"{base}/b/elasticquotas/quota/status": {"status": {"used": {"cpu": "3"}}},
    }
    # the watch brings the written status back: nothing more to write
    written = elastic_quota("a", min={"cpu": 6}, max={"cpu": 10}) | {
        "status": {"used": {"cpu": "8"}}
    }
    controller.ledger.quota_store.apply(
        "MODIFIED", QUOTA_DECODER.decode(msgspec.json.encode(written))
    )
    api.requests.clear()
    await controller.write_status()
    assert [p for _, p, _ in api.requests] == [f"{base}/b/elasticquotas/quota/status"]
    # a resource no longer used is removed from status.used
    controller.ledger.pod_store.apply("DELETED", pod("job-1-b", "b", 3, node="n1"))
    stale = elastic_quota("b", min={"cpu": 12}) | {
        "status": {"used": {"cpu": "3", "memory": "1Gi"}}
    }
    controller.ledger.quota_store.apply(
        "MODIFIED", QUOTA_DECODER.decode(msgspec.json.encode(stale))
    )
    api.requests.clear()
    await controller.write_status()
    assert api.requests[0][2] == {"status": {"used": {"cpu": None, "memory": None}}}


async def test_reclaim_evicts_one_borrower_job_pod_and_records_events() -> None:
    api = FakeAPI()
    clock = Clock()
    controller = story(api, clock=clock, extra_pods=[pod("job-2", "b", 5, unschedulable=True)])
    await controller.reclaim()
    evictions = [(path, body) for m, path, body in api.requests if path.endswith("/eviction")]
    assert evictions == [
        (
            "/api/v1/namespaces/a/pods/job-1/eviction",
            {
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": {"name": "job-1", "namespace": "a"},
                "deleteOptions": {"preconditions": {"uid": "uid-a-job-1"}, "gracePeriodSeconds": 0},
            },
        )
    ]
    events = api.events()
    assert ("job-2", "Reclaiming") == events[0][:2] and "a/job-1 on node n2" in events[0][2]
    assert ("job-1", "Reclaimed") == events[1][:2]
    # the waiting pod is nominated to the node, so the scheduler keeps the room for it
    nominations = [b for m, p, b in api.requests if p.endswith("/pods/job-2/status")]
    assert nominations == [
        {"metadata": {"uid": "uid-b-job-2"}, "status": {"nominatedNodeName": "n2"}}
    ]
    # while it waits its nomination is re-asserted if lost; the room is still there (it is
    # not counted against itself): nothing more to do
    api.requests.clear()
    controller.ledger.pod_store.apply("DELETED", pod("job-1", "a", 2, node="n2"))
    await controller.reclaim()
    assert api.paths("/eviction") == [] and api.events() == []
    assert api.paths("/pods/job-2/status") == ["/api/v1/namespaces/b/pods/job-2/status"]
    # another pod took the room: planned again at once, but a is at its min now
    controller.ledger.pod_store.apply("ADDED", pod("squatter", "other", 3, node="n2"))
    await controller.reclaim()
    assert api.paths("/eviction") == [] and api.events()[-1][1] == "ReclaimImpossible"
    # the nomination is re-asserted for in_flight_seconds only
    clock.advance(61)
    await controller.reclaim()
    assert controller.in_flight == {}


async def test_reclaim_gives_a_lender_its_guarantee_back_while_nodes_have_room() -> None:
    """The issue's second case: a borrowed 4 (a at 10) while b was idle; b's job-2 stays
    within b's min but is refused, 13 + 6 > 18 of min, although n3 is empty."""
    api = FakeAPI()
    extra = pod("extra", "a", 2, node="n2", created="2026-11-22T10:02:00Z")
    controller = story(
        api,
        extra_pods=[extra, pod("job-2", "b", 6, unschedulable=True)],
        nodes=[node("n1"), node("n2"), node("n3")],
    )
    await controller.reclaim()
    # a's newest job pod (on n2) is enough for the pool; the pod goes to n3, where it fits.
    # The room is promised to it and it is nominated first, so its use counts before the
    # room is freed.
    writes = [(m, p) for m, p, _ in api.requests if m != "POST" or "/events" not in p]
    assert writes == [
        ("PATCH", f"{QUOTAS}/namespaces/b/elasticquotas/quota"),
        ("PATCH", "/api/v1/namespaces/b/pods/job-2/status"),
        ("POST", "/api/v1/namespaces/a/pods/extra/eviction"),
    ]
    nominations = [b for _, p, b in api.requests if p.endswith("/pods/job-2/status")]
    assert nominations[0]["status"] == {"nominatedNodeName": "n3"}
    assert "a/extra on node n2" in api.events()[0][2] and "on node n3" in api.events()[0][2]


async def test_the_room_freed_goes_to_the_pod_it_was_freed_for() -> None:
    """b (min 12, using 3) waits with job-2 (6 CPU) while a borrows; then b's job-3 (4 CPU),
    of the same priority, waits too: with job-2's room it would borrow, without it not. kube-scheduler clears job-2's nomination after a failed attempt:
    the promise on b's ElasticQuota still holds job-2's room, first come first served."""
    api = FakeAPI()
    clock = Clock()
    extra = pod("extra", "a", 2, node="n2", created="2026-11-22T10:02:00Z")
    job_2 = pod("job-2", "b", 6, unschedulable=True, created="2026-11-22T10:03:00Z")
    controller = story(
        api, clock=clock, extra_pods=[extra, job_2], nodes=[node("n1"), node("n2"), node("n3")]
    )
    await controller.reclaim()
    ledger = controller.ledger
    (patch,) = [b for _, p, b in api.requests if p.endswith("/elasticquotas/quota")]
    promise = json.loads(patch["metadata"]["annotations"]["loadsched.io/admitted"])
    assert promise == {"uid-b-job-2": [clock.time() + 60, {"cpu": "6"}, 0]}  # a minute from now
    # the victim is gone; job-2's nomination was cleared by a failed attempt
    ledger.pod_store.apply("DELETED", extra)
    ledger.pod_store.apply("MODIFIED", job_2)
    job_3 = pod("job-3", "b", 4, unschedulable=True, created="2026-11-22T10:04:00Z")
    ledger.pod_store.apply("ADDED", job_3)
    controller.waiting.apply("ADDED", job_3)
    refused = ledger.admit(job_3, job_3.request())
    assert not refused.admitted and "borrowed beyond" in (refused.message or "")
    assert ledger.admit(job_2, job_2.request()).admitted
    # a pod of higher priority is not held back by it (CapacityScheduling's nominated pods)
    urgent = pod("urgent", "b", 4, priority=100)
    assert ledger.admit(urgent, urgent.request()).admitted
    # the controller takes nothing more for job-3: job-2's room is not job-3's to reclaim
    api.requests.clear()
    await controller.reclaim()
    assert api.paths("/eviction") == []
    # job-2 bound: the promise holds nothing more, and job-3 is judged on what is used
    ledger.pod_store.apply("MODIFIED", pod("job-2", "b", 6, node="n3"))
    assert ledger.reserved(without=job_3.metadata.uid, priority=0) == {}
    # unbound past its deadline, it would have lapsed as well
    ledger.pod_store.apply("MODIFIED", job_2)
    assert ledger.reserved(priority=0) == {"b": {"cpu": Fraction(6)}}
    clock.advance(61)
    assert ledger.reserved(priority=0) == {}


async def test_no_eviction_when_the_room_cannot_be_promised() -> None:
    api = FakeAPI(quota_status=403)
    controller = story(api, extra_pods=[pod("job-2", "b", 5, unschedulable=True)])
    await controller.reclaim()
    assert api.paths("/eviction") == [] and api.paths("/pods/job-2/status") == []
    assert len(api.paths("/elasticquotas/quota")) == 1


async def test_reclaim_takes_from_a_borrower_in_any_resource() -> None:
    """The issue's first case: x uses 1 CPU and 6 GiB against its min of 4 CPU and 4 GiB;
    y, within its min, needs 2 GiB on a node full of memory."""
    api = FakeAPI()
    controller = story(
        api,
        quotas=[
            elastic_quota("x", min={"cpu": 4, "memory": "4Gi"}),
            elastic_quota("y", min={"cpu": 4, "memory": "8Gi"}),
        ],
        pods=[
            pod(f"x{i}", "x", "300m", node="n1", memory="2Gi", created=f"2026-11-22T10:0{i}:00Z")
            for i in range(3)
        ]
        + [pod("y0", "y", 1, node="n1", memory="2Gi")],
        extra_pods=[pod("y1", "y", 1, memory="2Gi", unschedulable=True)],
        nodes=[node("n1", cpu="8", memory="8Gi")],
    )
    await controller.reclaim()
    assert api.paths("/eviction") == ["/api/v1/namespaces/x/pods/x2/eviction"]
    # 4 GiB would leave x below its memory min: impossible, and said so
    api.requests.clear()
    controller.in_flight.clear()
    controller.ledger.pod_store.apply("DELETED", pod("x2", "x", "300m", node="n1"))
    bound = pod("y1", "y", 1, node="n1", memory="2Gi")
    controller.ledger.pod_store.apply("MODIFIED", bound)
    controller.waiting.apply("MODIFIED", bound)
    controller.waiting.apply("ADDED", pod("y2", "y", 1, memory="4Gi", unschedulable=True))
    await controller.reclaim()
    assert api.paths("/eviction") == [] and api.events()[-1][1] == "ReclaimImpossible"


async def test_the_next_plan_waits_until_the_victims_are_gone() -> None:
    api = FakeAPI()
    waiting = [pod("job-2", "b", 5, unschedulable=True), pod("job-3", "b", 1, unschedulable=True)]
    controller = story(api, extra_pods=waiting)
    await controller.reclaim()
    assert api.paths("/eviction") == ["/api/v1/namespaces/a/pods/job-1/eviction"]
    # the watch still shows job-1: planning for job-3 now would count it
    api.requests.clear()
    await controller.reclaim()
    assert api.paths("/eviction") == [] and api.events() == []
    # it is gone and job-2 nominated: a is at its min, nothing more can be taken for job-3
    controller.ledger.pod_store.apply("DELETED", pod("job-1", "a", 2, node="n2"))
    nominated = pod("job-2", "b", 5, nominated="n2", unschedulable=True)
    controller.ledger.pod_store.apply("MODIFIED", nominated)
    controller.waiting.apply("MODIFIED", nominated)
    await controller.reclaim()
    assert api.paths("/eviction") == []
    assert api.events() and api.events()[-1][:2] == ("job-3", "ReclaimImpossible")


async def test_a_nomination_is_withdrawn_when_nothing_was_evicted() -> None:
    api = FakeAPI(eviction_status=429)
    controller = story(api, extra_pods=[pod("job-2", "b", 5, unschedulable=True)])
    await controller.reclaim()
    nominations = [b["status"] for _, p, b in api.requests if p.endswith("/pods/job-2/status")]
    assert nominations == [{"nominatedNodeName": "n2"}, {"nominatedNodeName": None}]
    assert controller.in_flight == {}


async def test_no_eviction_without_a_waiting_pod_of_a_lender() -> None:
    api = FakeAPI()
    # a's own waiting pod is borrowing, not reclaiming; other's has no quota
    controller = story(
        api,
        extra_pods=[
            pod("more", "a", 2, unschedulable=True),
            pod("free", "other", 5, unschedulable=True),
        ],
    )
    await controller.reclaim()
    assert api.paths("/eviction") == [] and api.events() == []


async def test_dry_run_records_but_does_not_evict() -> None:
    api = FakeAPI()
    controller = story(api, dry_run=True, extra_pods=[pod("job-2", "b", 5, unschedulable=True)])
    await controller.reconcile()
    assert api.paths("/eviction") == [] and [m for m, _, _ in api.requests if m == "PATCH"] == []
    assert [e[1] for e in api.events()] == ["Reclaiming", "Reclaimed"]
    assert api.events()[0][2].startswith("dry run: would evict a/job-1")


async def test_blocked_eviction_is_reported_and_retried() -> None:
    api = FakeAPI(eviction_status=429)
    controller = story(api, extra_pods=[pod("job-2", "b", 5, unschedulable=True)])
    await controller.reclaim()
    assert api.events()[-1][1] == "ReclaimBlocked" and "violates PDB" in api.events()[-1][2]
    api.eviction_status = 201
    await controller.reclaim()
    assert len(api.paths("/eviction")) == 2


async def test_rate_limit_defers_evictions() -> None:
    clock = Clock()
    api = FakeAPI()
    controller = story(
        api, per_minute=1, clock=clock, extra_pods=[pod("job-2", "b", 5, unschedulable=True)]
    )
    assert controller._bucket.take(1)  # spend the only token
    await controller.reclaim()
    assert api.paths("/eviction") == []
    clock.advance(60)
    await controller.reclaim()
    assert api.paths("/eviction") == ["/api/v1/namespaces/a/pods/job-1/eviction"]


async def test_node_selector_limits_where_room_is_made() -> None:
    api = FakeAPI()
    waiting = pod("job-2", "b", 5, unschedulable=True)
    waiting.spec.nodeSelector = {"pool": "gpu"}
    controller = story(api, extra_pods=[waiting])
    await controller.reclaim()
    assert api.paths("/eviction") == [] and api.events()[-1][1] == "ReclaimImpossible"


@pytest.mark.parametrize(
    ("tolerations", "evicted"),
    [
        ([], []),  # n2 is tainted, and n1 cannot be freed without a notebook: impossible
        (
            [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}],
            ["/api/v1/namespaces/a/pods/job-1/eviction"],
        ),
        ([{"operator": "Exists"}], ["/api/v1/namespaces/a/pods/job-1/eviction"]),
        ([{"key": "dedicated", "value": "cpu"}, {"key": 7}], []),  # another value; malformed
    ],
)
async def test_taints_limit_where_room_is_made(
    tolerations: list[dict[str, Any]], evicted: list[str]
) -> None:
    api = FakeAPI()
    waiting_body = quota_pod("job-2", "b", 5, unschedulable=True)
    waiting_body["spec"]["tolerations"] = tolerations
    tainted = NODE_DECODER.decode(
        msgspec.json.encode(
            {
                "metadata": {"name": "n2"},
                "spec": {"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]},
                "status": {"allocatable": {"cpu": "7", "memory": "64Gi", "pods": "110"}},
            }
        )
    )
    waiting = POD_DECODER.decode(msgspec.json.encode(waiting_body))
    controller = story(api, extra_pods=[waiting], nodes=[node("n1"), tainted])
    await controller.reclaim()
    assert api.paths("/eviction") == evicted
    if not evicted:
        assert api.events()[-1][1] == "ReclaimImpossible"


async def test_invalid_quota_is_reported_on_the_object() -> None:
    api = FakeAPI()
    controller = story(api)
    bad = elastic_quota("c", min={"cpu": "lots"})
    controller.ledger.quota_store.apply("ADDED", QUOTA_DECODER.decode(msgspec.json.encode(bad)))
    await controller.report_invalid()
    await controller.report_invalid()  # the same warning is not repeated
    assert api.events() == [
        (
            "quota",
            "InvalidElasticQuota",
            "ignored: spec.min.cpu: invalid quantity 'lots': expected a number with an optional suffix, such as 500m or 2Gi",
        )
    ]


def test_token_bucket() -> None:
    clock = Clock()
    bucket = TokenBucket(2, clock.monotonic)
    assert bucket.take(2) and not bucket.take(1)
    clock.advance(30)
    assert bucket.take(1) and not bucket.take(1)


def quota_object(namespace: str, **spec: Any) -> Any:
    return QUOTA_DECODER.decode(msgspec.json.encode(elastic_quota(namespace, **spec)))


def gauges(metrics: AnnotatorMetrics) -> dict[tuple[str, str, str], float]:
    """(min|max|used, namespace, resource) → value of every quota gauge series."""
    found = {}
    for family in metrics.registry.collect():
        if family.name.startswith("loadsched_annotator_quota_") and family.type == "gauge":
            for sample in family.samples:
                field = sample.name.rsplit("_", 1)[-1]
                if field in ("used", "min", "max"):
                    labels = sample.labels
                    found[field, labels["namespace"], labels["resource"]] = sample.value
    return found


async def test_a_pass_exports_use_min_and_max_of_every_quota() -> None:
    metrics = AnnotatorMetrics()
    quotas = [
        elastic_quota("a", min={"cpu": 6}, max={"cpu": 10, "memory": "4Gi"}),
        elastic_quota("b", min={"cpu": 12}),
    ]
    controller = story(FakeAPI(), quotas=quotas, metrics=metrics)
    await controller.reconcile()
    assert gauges(metrics) == {
        ("used", "a", "cpu"): 8,
        ("min", "a", "cpu"): 6,
        ("max", "a", "cpu"): 10,
        ("used", "a", "memory"): 0,  # governed (max names it), nothing requests it
        ("min", "a", "memory"): 0,
        ("max", "a", "memory"): 4 * 2**30,
        ("used", "b", "cpu"): 3,
        ("min", "b", "cpu"): 12,  # no max: unlimited, no series
    }
    # a quota deleted, another's max and a resource dropped: their series go at the next pass
    controller.ledger.quota_store.apply("DELETED", quota_object("b"))
    controller.ledger.quota_store.apply("MODIFIED", quota_object("a", min={"cpu": 6}, rv=2))
    controller.ledger.pod_store.apply("DELETED", pod("job-0", "a", 2, node="n1"))
    await controller.reconcile()
    assert gauges(metrics) == {("used", "a", "cpu"): 6, ("min", "a", "cpu"): 6}


async def test_a_replica_that_stops_leading_exports_no_quota_values() -> None:
    metrics = AnnotatorMetrics()
    controller = story(
        FakeAPI(), metrics=metrics, extra_pods=[pod("w", "b", 1, unschedulable=True)]
    )
    task = asyncio.create_task(controller.run(period=3600))
    get = metrics.registry.get_sample_value
    async with asyncio.timeout(5):  # the first pass has set the gauges
        while not (gauges(metrics) and get("loadsched_annotator_quota_waiting_pods") == 1):
            assert not task.done(), task
            await asyncio.sleep(0)
    task.cancel()  # what Annotator.lead does when the lease is lost
    with pytest.raises(asyncio.CancelledError):
        await task
    assert gauges(metrics) == {} and get("loadsched_annotator_quota_waiting_pods") == 0


@pytest.mark.parametrize(
    ("quota", "used", "expected"),
    [
        (ElasticQuota("a"), {"cpu": Fraction(1)}, {}),  # governs nothing
        (
            ElasticQuota("a", min={"cpu": Fraction(1, 2)}),
            {"cpu": Fraction(3, 4), "memory": Fraction(5)},  # memory is not governed
            {"used": {("a", "cpu"): 0.75}, "min": {("a", "cpu"): 0.5}},
        ),
        (
            ElasticQuota("a", max={"nvidia.com/gpu": Fraction(2)}),
            {},
            {
                "used": {("a", "nvidia.com/gpu"): 0},
                "min": {("a", "nvidia.com/gpu"): 0},
                "max": {("a", "nvidia.com/gpu"): 2},
            },
        ),
    ],
)
def test_quota_series(
    quota: ElasticQuota, used: dict[str, Fraction], expected: dict[str, Any]
) -> None:
    series = quota_series({"a": quota}, lambda _: used)
    assert {k: v for k, v in series.items() if v} == expected
