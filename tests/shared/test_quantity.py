from fractions import Fraction

import pytest

from shared.quantity import add, format_quantity, parse_quantity, parse_resources


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", Fraction(1, 2)),
        ("2", Fraction(2)),
        ("1.5", Fraction(3, 2)),
        ("2Gi", Fraction(2 * 2**30)),
        ("128Mi", Fraction(128 * 2**20)),
        ("1k", Fraction(1000)),
        ("1e3", Fraction(1000)),
        ("1E-3", Fraction(1, 1000)),
        ("100n", Fraction(1, 10**7)),
        (".5", Fraction(1, 2)),
        (4, Fraction(4)),
        (0.25, Fraction(1, 4)),
        ("  3 ", Fraction(3)),
    ],
)
def test_parse(text: str | int | float, value: Fraction) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "abc", "1.2.3", "5 Gi", "5gi", "1Ki2", "--1", "1e", True])
def test_reject(text: object) -> None:
    with pytest.raises(ValueError, match="invalid quantity"):
        parse_quantity(text)  # type: ignore[arg-type]


def test_resource_lists_name_the_field() -> None:
    assert parse_resources({"cpu": "6", "nvidia.com/gpu": 2}, where="spec.min") == {
        "cpu": 6,
        "nvidia.com/gpu": 2,
    }
    with pytest.raises(ValueError, match=r"spec.max.memory: invalid quantity 'lots'"):
        parse_resources({"memory": "lots"}, where="spec.max")
    with pytest.raises(ValueError, match=r"spec.min.cpu: must not be negative"):
        parse_resources({"cpu": "-1"}, where="spec.min")
    with pytest.raises(ValueError, match=r"spec.min.cpu: invalid quantity \[1\]"):
        parse_resources({"cpu": [1]}, where="spec.min")


def test_add_and_format() -> None:
    assert add({"cpu": Fraction(1, 2)}, {"cpu": Fraction(3, 2), "memory": Fraction(2**30)}) == {
        "cpu": 2,
        "memory": 2**30,
    }
    assert format_quantity("cpu", Fraction(1, 2)) == "500m"
    assert format_quantity("cpu", Fraction(6)) == "6"
    assert format_quantity("memory", Fraction(3 * 2**29)) == "1.5Gi"
    assert format_quantity("nvidia.com/gpu", Fraction(2)) == "2"
