"""``spec.scoring.normalize: minMax``: prioritize spreads the nodes asked about over the
protocol's whole 0..10, where crane's ``round(score/10)`` ties nodes up to ten points apart."""

import json
from typing import Any

import pytest

from extender.scheduling.metrics import ExtenderMetrics
from extender.scheduling.node_cache import NodeLoadCache
from extender.scheduling.verbs import LoadAwareExtender
from extender.scheduling.wire import ARGS_DECODER, ENCODER, NODE_DECODER, Node
from shared.annotations import encode_hot_value, encode_metric
from shared.load_model import LoadRules, normalized_table, to_extender_score
from shared.policy import parse_policy
from tests import payloads
from tests.fakes.clock import NOW


def rules(normalize: str | None, **scoring: Any) -> LoadRules:
    spec: dict[str, Any] = {
        "syncPolicy": [
            {"name": "cpu_usage_avg_5m", "period": "3m"},
            {"name": "mem_usage_avg_5m", "period": "3m"},
        ],
        "predicate": [{"name": "cpu_usage_avg_5m", "maxLimitPecent": 0.65}],
        "priority": [
            {"name": "cpu_usage_avg_5m", "weight": 0.2},
            {"name": "mem_usage_avg_5m", "weight": 0.2},
        ],
    }
    if normalize is not None or scoring:
        spec["scoring"] = {**({"normalize": normalize} if normalize else {}), **scoring}
    return LoadRules.from_policy(parse_policy({"spec": spec}))


def node(name: str, cpu: float, *, hot: int | None = None) -> dict[str, Any]:
    annotations = {
        "cpu_usage_avg_5m": encode_metric(cpu, NOW),
        "mem_usage_avg_5m": encode_metric(0.30, NOW),
    }
    if hot is not None:
        annotations["node_hot_value"] = encode_hot_value(hot, NOW)
    return {
        "metadata": {"name": name, "annotations": annotations},
        "status": {"capacity": {"cpu": "8", "memory": "32Gi"}},
    }


def decoded(nodes: list[dict[str, Any]]) -> list[Node]:
    return [NODE_DECODER.decode(json.dumps(n)) for n in nodes]


NODES = [node("a", 0.40), node("b", 0.45), node("c", 0.50), node("d", 0.58)]
"""crane's scores: a 65, b 62, c 60, d 55 (cpu and memory weigh the same, memory 30 %; d's
56 is 55.99… in float64, as in crane)."""


def extender(the_rules: LoadRules, nodes: list[dict[str, Any]]) -> LoadAwareExtender:
    cache = NodeLoadCache(the_rules)
    cache.replace(decoded(nodes))
    return LoadAwareExtender(
        rules=the_rules, clock=lambda: NOW, metrics=ExtenderMetrics(), node_cache=cache
    )


def scores(the_rules: LoadRules, names: list[str], *, full: bool = False) -> dict[str, int]:
    decide = extender(the_rules, NODES)
    by_name = {n["metadata"]["name"]: n for n in NODES}
    if full:
        body = payloads.full_args([by_name[n] for n in names if n in by_name])
    else:
        body = payloads.names_args(names)
    args = ARGS_DECODER.decode(payloads.encode(body))
    assert args.Pod is not None
    answer = json.loads(ENCODER.encode(decide.prioritize(args.Pod, args)))
    assert isinstance(answer, list)
    return {entry["Host"]: entry["Score"] for entry in answer}


def test_crane_mapping_ties_the_nodes_that_minmax_tells_apart() -> None:
    names = ["a", "b", "c", "d"]
    assert scores(rules(None), names) == {"a": 7, "b": 6, "c": 6, "d": 6}
    # the highest 10; (62-55)/10·10 = 7; (60-55)/10·10 = 5; the lowest 0
    assert scores(rules("minMax"), names) == {"a": 10, "b": 7, "c": 5, "d": 0}
    assert scores(rules("none"), names) == scores(rules(None), names)


@pytest.mark.parametrize("full", [False, True], ids=["names-only", "full-node"])
def test_spread_over_the_nodes_asked_about_in_both_modes(full: bool) -> None:
    assert scores(rules("minMax"), ["c", "d"], full=full) == {"c": 10, "d": 0}
    # (60-55)/7·10 = 7.1 → 7
    assert scores(rules("minMax"), ["b", "c", "d"], full=full) == {"b": 10, "c": 7, "d": 0}
    assert scores(rules("minMax"), ["a", "b", "c", "d"], full=full) == {
        "a": 10,
        "b": 7,
        "c": 5,
        "d": 0,
    }


def test_a_node_the_cache_lacks_scores_0_and_does_not_move_the_range() -> None:
    assert scores(rules("minMax"), ["c", "ghost", "d"]) == {"c": 10, "ghost": 0, "d": 0}


def test_one_node_or_equal_scores_keep_crane_mapping() -> None:
    assert scores(rules("minMax"), ["b"]) == {"b": 6}
    assert scores(rules("minMax"), ["ghost"]) == {"ghost": 0}


def test_the_hot_value_counts_before_the_spread() -> None:
    hot = [node("a", 0.40, hot=1), node("b", 0.45)]  # a: 65 - 10 = 55 < b: 62
    decide = extender(rules("minMax"), hot)
    args = ARGS_DECODER.decode(payloads.encode(payloads.names_args(["a", "b"])))
    assert args.Pod is not None
    answer = json.loads(ENCODER.encode(decide.prioritize(args.Pod, args)))
    assert {e["Host"]: e["Score"] for e in answer} == {"a": 0, "b": 10}


def test_a_strategy_score_is_spread_too() -> None:
    packing = rules("minMax", targetLoadPacking={"targetUtilization": 60})
    plain = rules(None, targetLoadPacking={"targetUtilization": 60})
    names = ["a", "b", "c", "d"]
    spread, crane = scores(packing, names), scores(plain, names)
    assert max(spread.values()) == 10
    assert min(spread.values()) == 0
    order = sorted(names, key=lambda n: (crane[n], spread[n]))
    assert [spread[n] for n in order] == sorted(spread.values()), "the strategy's order kept"


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ([40, 60], {40: 0, 50: 5, 60: 10, 45: 3, 55: 8}),  # half up: 2.5 → 3, 7.5 → 8
        ([None, 30, 30], {30: 3, 0: 0, 100: 10}),  # nothing to spread: crane's mapping
        ([], {0: 0, 54: 5, 55: 6}),
        ([None], {100: 10}),
        ([0, 100], {0: 0, 5: 1, 100: 10}),
    ],
)
def test_normalized_table(given: list[int | None], expected: dict[int, int]) -> None:
    table = normalized_table(given)
    assert len(table) == 101
    assert {score: table[score] for score in expected} == expected
    assert all(0 <= v <= 10 for v in table)
    if len({s for s in given if s is not None}) < 2:
        assert table == [to_extender_score(s) for s in range(101)]


def test_explain_shows_the_spread_prioritize_answers() -> None:
    from extender.scheduling.explain import Explainer

    the_rules = rules("minMax")
    decide = extender(the_rules, NODES)
    args = ARGS_DECODER.decode(payloads.encode(payloads.names_args(["a"])))
    assert args.Pod is not None
    explained = Explainer(decide, clock=lambda: NOW).explain(args.Pod)
    finals = {row.node: row.score.final for row in explained.nodes}
    assert finals == scores(the_rules, ["a", "b", "c", "d"]) == {"a": 10, "b": 7, "c": 5, "d": 0}
    assert {row.node: row.score.score for row in explained.nodes}["d"] == 55
