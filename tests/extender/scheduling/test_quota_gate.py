from typing import Any

import httpx
import pytest

from extender.app import create_app
from extender.scheduling import quota_gate
from extender.settings import ExtenderSettings
from shared.errors import ConfigError
from tests.fakes.extender_calls import ClientFactory, wait_ready
from tests.fakes.kube import FakeCluster, FakeCollection
from tests.fakes.quota_cluster import SEVEN_CPU, story_cluster, story_node, story_pods
from tests.payloads import encode, full_args, names_args
from tests.quota_objects import elastic_quota, quota_pod

pytestmark = pytest.mark.anyio


async def ready_client(make_client: ClientFactory, **settings: object) -> httpx.AsyncClient:
    client = await make_client(
        fake=settings.pop("cluster", None) or story_cluster(), elastic_quota=True, **settings
    )
    return await wait_ready(client)


async def test_readiness_waits_for_pods_and_quotas(make_client: ClientFactory) -> None:
    client = await ready_client(make_client)
    assert "node cache holds 2 nodes" in (await client.get("/readyz")).text
    metrics = (await client.get("/metrics")).text
    assert 'loadsched_extender_elastic_quotas{state="active"} 2.0' in metrics
    assert "loadsched_extender_quota_cached_pods 7.0" in metrics


async def test_over_max_is_unresolvable_on_every_node(make_client: ClientFactory) -> None:
    client = await ready_client(make_client)
    pod = quota_pod("big", "a", 3)  # a: 8 + 3 = 11 > max 10
    answer = (await client.post("/filter", content=encode(names_args(["n1", "n2"], pod)))).json()
    message = "elastic quota of namespace a: cpu used + request 11 > max 10"
    assert answer["NodeNames"] == []
    assert answer["FailedAndUnresolvableNodes"] == {"n1": message, "n2": message}
    assert answer["FailedNodes"] == {}
    full = full_args([story_node("n1", 1)], pod)
    answer = (await client.post("/filter", content=encode(full))).json()
    assert answer["Nodes"] == {"items": []} and answer["FailedAndUnresolvableNodes"] == {
        "n1": message
    }
    metrics = (await client.get("/metrics")).text
    assert 'loadsched_extender_quota_rejections_total{outcome="unresolvable"} 2.0' in metrics


async def test_preemptible_rejection_goes_to_failed_nodes(make_client: ClientFactory) -> None:
    client = await ready_client(make_client)
    # a's job pods (priority 0) hold 4 CPU: a priority-10 pod of 3 CPU could preempt them
    pod = quota_pod("vip", "a", 3, priority=10)
    answer = (await client.post("/filter", content=encode(names_args(["n1", "n2"], pod)))).json()
    assert set(answer["FailedNodes"]) == {"n1", "n2"} and answer["FailedAndUnresolvableNodes"] == {}


async def test_namespace_without_quota_is_unaffected(make_client: ClientFactory) -> None:
    client = await ready_client(make_client)
    pod = quota_pod("huge", "other", 1000)
    answer = (await client.post("/filter", content=encode(names_args(["n1", "n2"], pod)))).json()
    assert answer["NodeNames"] == ["n1", "n2"]


async def test_admitted_pods_are_assumed_until_bound(make_client: ClientFactory) -> None:
    client = await ready_client(make_client)
    first = await client.post(
        "/filter", content=encode(names_args(["n1"], quota_pod("p1", "a", 2)))
    )
    assert first.json()["NodeNames"] == ["n1"]  # a: 8 + 2 = 10
    second = await client.post(
        "/filter", content=encode(names_args(["n1"], quota_pod("p2", "a", 2)))
    )
    assert second.json()["NodeNames"] == []  # p1 counts although not bound yet
    # the same pod asking again is not counted twice
    again = await client.post(
        "/filter", content=encode(names_args(["n1"], quota_pod("p1", "a", 2)))
    )
    assert again.json()["NodeNames"] == ["n1"]


def preempt_body(pod: dict[str, Any], victims: dict[str, list[str]]) -> bytes:
    return encode(
        {
            "Pod": pod,
            "NodeNameToMetaVictims": {
                n: {"Pods": [{"UID": u} for u in uids], "NumPDBViolations": 0}
                for n, uids in victims.items()
            },
        }
    )


async def test_reclaiming_preemption_takes_a_borrowers_pod(make_client: ClientFactory) -> None:
    client = await ready_client(make_client)
    # kube-scheduler proposes only the lower-priority pods of namespaces without quotas
    body = preempt_body(
        quota_pod("job-2", "b", 5), {"n1": ["uid-other-low"], "n2": ["uid-other2-low"]}
    )
    answer = (await client.post("/preempt", content=body)).json()
    # n1: freeing 5 would push a below its min; n2: a's newest job pod is enough
    assert answer == {
        "NodeNameToMetaVictims": {"n2": {"Pods": [{"UID": "uid-a-job-1"}], "NumPDBViolations": 0}}
    }


