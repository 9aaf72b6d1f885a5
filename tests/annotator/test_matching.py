import math

import pytest

from annotator.matching import InstanceIndex, NodeAddresses, match_series, usage_fraction

INDEX = InstanceIndex(
    [
        NodeAddresses("n1", ("10.0.0.1",), ("host-1",)),
        NodeAddresses("n10", ("10.0.0.10",), ("host-10",)),
        NodeAddresses("n6", ("fd00::6",), ()),
        NodeAddresses("worker-7", (), ()),
    ]
)


@pytest.mark.parametrize(
    ("instance", "node"),
    [
        ("10.0.0.1", "n1"),
        ("10.0.0.1:9100", "n1"),
        ("10.0.0.10:9100", "n10"),  # crane's unescaped regex would also match n1
        ("10.0.0.100:9100", None),
        ("10.0.0.1:abc", None),
        ("host-1", "n1"),
        ("host-1:9100", "n1"),
        ("n10", "n10"),
        ("worker-7:9100", "worker-7"),
        ("[fd00::6]:9100", "n6"),
        ("fd00::6", "n6"),
        ("10.0.0", None),
        ("", None),
    ],
)
def test_instance_to_node(instance: str, node: str | None) -> None:
    assert INDEX.node_for(instance) == node


@pytest.mark.parametrize(
    ("raw", "scale", "fraction"),
    [(63.0, 100, 0.63), (0.5, 1, 0.5), (-3.0, 100, 0.0), (math.nan, 100, 0.0), (150.0, 100, 1.5)],
)
def test_usage_fraction(raw: float, scale: float, fraction: float) -> None:
    assert usage_fraction(raw, scale) == pytest.approx(fraction)


def test_match_series_keeps_the_highest_and_reports_strays() -> None:
    matched = match_series(
        [
            ("10.0.0.1:9100", 40.0),
            ("host-1:9101", 70.0),
            ("10.9.9.9:9100", 10.0),
            ("10.0.0.10:9100", math.nan),
        ],
        INDEX,
        scale=100,
    )
    assert matched.values == {"n1": pytest.approx(0.7), "n10": 0.0}
    assert matched.unmatched == ("10.9.9.9:9100",)
