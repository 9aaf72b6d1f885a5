"""Names-only answers from a node view kept up to date change by change are the answers a view
built from scratch gives, whatever the changes; and a change costs the nodes it touches."""

import json
from datetime import timedelta
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extender.scheduling.metrics import ExtenderMetrics
from extender.scheduling.node_cache import NodeLoadCache
from extender.scheduling.verbs import LoadAwareExtender
from extender.scheduling.wire import (
    ARGS_DECODER,
    ENCODER,
    NODE_DECODER,
    Node,
    NodeMeta,
    RejectionListing,
)
from shared.annotations import encode_hot_value, encode_metric
from shared.load_model import LoadRules
from shared.policy import DEFAULT_POLICY_YAML, parse_policy
from tests import payloads
from tests.fakes.clock import NOW, Clock
from tests.fakes.extender_calls import counted, grown

NAMES = [f"n{i}" for i in range(8)]


def rules_for(stale_data: str) -> LoadRules:
    data = yaml.safe_load(DEFAULT_POLICY_YAML)
    data["spec"]["staleData"] = stale_data
    return LoadRules.from_policy(parse_policy(data))


def node(name: str, usage: float | None, age: int, hot: int | None) -> Node:
    """A node whose CPU and memory values are ``age`` minutes old (``None``: no values)."""
    at = NOW - timedelta(minutes=age)
    annotations: dict[str, str] = {}
    if usage is not None:
        annotations = {
            key: encode_metric(usage, at) for key in ("cpu_usage_avg_5m", "mem_usage_avg_5m")
        }
    if hot is not None:
        annotations["node_hot_value"] = encode_hot_value(hot, at)
    return Node(metadata=NodeMeta(name=name, annotations=annotations))


nodes = st.builds(
    node,
    st.sampled_from(NAMES),
    st.one_of(st.none(), st.floats(0, 1)),
    st.integers(0, 12),
    st.one_of(st.none(), st.integers(0, 4)),
)
changes = st.lists(
    st.one_of(
        st.tuples(st.just("MODIFIED"), nodes),
        st.tuples(st.just("DELETED"), st.sampled_from(NAMES)),
        st.tuples(st.just("touch"), st.sampled_from(NAMES)),
        st.tuples(st.just("advance"), st.integers(0, 300)),
    ),
    max_size=12,
)
asks = st.lists(st.sampled_from([*NAMES, "unknown-node"]), unique=True, max_size=9)


def ask(decide: LoadAwareExtender, verb: str, names: list[str], daemonset: bool) -> Any:
    body = payloads.encode(payloads.names_args(names, payloads.pod(daemonset=daemonset)))
    args = ARGS_DECODER.decode(body)
    assert args.Pod is not None
    return json.loads(ENCODER.encode(getattr(decide, verb)(args.Pod, args)))


def extender(
    rules: LoadRules, clock: Clock, rejections: RejectionListing
) -> tuple[LoadAwareExtender, NodeLoadCache]:
    cache = NodeLoadCache(rules)
    metrics = ExtenderMetrics()
    return LoadAwareExtender(
        rules=rules, clock=clock, metrics=metrics, node_cache=cache, rejections=rejections
    ), cache


@given(
    first=st.lists(nodes, max_size=8),
    steps=st.lists(st.tuples(changes, asks, st.booleans()), min_size=1, max_size=4),
    stale_data=st.sampled_from(["failOpen", "failClosed"]),
    rejections=st.sampled_from(["when-none-pass", "always"]),
)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_answers_after_changes_equal_answers_from_scratch(
    first: list[Node],
    steps: list[tuple[list[tuple[str, Any]], list[str], bool]],
    stale_data: str,
    rejections: RejectionListing,
) -> None:
    rules = rules_for(stale_data)
    clock = Clock()
    decide, cache = extender(rules, clock, rejections)
    current = {n.metadata.name: n for n in first}
    cache.replace(list(current.values()))
    for change, names, daemonset in steps:
        for kind, what in change:
            if kind == "MODIFIED":
                current[what.metadata.name] = what
                cache.apply("MODIFIED", what)
            elif kind == "DELETED":
                if what in current:
                    cache.apply("DELETED", current.pop(what))
            elif kind == "touch":
                cache.touch(what)
            else:
                clock.now += timedelta(seconds=what)
        fresh, fresh_cache = extender(rules, clock, rejections)
        fresh_cache.replace(list(current.values()))
        before = counted(decide)
        assert ask(decide, "filter", names, daemonset) == ask(fresh, "filter", names, daemonset)
        # the request counted alike: what was rejected, unknown, not cached
        assert grown(before, counted(decide)) == grown({}, counted(fresh))
        assert ask(decide, "prioritize", names, daemonset) == ask(
            fresh, "prioritize", names, daemonset
        )
        # one window asked about step after step, as kube-scheduler does: the answers kept
        # for it are the answers from scratch, and counted alike
        before, fresh_before = counted(decide), counted(fresh)
        assert ask(decide, "filter", WINDOW, daemonset) == ask(fresh, "filter", WINDOW, daemonset)
        assert grown(before, counted(decide)) == grown(fresh_before, counted(fresh))
        passed = ask(fresh, "filter", WINDOW, daemonset)["NodeNames"]
        assert ask(decide, "prioritize", passed, daemonset) == ask(
            fresh, "prioritize", passed, daemonset
        )