async def test_a_victim_just_named_is_not_named_again(make_client: ClientFactory) -> None:
    """The watch has not shown a's job-1 deleted when b's next pod preempts: kube-scheduler
    no longer has it (naming it again fails the preemption), and with it gone a is at its
    min, so nothing of a's may go; nor when kube-scheduler, its cache behind, proposes it
    itself: its room is job-2's."""
    client = await ready_client(make_client)
    proposal = {"n1": ["uid-other-low"], "n2": ["uid-other2-low"]}
    first = await client.post(
        "/preempt", content=preempt_body(quota_pod("job-2", "b", 5), proposal)
    )
    assert first.json()["NodeNameToMetaVictims"]["n2"]["Pods"] == [{"UID": "uid-a-job-1"}]
    second = await client.post(
        "/preempt", content=preempt_body(quota_pod("job-3", "b", 5), proposal)
    )
    assert second.json() == {"NodeNameToMetaVictims": {}}
    metrics = (await client.get("/metrics")).text
    assert 'loadsched_extender_quota_preemptions_total{outcome="dropped"} 3.0' in metrics
    proposed_again = preempt_body(quota_pod("job-3", "b", 5), {"n2": ["uid-a-job-1"]})
    third = (await client.post("/preempt", content=proposed_again)).json()
    assert third == {"NodeNameToMetaVictims": {}}


