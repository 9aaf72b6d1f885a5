"""Filter refuses a workload's pods on a node the rebalancer moved one of them off lately
(``loadsched.io/rebalanced-from``), until the mark's time, and asks them everywhere for room
for what the moved pod used (``loadsched.io/rebalanced-usage``); other pods pass as before."""

import json
from datetime import timedelta
from typing import Any

from extender.scheduling.explain import Explainer
from extender.scheduling.metrics import ExtenderMetrics
from extender.scheduling.node_cache import NodeLoadCache, decode_node
from extender.scheduling.verbs import LoadAwareExtender
from extender.scheduling.wire import ARGS_DECODER, ENCODER, Node
from shared.annotation_keys import REBALANCED_FROM_ANNOTATION, REBALANCED_USAGE_ANNOTATION
from shared.kube.meta import NodeMeta
from shared.load_model import LoadRules
from shared.pods import POD_DECODER
from tests import payloads
from tests.fakes.clock import NOW, Clock
from tests.fakes.estimation_cluster import node, the_policy
from tests.fakes.extender_calls import loaded_node

WEB = "default/ReplicaSet/web-6d4cf56db6"


def marked(name: str, usage: float, until_minutes: int, workload: str = WEB) -> Node:
    node = loaded_node(name, usage)
    until = (NOW + timedelta(minutes=until_minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")
    annotations = dict(node.metadata.annotations or {})
    annotations[REBALANCED_FROM_ANNOTATION] = json.dumps({workload: until})
    return Node(metadata=NodeMeta(name=name, annotations=annotations))


def filtered(
    nodes: list[Node], *, clock: Clock, rules: LoadRules, pod: Any = None, full: bool = False
) -> Any:
    cache = NodeLoadCache(rules)
    cache.replace(nodes)
    decide = LoadAwareExtender(
        rules=rules, clock=clock, metrics=ExtenderMetrics(), node_cache=cache
    )
    names = [n.metadata.name for n in nodes]
    if full:
        body = payloads.full_args(
            [
                {"metadata": {"name": n.metadata.name, "annotations": n.metadata.annotations}}
                for n in nodes
            ],
            pod or payloads.pod(),
        )
    else:
        body = payloads.names_args(names, pod or payloads.pod())
    args = ARGS_DECODER.decode(payloads.encode(body))
    assert args.Pod is not None
    return json.loads(ENCODER.encode(decide.filter(args.Pod, args)))


def test_the_workload_is_refused_where_it_left_until_the_mark_ends(rules: LoadRules) -> None:
    nodes = [marked("left", 0.3, 10), loaded_node("other", 0.3)]
    answer = filtered(nodes, clock=Clock(), rules=rules)
    assert answer["NodeNames"] == ["other"]
    assert "moved off this node by the rebalancer" in answer["FailedAndUnresolvableNodes"]["left"]
    later = Clock(NOW + timedelta(minutes=10))
    assert filtered(nodes, clock=later, rules=rules)["NodeNames"] == ["left", "other"]


def test_other_workloads_and_daemonsets_are_not_refused(rules: LoadRules) -> None:
    nodes = [marked("left", 0.3, 10, workload="default/ReplicaSet/api"), loaded_node("b", 0.3)]
    assert filtered(nodes, clock=Clock(), rules=rules)["NodeNames"] == ["left", "b"]
    ds = payloads.pod(daemonset=True)
    nodes = [marked("left", 0.3, 10), loaded_node("b", 0.3)]
    assert filtered(nodes, clock=Clock(), rules=rules, pod=ds)["NodeNames"] == ["left", "b"]


def test_full_node_requests_are_refused_the_same_way(rules: LoadRules) -> None:
    nodes = [marked("left", 0.3, 10), loaded_node("other", 0.3)]
    answer = filtered(nodes, clock=Clock(), rules=rules, full=True)
    assert [item["metadata"]["name"] for item in answer["Nodes"]["items"]] == ["other"]
    assert list(answer["FailedAndUnresolvableNodes"]) == ["left"]
    assert answer["FailedNodes"] == {}  # preempting pods there would not help


def test_a_malformed_mark_refuses_nothing(rules: LoadRules) -> None:
    node = loaded_node("left", 0.3)
    annotations = dict(node.metadata.annotations or {})
    annotations[REBALANCED_FROM_ANNOTATION] = "{not json"
    nodes = [Node(metadata=NodeMeta(name="left", annotations=annotations))]
    assert filtered(nodes, clock=Clock(), rules=rules)["NodeNames"] == ["left"]


def test_explain_says_why_the_node_is_refused(rules: LoadRules) -> None:
    cache = NodeLoadCache(rules)
    cache.replace([marked("left", 0.3, 10), loaded_node("other", 0.3)])
    decide = LoadAwareExtender(
        rules=rules, clock=Clock(), metrics=ExtenderMetrics(), node_cache=cache
    )
    pod = POD_DECODER.decode(payloads.encode(payloads.pod()))
    rows = {row.node: row for row in Explainer(decide, clock=Clock()).explain(pod).nodes}
    assert rows["other"].passed and rows["other"].rejected_by is None
    assert not rows["left"].passed
    assert rows["left"].rejected_by == "loadsched.io/rebalanced-from"
    assert "moved off this node by the rebalancer" in (rows["left"].reason or "")


def carrying(usage_cores: float, until_minutes: int = 10) -> list[Node]:
    """With estimation on 8-core nodes under a 0.65 limit: ``left`` carries the mark of
    WEB and what its moved pod used (room for it, 0.10); ``tight`` (0.50) has 1.2 cores of room, ``roomy`` (0.20)
    3.6."""
    until = (NOW + timedelta(minutes=until_minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")
    marks = {
        REBALANCED_FROM_ANNOTATION: json.dumps({WEB: until}),
        REBALANCED_USAGE_ANNOTATION: json.dumps({WEB: {"cpu": usage_cores, "memory": 2**20}}),
    }
    bodies = [node("left", 0.10, 1), node("tight", 0.50, 2), node("roomy", 0.20, 3)]
    bodies[0]["metadata"]["annotations"].update(marks)
    return [decode_node(payloads.encode(body)) for body in bodies]


ESTIMATION = LoadRules.from_policy(the_policy(estimation={"enabled": True}))


def test_the_replacement_needs_room_for_what_the_moved_pod_used() -> None:
    """The pod requests 500m (estimated 0.425 cores, room on tight and roomy); a pod of its
    workload used 3 cores on ``left``: while that mark holds, only roomy has room for it."""
    clock = Clock()
    answer = filtered(carrying(3.0), clock=clock, rules=ESTIMATION)
    assert answer["NodeNames"] == ["roomy"]
    # a usage under the estimate asks for no more than the estimate
    assert filtered(carrying(0.1), clock=clock, rules=ESTIMATION)["NodeNames"] == [
        "tight",
        "roomy",
    ]
    # once the mark ends, the usage is no longer asked for, nor the node refused
    later = Clock(NOW + timedelta(minutes=10))
    assert filtered(carrying(3.0), clock=later, rules=ESTIMATION)["NodeNames"] == [
        "left",
        "tight",
        "roomy",
    ]


def test_other_workloads_are_asked_for_their_estimate_only() -> None:
    other = payloads.pod("api-0")
    other["metadata"]["ownerReferences"][0]["name"] = "api-5b7"
    answer = filtered(carrying(3.0), clock=Clock(), rules=ESTIMATION, pod=other)
    assert answer["NodeNames"] == ["left", "tight", "roomy"]


def test_explain_shows_the_carried_usage_as_the_pods_need() -> None:
    cache = NodeLoadCache(ESTIMATION)
    cache.replace(carrying(3.0))
    decide = LoadAwareExtender(
        rules=ESTIMATION, clock=Clock(), metrics=ExtenderMetrics(), node_cache=cache
    )
    explained = Explainer(decide, clock=Clock()).explain(
        POD_DECODER.decode(payloads.encode(payloads.pod()))
    )
    assert explained.estimate is not None and explained.estimate.cpu == 3.0
    rows = {row.node: row for row in explained.nodes}
    assert rows["roomy"].passed and not rows["tight"].passed
    assert rows["left"].rejected_by == "loadsched.io/rebalanced-from"
