from pathlib import Path

import pytest

from extender.dispatch.building import (
    InvalidDispatch,
    build_cronjob,
    build_job,
    check_schedule,
    cronjob_name,
    job_name,
)
from extender.dispatch.templates import JobTemplate, load_templates, parse_templates
from shared.errors import ConfigError

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "job-templates.yaml"


def template(**extra: object) -> JobTemplate:
    base = {
        "name": "report",
        "namespace": "batch",
        "image": "registry.example/reports:1",
        "allowedKeys": {"names": ["REPORT_ID"], "pattern": "OPT_[A-Z]+"},
        "env": [{"name": "STATIC", "value": "1"}],
        "resources": {"requests": {"cpu": "500m"}},
        "maxPending": 2,
    }
    return parse_templates({"templates": [base | extra]}, source="t.yaml")["report"]


def test_the_example_file_loads() -> None:
    templates = load_templates(EXAMPLE)
    assert (
        templates["report"].max_active == 50 and templates["report"].scheduler_name == "loadsched"
    )


@pytest.mark.parametrize(
    ("data", "where"),
    [
        ({"templates": [{"name": "x"}]}, "templates[0].namespace"),
        (
            {"templates": [{"name": "Bad_Name", "namespace": "n", "image": "i"}]},
            "templates[0].name",
        ),
        (
            {"templates": [{"name": "x", "namespace": "n", "image": "i", "maxActive": 0}]},
            "templates[0].maxActive",
        ),
        (
            {
                "templates": [
                    {"name": "x", "namespace": "n", "image": "i", "allowedKeys": {"pattern": "("}}
                ]
            },
            "templates[0].allowedKeys.pattern",
        ),
        (
            {
                "templates": [
                    {"name": "x", "namespace": "n", "image": "i", "overridable": ["image"]}
                ]
            },
            "templates[0].overridable",
        ),
        (
            {"templates": [{"name": "x", "namespace": "n", "image": "i", "imagee": "typo"}]},
            "templates[0].imagee",
        ),
        ({"templates": [{"name": "x", "namespace": "n", "image": "i"}] * 2}, "templates"),
    ],
)
def test_bad_templates_name_the_field(data: dict, where: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_templates(data, source="t.yaml")
    assert error.value.source == "t.yaml" and error.value.field == where


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_templates(tmp_path / "missing.yaml")
    (tmp_path / "bad.yaml").write_text("templates: [")
    with pytest.raises(ConfigError, match="not YAML"):
        load_templates(tmp_path / "bad.yaml")


def test_names_are_deterministic_dns_labels() -> None:
    t = template()
    assert job_name(t, "row-1") == job_name(t, "row-1") != job_name(t, "row-2")
    name = job_name(t, "x" * 253)
    assert len(name) <= 63 and name.startswith("report-")


def test_job_body() -> None:
    job = build_job(template(), "row-7", {"REPORT_ID": "7", "OPT_FAST": "yes"}, {"completions": 3})
    assert job["metadata"]["namespace"] == "batch"
    assert job["metadata"]["annotations"] == {"loadsched.io/key": "row-7"}
    assert job["metadata"]["labels"]["loadsched.io/template"] == "report"
    spec = job["spec"]
    assert spec["completions"] == 3 and spec["backoffLimit"] == 0
    assert spec["ttlSecondsAfterFinished"] == 3600
    assert spec["template"]["metadata"]["labels"] == {"loadsched.io/template": "report"}
    container = spec["template"]["spec"]["containers"][0]
    assert container["image"] == "registry.example/reports:1"
    assert container["env"] == [
        {"name": "STATIC", "value": "1"},
        {"name": "OPT_FAST", "value": "yes"},
        {"name": "REPORT_ID", "value": "7"},
    ]
    assert spec["template"]["spec"]["restartPolicy"] == "Never"


def test_the_dispatchers_environment_is_never_copied(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOADSCHED_SECRET", "hunter2")
    job = build_job(template(), "k", {}, {})
    assert "hunter2" not in str(job)


@pytest.mark.parametrize(
    ("key", "data", "overrides", "field"),
    [
        ("", {}, {}, "key"),
        ("k" * 254, {}, {}, "key"),
        ("k", {"1BAD": "x"}, {}, "data.1BAD"),
        ("k", {"PATH": "/evil"}, {}, "data.PATH"),
        ("k", {"STATIC": "override"}, {}, "data.STATIC"),
        ("k", {"REPORT_ID": "x" * 40000}, {}, "data"),
        ("k", {}, {"backoffLimit": 5}, "overrides.backoffLimit"),
        ("k", {}, {"completions": 0}, "overrides.completions"),
    ],
)
def test_invalid_requests_name_the_field(key: str, data: dict, overrides: dict, field: str) -> None:
    with pytest.raises(InvalidDispatch) as error:
        build_job(template(), key, data, overrides)
    assert error.value.field == field


def test_static_env_may_not_be_caller_data() -> None:
    with pytest.raises(ConfigError, match="static env"):
        template(env=[{"name": "REPORT_ID", "value": "x"}])


@pytest.mark.parametrize(
    ("schedule", "zone", "field"),
    [
        ("*/5 * * * *", None, None),
        ("@hourly", "Europe/Berlin", None),
        ("0 3 * * 1-5", "UTC", None),
        ("* * * * * *", None, "schedule"),  # seconds: croniter takes it, Kubernetes does not
        ("61 * * * *", None, "schedule"),
        ("@often", None, "schedule"),
        ("TZ=UTC 0 * * * *", None, "schedule"),
        ("0 * * * *", "Mars/Olympus", "timeZone"),
    ],
)
def test_schedules(schedule: str, zone: str | None, field: str | None) -> None:
    if field is None:
        check_schedule(schedule, zone)
        return
    with pytest.raises(InvalidDispatch) as error:
        check_schedule(schedule, zone)
    assert error.value.field == field


def test_cronjob_body() -> None:
    t = template()
    cron = build_cronjob(
        t,
        "nightly",
        {"REPORT_ID": "9"},
        {"schedule": "0 3 * * *", "timeZone": None, "suspend": False},
    )
    assert (
        cron["metadata"]["name"] == cronjob_name(t, "nightly")
        and len(cron["metadata"]["name"]) <= 52
    )
    assert cron["spec"]["schedule"] == "0 3 * * *" and "timeZone" not in cron["spec"]
    job_spec = cron["spec"]["jobTemplate"]["spec"]
    assert job_spec["template"]["spec"]["containers"][0]["env"][-1] == {
        "name": "REPORT_ID",
        "value": "9",
    }
    assert cron["spec"]["jobTemplate"]["metadata"]["labels"]["loadsched.io/template"] == "report"
