from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from shared.errors import ConfigError
from shared.policy import DEFAULT_POLICY_YAML, default_policy, load_policy, parse_policy

CRANE_FILE = DEFAULT_POLICY_YAML


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    return path


def test_crane_default_policy_loads_unchanged(tmp_path: Path) -> None:
    policy = load_policy(write(tmp_path, CRANE_FILE))
    spec = policy.spec
    assert [s.name for s in spec.sync_policy][:3] == [
        "cpu_usage_avg_5m",
        "cpu_usage_max_avg_1h",
        "cpu_usage_max_avg_1d",
    ]
    assert policy.period_of("cpu_usage_max_avg_1d") == timedelta(hours=3)
    assert [(p.name, p.max_limit_percent) for p in spec.predicate][:2] == [
        ("cpu_usage_avg_5m", 0.65),
        ("cpu_usage_max_avg_1h", 0.75),
    ]
    assert [p.weight for p in spec.priority] == [0.2, 0.3, 0.5, 0.2, 0.3, 0.5]
    assert [(h.time_range, h.count) for h in spec.hot_value] == [
        (timedelta(minutes=5), 5),
        (timedelta(minutes=1), 2),
    ]
    assert spec.stale_data == "failOpen"
    assert spec.timestamp_zone == "UTC"
    assert policy == default_policy()


def test_shipped_example_is_crane_default() -> None:
    shipped = Path(__file__).parents[2] / "charts" / "loadsched" / "files" / "policy.yaml"
    assert yaml.safe_load(shipped.read_text()) == yaml.safe_load(CRANE_FILE)


def test_correct_spelling_is_an_alias() -> None:
    data = yaml.safe_load(CRANE_FILE)
    data["spec"]["predicate"][0] = {"name": "cpu_usage_avg_5m", "maxLimitPercent": 0.5}
    assert parse_policy(data).spec.predicate[0].max_limit_percent == 0.5


def test_loadsched_fields_live_beside_crane_fields() -> None:
    data = yaml.safe_load(CRANE_FILE)
    data["spec"]["staleData"] = "failClosed"
    data["spec"]["timestampZone"] = "Asia/Shanghai"
    data["spec"]["estimation"] = {"enabled": True, "factor": 0.8}
    data["spec"]["syncPolicy"][0]["promql"] = "avg by (instance) (rate(x[5m]))"
    data["spec"]["syncPolicy"][0]["scale"] = 1
    spec = parse_policy(data).spec
    assert spec.stale_data == "failClosed"
    assert spec.sync_policy[0].promql == "avg by (instance) (rate(x[5m]))"
    assert spec.estimation.factor == 0.8


def edit(path: str, value: object) -> dict[str, object]:
    data: dict[str, object] = yaml.safe_load(CRANE_FILE)
    keys = path.split(".")
    target: Any = data
    for key in keys[:-1]:
        target = target[int(key)] if key.isdigit() else target[key]
    target[int(keys[-1]) if keys[-1].isdigit() else keys[-1]] = value
    return data


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        (edit("spec.syncPolicy.1.period", "0s"), "spec.syncPolicy[1].period", "must be > 0"),
        (edit("spec.syncPolicy.1.period", "-3m"), "spec.syncPolicy[1].period", "must be > 0"),
        (
            edit("spec.syncPolicy.1.period", "3 minutes"),
            "spec.syncPolicy[1].period",
            "invalid duration",
        ),
        (edit("spec.syncPolicy.1.period", 180), "spec.syncPolicy[1].period", "Go duration string"),
        (
            edit("spec.syncPolicy.1.name", "cpu_usage_avg_5m"),
            "spec.syncPolicy[1].name",
            "duplicate",
        ),
        (edit("spec.hotValue.0.count", 0), "spec.hotValue[0].count", "must be > 0"),
        (edit("spec.hotValue.0.timeRange", "0s"), "spec.hotValue[0].timeRange", "must be > 0"),
        (edit("spec.priority.2.weight", -0.5), "spec.priority[2].weight", "non-negative"),
        (
            edit("spec.predicate.1.maxLimitPecent", -0.1),
            "spec.predicate[1].maxLimitPecent",
            "fraction",
        ),
        (
            edit("spec.predicate.1.maxLimitPecent", 65),
            "spec.predicate[1].maxLimitPecent",
            "0.65 means",
        ),
        (
            edit("spec.predicate.0.name", "gpu_usage"),
            "spec.predicate[0].name",
            "no syncPolicy entry",
        ),
        (edit("spec.priority.5.name", "disk"), "spec.priority[5].name", "no syncPolicy entry"),
        (edit("spec.predicate.0.maxLimitPercent", 0.5), "spec.predicate[0]", "not both"),
        (edit("spec.syncPolicy.0.perod", "3m"), "spec.syncPolicy[0].perod", "unknown field"),
        (edit("spec.weights", {}), "spec.weights", "unknown field"),
        (edit("spec.staleData", "sometimes"), "spec.staleData", "failOpen"),
        (edit("spec.scoring", {"normalize": "sorted"}), "spec.scoring.normalize", "minMax"),
        (edit("spec.timestampZone", "Mars/Olympus"), "spec.timestampZone", "unknown time zone"),
        (edit("kind", "Policy"), "kind", "got 'Policy'"),
        (edit("spec.priority", "all"), "spec.priority", "tuple"),
    ],
)
def test_invalid_values_name_the_file_and_field(
    tmp_path: Path, data: dict[str, object], field: str, message: str
) -> None:
    path = write(tmp_path, yaml.safe_dump(data))
    with pytest.raises(ConfigError) as caught:
        load_policy(path)
    assert caught.value.source == str(path)
    assert caught.value.field == field
    assert message in caught.value.message
    assert str(caught.value).startswith(f"{path}: {field}: ")


@pytest.mark.parametrize(
    ("text", "message"),
    [("spec: [unclosed", "not valid YAML"), ("- a\n- b\n", "YAML mapping"), ("", "YAML mapping")],
)
def test_unreadable_files(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_policy(write(tmp_path, text))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the policy file"):
        load_policy(tmp_path / "nope.yaml")


@pytest.mark.parametrize(
    "path", sorted((Path(__file__).parents[2] / "examples").glob("policy-*.yaml")), ids=str
)
def test_example_policies_load(path: Path) -> None:
    policy = load_policy(path)
    assert policy.spec.sync_policy
