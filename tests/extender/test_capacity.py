"""Dispatch's "no node fits" check: a template's requests, nodeSelector and tolerations against
the nodes the extender watches (labels, taints, cordons, bound pods, load), through
:class:`shared.capacity.Capacity` and :mod:`shared.node_fit`."""

from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from extender.capacity import NodeCapacity
from extender.dispatch.building import build_job
from extender.dispatch.templates import parse_templates
from extender.scheduling.node_cache import NodeLoadCache, decode_node
from shared.capacity import nowhere_fits
from shared.errors import ConfigError
from shared.load_model import LoadRules
from shared.node_fit import FitNode, PodNeeds, Taint
from shared.pods import POD_DECODER
from shared.quantity import parse_resources
from shared.quota_ledger import QuotaLedger
from tests.fakes.clock import NOW
from tests.fakes.extender_calls import ClientFactory, wait_ready
from tests.fakes.jobs_api import JobsAPI
from tests.fakes.kube import FakeCollection
from tests.payloads import encode, load_annotations, node, pod

pytestmark = pytest.mark.anyio

GPU_TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


def cluster_node(
    name: str,
    index: int,
    *,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    cordoned: bool = False,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    item = node(name, annotations, index=index, images=0)
    item["status"]["allocatable"] = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    item["metadata"]["labels"] |= labels or {}
    item["spec"] = {"taints": taints or [], "unschedulable": cordoned}
    return item


def template(name: str, **extra: object) -> dict[str, Any]:
    base = {"namespace": "batch", "image": "img", "resources": {"requests": {"cpu": "2"}}}
    return {"name": name} | base | extra


async def serve(
    make_client: ClientFactory,
    tmp_path: Path,
    nodes: list[dict[str, Any]],
    templates: list[dict[str, Any]],
    pods: list[dict[str, Any]] | None = None,
) -> httpx.AsyncClient:
    api = JobsAPI()
    api.collections["/api/v1/nodes"] = FakeCollection([(1, nodes)])
    api.collections["/api/v1/pods"] = FakeCollection([(1, pods or [])])
    path = tmp_path / "templates.yaml"
    path.write_text(yaml.safe_dump({"templates": templates}))
    client = await make_client(fake=api, job_templates=path, dispatch_auth="none")
    return await wait_ready(client)


async def dispatch(client: httpx.AsyncClient, name: str) -> httpx.Response:
    return await client.post("/v1/jobs", json={"template": name, "key": "k"})


async def test_a_node_selector_no_node_matches_is_refused_naming_it(
    make_client: ClientFactory, tmp_path: Path
) -> None:
    nodes = [
        cluster_node("n1", 1, labels={"disktype": "hdd"}),
        cluster_node("n2", 2, labels={"disktype": "ssd"}),
    ]
    client = await serve(
        make_client,
        tmp_path,
        nodes,
        [
            template("nvme", nodeSelector={"disktype": "nvme"}),
            template("ssd", nodeSelector={"disktype": "ssd"}),
        ],
    )
    refused = await dispatch(client, "nvme")
    assert refused.status_code == 429 and refused.headers["Retry-After"] == "10"
    assert refused.json()["detail"] == (
        "no schedulable node can fit a pod of template nvme (requests {'cpu': '2'}): "
        "0/2 nodes fit: nodeSelector disktype=nvme does not match (2 nodes)"
    )
    assert (await dispatch(client, "ssd")).status_code == 201


async def test_a_tainted_node_takes_pods_that_tolerate_its_taint(
    make_client: ClientFactory, tmp_path: Path
) -> None:
    api_toleration = {"key": "dedicated", "operator": "Equal", "value": "gpu"}
    client = await serve(
        make_client,
        tmp_path,
        [cluster_node("gpu-1", 1, taints=[GPU_TAINT])],
        [
            template("plain"),
            template("gpu", tolerations=[api_toleration | {"effect": "NoSchedule"}]),
            template("other", tolerations=[api_toleration | {"value": "tpu"}]),
        ],
    )
    refused = await dispatch(client, "plain")
    assert refused.status_code == 429
    assert refused.json()["detail"].endswith(
        "0/1 nodes fit: taint dedicated=gpu:NoSchedule not tolerated (1 node)"
    )
    assert (await dispatch(client, "other")).status_code == 429
    created = await dispatch(client, "gpu")
    assert created.status_code == 201, created.text


async def test_a_cordoned_node_takes_nothing(make_client: ClientFactory, tmp_path: Path) -> None:
    client = await serve(
        make_client,
        tmp_path,
        [cluster_node("n1", 1, cordoned=True), cluster_node("n2", 2, cordoned=True)],
        [
            template("work"),
            template(
                "drain-proof",
                tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}],
            ),
        ],
    )
    refused = await dispatch(client, "work")
    assert refused.status_code == 429
    assert refused.json()["detail"].endswith("0/2 nodes fit: node is cordoned (2 nodes)")
    # kube-scheduler's rule: a pod tolerating the unschedulable taint may go to a cordoned node
    assert (await dispatch(client, "drain-proof")).status_code == 201