WINDOW = NAMES[::3]
"""A few of the nodes: answers kept for them are checked against the changes (a window of
every node never is)."""


def test_answers_are_the_full_node_answers_of_the_same_nodes() -> None:
    """Names-only and full-node mode give the same nodes, messages and scores."""
    rules = rules_for("failOpen")
    clock = Clock()
    decide, cache = extender(rules, clock, "always")

    def item(i: int, usage: float, hot: int | None) -> dict[str, Any]:
        annotations = payloads.load_annotations(rules, usage, NOW - timedelta(minutes=1), hot=hot)
        return payloads.node(f"n{i}", annotations, index=i, images=2)

    items = [item(i, i / 10, i % 3 or None) for i in range(10)]
    cache.replace([NODE_DECODER.decode(json.dumps(x)) for x in items])
    items[2] = item(2, 0.95, None)
    cache.apply("MODIFIED", NODE_DECODER.decode(json.dumps(items[2])))
    items.reverse()
    names = [x["metadata"]["name"] for x in items]
    args = ARGS_DECODER.decode(payloads.encode(payloads.full_args(items)))
    assert args.Pod is not None
    full_filter = json.loads(ENCODER.encode(decide.filter(args.Pod, args)))
    names_filter = ask(decide, "filter", names, False)
    assert [n["metadata"]["name"] for n in full_filter["Nodes"]["items"]] == names_filter[
        "NodeNames"
    ]
    assert full_filter["FailedAndUnresolvableNodes"] == names_filter["FailedAndUnresolvableNodes"]
    assert set(names_filter["FailedAndUnresolvableNodes"]) >= {"n2", "n9"}
    full_scores = json.loads(ENCODER.encode(decide.prioritize(args.Pod, args)))
    assert full_scores == ask(decide, "prioritize", names, False)


def test_a_change_reindexes_only_the_nodes_it_touches() -> None:
    rules = rules_for("failOpen")
    cache = NodeLoadCache(rules)
    cache.replace([node(f"n{i}", 0.1 * (i % 9), 1, None) for i in range(1000)])
    view = cache.view(NOW)
    standing, scores = dict(view.standing), dict(view.encoded_scores)
    before = view.version
    cache.apply("MODIFIED", node("n5", 0.9, 0, None))
    cache.apply("MODIFIED", node("n6", 0.6, 1, None))  # the same values: not a change
    cache.touch("n7")  # its pods changed, its verdict did not
    view = cache.view(NOW)
    assert view.version == before + 1
    assert {n for n in standing if view.standing[n] != standing[n]} == {"n5"}
    assert {n for n in scores if view.encoded_scores[n] is not scores[n]} == {"n5"}


def test_filter_changes_name_only_what_a_filter_answer_reads() -> None:
    """Every change is named in ``changes``; in ``filter_changes`` only those a filter answer
    can see: a node passing or not, its rejection message, its unknown values, its leaving. A
    passing node whose values move but still pass changes its score alone."""
    rules = rules_for("failOpen")
    cache = NodeLoadCache(rules)
    cache.replace([node(f"n{i}", 0.3, 1, None) for i in range(4)])
    view = cache.view(NOW)

    def change(kind: str, what: Node) -> tuple[int, int]:
        every, filtered = view.changes.version, view.filter_changes.version
        cache.apply(kind, what)
        cache.view(NOW)
        return view.changes.version - every, view.filter_changes.version - filtered

    score = view.raw_scores["n1"]
    assert change("MODIFIED", node("n1", 0.4, 1, None)) == (1, 0)
    assert view.raw_scores["n1"] != score
    assert change("MODIFIED", node("n1", 0.4, 1, 3)) == (1, 0)  # a hot value: score alone
    assert view.encoded_scores["n1"] == b'{"Host":"n1","Score":0}'
    assert change("MODIFIED", node("n1", 0.9, 1, None)) == (1, 1)  # rejected now
    assert change("MODIFIED", node("n1", 0.95, 1, None)) == (1, 1)  # another message
    assert change("MODIFIED", node("n1", None, 1, None)) == (1, 1)  # its values unknown
    assert change("MODIFIED", node("n1", 0.3, 1, None)) == (1, 1)  # known and passing again
    assert change("DELETED", node("n2", 0.3, 1, None)) == (1, 1)
    assert view.filter_changes.since(view.filter_changes.version - 2) == ["n1", "n2"]
