"""spec.hotValueLimit: filter refuses a node whose fresh hot value is above the limit."""

from datetime import timedelta

import pytest

from shared.annotations import encode_hot_value, encode_metric
from shared.errors import ConfigError
from shared.load_model import LoadRules, NodeLoad, evaluate
from shared.policy import parse_policy
from tests.fakes.clock import NOW


def rules(limit: object) -> LoadRules:
    spec = {
        "syncPolicy": [{"name": "cpu_usage_avg_5m", "period": "3m"}],
        "predicate": [{"name": "cpu_usage_avg_5m", "maxLimitPecent": 0.65}],
        "priority": [{"name": "cpu_usage_avg_5m", "weight": 1}],
        "hotValueLimit": limit,
    }
    return LoadRules.from_policy(parse_policy({"spec": spec}))


@pytest.mark.parametrize(
    ("limit", "hot", "age", "refused"),
    [
        (2, 3, 0, True),
        (2, 2, 0, False),  # at the limit: passes (strict, like the metric limits)
        (2, 9, 299, True),  # still fresh
        (2, 9, 300, False),  # five minutes old: stale, no longer hot
        (0, 50, 0, False),  # 0 is off: crane's behaviour
        (2, None, 0, False),
    ],
)
def test_hot_value_limit(limit: int, hot: int | None, age: int, refused: bool) -> None:
    the_rules = rules(limit)
    annotations = {"cpu_usage_avg_5m": encode_metric(0.2, NOW)}
    if hot is not None:
        annotations["node_hot_value"] = encode_hot_value(hot, NOW - timedelta(seconds=age))
    verdict = evaluate(NodeLoad.from_annotations("n1", annotations, the_rules), the_rules, NOW)
    assert (verdict.overload is not None) is refused
    if refused:
        assert verdict.overload == f"Hot value {hot} of node[n1] is above hotValueLimit 2"
        assert verdict.overload_reason == ("node_hot_value", "overloaded")
        assert verdict.valid_until is not None and verdict.valid_until <= NOW + timedelta(
            seconds=300 - age
        ), "the verdict is re-evaluated when the hot value goes stale"


def test_an_overloaded_metric_is_named_before_the_hot_value() -> None:
    the_rules = rules(1)
    annotations = {
        "cpu_usage_avg_5m": encode_metric(0.9, NOW),
        "node_hot_value": encode_hot_value(5, NOW),
    }
    verdict = evaluate(NodeLoad.from_annotations("n1", annotations, the_rules), the_rules, NOW)
    assert verdict.overload_reason == ("cpu_usage_avg_5m", "overloaded")


@pytest.mark.parametrize("bad", [-1, "many", 1.5])
def test_a_bad_limit_is_refused_naming_the_field(bad: object) -> None:
    with pytest.raises(ConfigError, match=r"spec\.hotValueLimit"):
        rules(bad)