async def test_room_taken_by_bound_pods_and_overloaded_nodes(
    make_client: ClientFactory, tmp_path: Path, rules: LoadRules
) -> None:
    busy = pod("busy", "apps")
    busy["spec"]["nodeName"] = "n1"
    busy["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "3"}
    hot = load_annotations(rules, 0.95, NOW)
    client = await serve(
        make_client,
        tmp_path,
        [cluster_node("n1", 1), cluster_node("n2", 2, annotations=hot)],
        [template("work"), template("small", resources={"requests": {"cpu": "1"}})],
        pods=[busy],
    )
    refused = await dispatch(client, "work")
    assert refused.status_code == 429
    # n2 is overloaded, so it is not even a candidate; n1 has 1 of 4 cores free
    assert refused.json()["detail"].endswith("0/1 nodes fit: needs cpu 1 more than free (1 node)")
    assert (await dispatch(client, "small")).status_code == 201


def test_node_capacity_reads_the_node_view_and_the_pod_index(rules: LoadRules) -> None:
    cache = NodeLoadCache(rules)
    cache.replace(
        [
            decode_node(encode(cluster_node("n1", 1, labels={"zone": "a"}, taints=[GPU_TAINT]))),
            decode_node(
                encode(cluster_node("n2", 2, annotations=load_annotations(rules, 0.95, NOW)))
            ),
        ]
    )
    ledger = QuotaLedger()
    bound = pod("busy", "apps")
    bound["spec"]["nodeName"] = "n1"
    ledger.pod_store.replace([POD_DECODER.decode(encode(bound))])
    capacity = NodeCapacity(cache, ledger)
    [(fit, pods)] = list(capacity.fit_nodes(NOW))
    assert fit.name == "n1" and fit.labels["zone"] == "a"
    assert fit.taints == (Taint("dedicated", "gpu", "NoSchedule"),)
    assert [p.name for p in pods] == ["busy"]  # type: ignore[attr-defined]
    # the overloaded node's values go stale after their period: it is refused no longer
    later = NOW + timedelta(days=1)
    assert {fit.name for fit, _ in capacity.fit_nodes(later)} == ({"n1", "n2"})
    cache.apply("DELETED", decode_node(encode(cluster_node("n1", 1))))
    assert {fit.name for fit, _ in capacity.fit_nodes(later)} == {"n2"}


def test_the_reasons_are_counted_commonest_first() -> None:
    needs = PodNeeds(parse_resources({"cpu": "1"}, where="r"), node_selector={"a": "b"})
    nodes = [FitNode(f"s{i}", {"cpu": "4"}) for i in range(3)]
    nodes += [FitNode("c", {"cpu": "4"}, labels={"a": "b"}, unschedulable=True)]
    nodes += [FitNode("t", {"cpu": "4"}, labels={"a": "b"}, taints=(Taint("k", "", "NoExecute"),))]
    nodes += [
        FitNode(
            "f", {"cpu": "500m"}, labels={"a": "b"}, taints=(Taint("k", "", "PreferNoSchedule"),)
        )
    ]
    nodes += [FitNode("x", {"cpu": "1", "pods": "0"}, labels={"a": "b"})]
    assert nowhere_fits(needs, [(n, []) for n in nodes]) == (
        "0/7 nodes fit: nodeSelector a=b does not match (3 nodes), "
        "needs cpu 500m more than free (1 node), needs pods 1 more than free (1 node), "
        "other reasons (2 nodes)"
    )
    assert nowhere_fits(needs, []) == "0 nodes fit: every node is overloaded, or none is known"
    fitting = FitNode("ok", {"cpu": "2"}, labels={"a": "b"})
    assert nowhere_fits(needs, [(n, []) for n in [*nodes, fitting]]) is None


@pytest.mark.parametrize(
    ("toleration", "where"),
    [
        ({"operator": "Equal", "value": "x"}, "templates[0].tolerations[0]"),
        ({"key": "k", "operator": "Exists", "value": "x"}, "templates[0].tolerations[0]"),
        ({"key": "k", "effect": "Sometimes"}, "templates[0].tolerations[0].effect"),
        ({"key": "k", "operator": "In"}, "templates[0].tolerations[0].operator"),
        ({"key": "k", "tolerates": "all"}, "templates[0].tolerations[0].tolerates"),
    ],
)
def test_bad_tolerations_name_the_field(toleration: dict[str, str], where: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_templates({"templates": [template("t", tolerations=[toleration])]}, source="t.yaml")
    assert error.value.field == where


def test_node_selector_and_tolerations_reach_the_pods() -> None:
    toleration = {"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}
    data = {"templates": [template("t", nodeSelector={"disk": "ssd"}, tolerations=[toleration])]}
    spec = build_job(parse_templates(data, source="t.yaml")["t"], "k", {}, {})["spec"]
    assert spec["template"]["spec"]["nodeSelector"] == {"disk": "ssd"}
    assert spec["template"]["spec"]["tolerations"] == [toleration]