async def test_a_victim_named_long_ago_may_be_named_again(
    make_client: ClientFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past OFFERED_FOR, a victim the ledger still holds was not chosen (kube-scheduler took
    another node): it is a candidate again."""
    monkeypatch.setattr(quota_gate, "OFFERED_FOR", 0.0)
    client = await ready_client(make_client)
    proposal = {"n1": ["uid-other-low"], "n2": ["uid-other2-low"]}
    for name in ("job-2", "job-3"):
        body = preempt_body(quota_pod(name, "b", 5), proposal)
        answer = (await client.post("/preempt", content=body)).json()
        assert answer["NodeNameToMetaVictims"]["n2"]["Pods"] == [{"UID": "uid-a-job-1"}]


async def test_borrowing_preemption_stays_in_its_namespace(make_client: ClientFactory) -> None:
    client = await ready_client(make_client)
    # a is over its min: it may only preempt its own lower-priority pods, and only enough of
    # them that its quota admits the preemptor (a: 8 - 2 + 4 = 10 <= max). On n1 the only
    # one (2 CPU) does not free enough room: n1 is dropped.
    pod = quota_pod("vip", "a", 4, priority=10)
    body = preempt_body(pod, {"n1": ["uid-other-low"], "n2": ["uid-other2-low"]})
    answer = (await client.post("/preempt", content=body)).json()["NodeNameToMetaVictims"]
    assert answer == {"n2": {"Pods": [{"UID": "uid-a-job-1"}], "NumPDBViolations": 0}}


async def test_preemption_without_quota_keeps_the_schedulers_victims(
    make_client: ClientFactory,
) -> None:
    client = await ready_client(make_client)
    body = preempt_body(quota_pod("x", "other", 1, priority=5), {"n1": ["uid-other-low"]})
    answer = (await client.post("/preempt", content=body)).json()
    assert answer["NodeNameToMetaVictims"]["n1"]["Pods"] == [{"UID": "uid-other-low"}]


async def test_full_victims_are_accepted_too(make_client: ClientFactory) -> None:
    client = await ready_client(make_client)
    body = encode(
        {
            "Pod": quota_pod("job-2", "b", 5),
            "NodeNameToVictims": {
                "n2": {
                    "Pods": [quota_pod("low", "other2", "500m", node="n2")],
                    "NumPDBViolations": 1,
                }
            },
        }
    )
    answer = (await client.post("/preempt", content=body)).json()["NodeNameToMetaVictims"]
    assert answer == {"n2": {"Pods": [{"UID": "uid-a-job-1"}], "NumPDBViolations": 1}}


async def test_a_lender_is_refused_by_the_sum_of_min_and_takes_it_back(
    make_client: ClientFactory,
) -> None:
    """The issue's second case: b stays within its min, but a borrowed it (a at 10) while
    n2 still has room. The pod is refused like every pod over the sum of min, in
    FailedNodes; at preempt the borrower's pods make room and give the pool back."""
    extra = quota_pod("extra", "a", 2, node="n2", created="2026-11-22T10:02:00Z")
    cluster = story_cluster([*story_pods(), extra])
    roomy = story_node("n2", 2)
    roomy["status"]["allocatable"] = {**SEVEN_CPU, "cpu": "9"}
    cluster.collections["/api/v1/nodes"] = FakeCollection([(5, [story_node("n1", 1), roomy])])
    client = await ready_client(make_client, cluster=cluster)
    pod = quota_pod("job-2", "b", 6, priority=100)  # b: 3 + 6 = 9 <= 12; all: 13 + 6 = 19
    answer = (await client.post("/filter", content=encode(names_args(["n1", "n2"], pod)))).json()
    assert answer["NodeNames"] == [] and set(answer["FailedNodes"]) == {"n1", "n2"}
    assert "cpu of its min is lent to namespaces over theirs" in answer["FailedNodes"]["n1"]
    body = preempt_body(pod, {"n2": ["uid-a-job-1", "uid-a-extra"]})
    answer = (await client.post("/preempt", content=body)).json()["NodeNameToMetaVictims"]
    # n2 lacks 3.5 CPU and the pool 1: both of a's job pods there (a back at its min of 6),
    # never the notebook
    assert answer == {
        "n2": {"Pods": [{"UID": "uid-a-extra"}, {"UID": "uid-a-job-1"}], "NumPDBViolations": 0}
    }


async def test_preempt_counts_room_promised_to_admitted_pods(make_client: ClientFactory) -> None:
    """The issue's third case: b's pods p1 (1 CPU) and p3 (2 CPU) were admitted at filter,
    and kube-scheduler placed p1 on n2; the watch has not shown the binding. By bound pods
    alone n2 has 3 CPU free and b's next pod (2.5 CPU) fits, so the node used to be dropped
    ("no legal victims") although kube-scheduler found it short."""
    client = await ready_client(make_client)
    for name, cores in (("p1", 1), ("p3", 2)):
        admitted = await client.post(
            "/filter", content=encode(names_args(["n1", "n2"], quota_pod(name, "b", cores)))
        )
        assert admitted.json()["NodeNames"] == ["n1", "n2"]
    pod = quota_pod("p2", "b", "2500m", priority=100)
    # kube-scheduler's victim is the pod without a quota (-10): in its view 0.5 CPU is short
    body = preempt_body(pod, {"n2": ["uid-other2-low"]})
    answer = (await client.post("/preempt", content=body)).json()["NodeNameToMetaVictims"]
    # a lender takes from borrowers only: a's newest job pod. Counting all promised room
    # here (3 CPU) would need 2.5 and push a below its min; kube-scheduler's view caps it
    assert answer == {"n2": {"Pods": [{"UID": "uid-a-job-1"}], "NumPDBViolations": 0}}
    metrics = (await client.get("/metrics")).text
    assert 'loadsched_extender_quota_preemptions_total{outcome="replaced"} 1.0' in metrics


def with_memory(body: dict[str, Any], memory: str) -> dict[str, Any]:
    body["spec"]["containers"][0]["resources"]["requests"]["memory"] = memory
    return body


async def test_a_borrower_in_any_resource_is_a_victim(make_client: ClientFactory) -> None:
    """The issue's first case: x is over its memory min and under its CPU min; y, within
    its min, needs memory on a node full of it."""
    full = story_node("n1", 1)
    full["status"]["allocatable"] = {"cpu": "8", "memory": "8Gi", "pods": "110"}
    pods = [
        with_memory(
            quota_pod(f"x{i}", "x", "300m", node="n1", created=f"2026-11-22T10:0{i}:00Z"), "2Gi"
        )
        for i in range(3)
    ]
    pods.append(with_memory(quota_pod("y0", "y", 1, node="n1"), "2Gi"))
    cluster = FakeCluster(
        {
            "/api/v1/nodes": FakeCollection([(5, [full])]),
            "/api/v1/pods": FakeCollection([(5, pods)]),
            "/apis/scheduling.x-k8s.io/v1alpha1/elasticquotas": FakeCollection(
                [
                    (
                        5,
                        [
                            elastic_quota("x", min={"cpu": 4, "memory": "4Gi"}),
                            elastic_quota("y", min={"cpu": 4, "memory": "8Gi"}),
                        ],
                    )
                ]
            ),
        }
    )
    client = await ready_client(make_client, cluster=cluster)
    pod = with_memory(quota_pod("y1", "y", 1, priority=10), "2Gi")
    body = preempt_body(pod, {"n1": ["uid-y-y0"]})  # kube-scheduler's own, lower priority
    answer = (await client.post("/preempt", content=body)).json()["NodeNameToMetaVictims"]
    assert answer == {"n1": {"Pods": [{"UID": "uid-x-x2"}], "NumPDBViolations": 0}}


async def test_malformed_pod_request_is_a_400_naming_the_field(make_client: ClientFactory) -> None:
    client = await ready_client(make_client)
    pod = quota_pod("bad", "a", "lots")
    response = await client.post("/filter", content=encode(names_args(["n1"], pod)))
    assert response.status_code == 400
    assert "spec.containers[0].resources.requests.cpu" in response.json()["detail"]
    response = await client.post("/preempt", content=preempt_body(pod, {"n1": ["x"]}))
    assert response.status_code == 400


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_elastic_quota_needs_a_cluster() -> None:
    with pytest.raises(ConfigError, match="elastic-quota"):
        create_app(ExtenderSettings(elastic_quota=True))
