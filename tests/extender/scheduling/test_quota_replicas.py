"""Two extender replicas sharing elastic-quota admission through the ElasticQuota object:
each replica's ledger sees only its own watch; the patch guarded by resourceVersion makes
the second of two concurrent admissions decide again on the first's reservation."""

from __future__ import annotations

import json
from typing import Any

import httpx
import msgspec
import pytest

from extender.scheduling.metrics import ExtenderMetrics
from extender.scheduling.quota_gate import QuotaGate
from shared.kube.retrying import RetryPolicy
from shared.pods import POD_DECODER
from shared.quota_ledger import ADMITTED_ANNOTATION, QUOTA_DECODER, QuotaLedger
from tests.fakes.clock import Clock
from tests.quota_objects import elastic_quota, quota_pod

pytestmark = pytest.mark.anyio

PATH = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/a/elasticquotas/quota"


class FakeQuotaObject:
    """One ElasticQuota as the API server keeps it: GET, and merge PATCH of annotations
    with a ``resourceVersion`` precondition (409 when it is not the current one)."""

    def __init__(self, obj: dict[str, Any]) -> None:
        self.obj = obj
        self.conflicts = 0
        self.status = 0
        """Answer every PATCH with this status instead (0: apply it)."""

    async def handler(self, request: httpx.Request) -> httpx.Response:
        assert request.url.path == PATH
        if request.method == "GET":
            return httpx.Response(200, json=self.obj)
        if self.status:
            return httpx.Response(self.status, json={"kind": "Status", "code": self.status})
        meta = json.loads(request.content)["metadata"]
        current = self.obj["metadata"]
        if meta["resourceVersion"] != current["resourceVersion"]:
            self.conflicts += 1
            return httpx.Response(409, json={"kind": "Status", "code": 409, "reason": "Conflict"})
        current["annotations"] = {**current.get("annotations", {}), **meta["annotations"]}
        current["resourceVersion"] = str(int(current["resourceVersion"]) + 1)
        return httpx.Response(200, json=self.obj)


def replica(api: FakeQuotaObject, quota: dict[str, Any]) -> QuotaGate:
    """A replica whose quota watch listed ``quota`` (as it was then) and no pods."""
    ledger = QuotaLedger(shared_admission=True, wall_clock=Clock().time)
    ledger.quota_store.replace([QUOTA_DECODER.decode(msgspec.json.encode(quota))])
    gate = QuotaGate(ledger, allocatable=lambda _: None, metrics=ExtenderMetrics())
    client = httpx.AsyncClient(transport=httpx.MockTransport(api.handler), base_url="http://k")
    gate.attach(client, RetryPolicy(attempts=1))
    return gate


def pending(name: str, cpu: str) -> Any:
    body = quota_pod(name, "a", cpu, uid=f"uid-{name}")
    return POD_DECODER.decode(msgspec.json.encode(body))


async def admit(gate: QuotaGate, name: str, cpu: str) -> bool:
    """filter's quota steps for one pod: decide here, assume, then record."""
    pod = pending(name, cpu)
    request = gate.request_of(pod)
    if not gate.admit(pod, request).admitted:
        return False
    gate.assume(pod, request)
    return (await gate.record(pod, request)).admitted


async def test_the_second_replica_decides_again_on_the_first_ones_admission() -> None:
    quota = elastic_quota("a", min={"cpu": 2}, max={"cpu": 2})
    api = FakeQuotaObject(json.loads(json.dumps(quota)))
    one, two = replica(api, quota), replica(api, quota)

    assert await admit(one, "p1", "1500m")
    # two has not seen p1 (its watches are behind): alone it would admit 1500m more
    assert await admit(two, "p2", "1500m") is False
    assert api.conflicts == 1
    assert not two.ledger.is_assumed("uid-p2")  # the refusal drops the assumption
    assert await admit(two, "p3", "500m")  # what is left of max is still admitted
    assert await admit(one, "p4", "100m") is False
    reserved = json.loads(api.obj["metadata"]["annotations"][ADMITTED_ANNOTATION])
    assert sorted(reserved) == ["uid-p1", "uid-p3"]


async def test_a_reservation_counts_until_its_pod_is_seen_and_never_twice() -> None:
    quota = elastic_quota("a", min={"cpu": 2}, max={"cpu": 2})
    api = FakeQuotaObject(json.loads(json.dumps(quota)))
    one, two = replica(api, quota), replica(api, quota)
    assert await admit(one, "p1", "1")
    two.ledger.quota_store.apply("MODIFIED", QUOTA_DECODER.decode(json.dumps(api.obj)))
    assert two.ledger.namespace_used("a") == {}
    assert two.ledger.reserved() == {"a": {"cpu": 1}}
    bound = quota_pod("p1", "a", "1", uid="uid-p1", node="n1")
    two.ledger.pod_store.apply("MODIFIED", POD_DECODER.decode(msgspec.json.encode(bound)))
    assert two.ledger.reserved() == {}  # counted once, as the bound pod
    assert two.ledger.state().use_of("a") == {"cpu": 1}
    two.ledger.pod_store.apply("DELETED", POD_DECODER.decode(msgspec.json.encode(bound)))
    # gone: its reservation, still live on the object, holds nothing
    assert two.ledger.reserved() == {}
    assert two.ledger.namespace_used("a") == {}


@pytest.mark.parametrize(("status", "admitted"), [(403, True), (404, True), (500, False)])
async def test_when_the_admission_cannot_be_written(status: int, admitted: bool) -> None:
    """No right to patch (an older chart) or no object: the replica's own decision stands,
    as before; the API server failing: refused for now (kube-scheduler retries)."""
    quota = elastic_quota("a", min={"cpu": 2}, max={"cpu": 2})
    api = FakeQuotaObject(json.loads(json.dumps(quota)))
    api.status = status
    gate = replica(api, quota)
    assert await admit(gate, "p1", "1") is admitted
    assert gate.ledger.is_assumed("uid-p1") is admitted
