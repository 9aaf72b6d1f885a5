import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from extender.dispatch.building import (
    MAX_KEY_LENGTH,
    InvalidDispatch,
    build_cronjob,
    build_job,
    check_schedule,
    cronjob_name,
    job_name,
)
from extender.dispatch.templates import DNS_LABEL, JobTemplate, load_templates, parse_templates
from shared.errors import ConfigError

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "job-templates.yaml"


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
def test_bad_templates_name_the_field(data: dict[str, Any], where: str) -> None:
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


def test_the_longest_name_and_key_give_a_dns_label() -> None:
    """``<template>-<first 16 hex digits of sha256("<template>\\n<key>")>``: with the longest
    template name (40) the Job's name is 57 characters, the whole key hashed, nothing cut."""
    longest = "r" + "e" * 38 + "t"
    base = {"namespace": "batch", "image": "i"}
    with pytest.raises(ConfigError) as error:
        parse_templates({"templates": [base | {"name": longest + "s"}]}, source="t.yaml")
    assert error.value.field == "templates[0].name"
    t = parse_templates({"templates": [base | {"name": longest}]}, source="t.yaml")[longest]
    key = "k" * (MAX_KEY_LENGTH - 1) + "1"
    digest = hashlib.sha256(f"{longest}\n{key}".encode()).hexdigest()
    name = job_name(t, key)
    assert name == f"{longest}-{digest[:16]}"
    assert len(name) == 57 and re.fullmatch(DNS_LABEL, name)
    assert build_job(t, key, {}, {})["metadata"]["name"] == name
    assert job_name(t, key[:-1] + "2") != name  # the key's last character counts
    assert cronjob_name(t, key) == f"{longest}-{digest[:10]}"
    assert len(cronjob_name(t, key)) == 51


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
    """Variables of the dispatcher's own process, even under names the template allows, do not
    reach the Job: the body is the same with and without them."""
    for name in ("REPORT_ID", "OPT_LEAK", "LOADSCHED_SECRET"):
        monkeypatch.delenv(name, raising=False)
    clean = build_job(template(), "k", {"OPT_FAST": "yes"}, {})
    leaks = {"REPORT_ID": "env-report", "OPT_LEAK": "env-opt", "LOADSCHED_SECRET": "hunter2"}
    for name, value in leaks.items():
        monkeypatch.setenv(name, value)
    assert all(template().allowed_keys.allows(n) for n in ("REPORT_ID", "OPT_LEAK"))
    job = build_job(template(), "k", {"OPT_FAST": "yes"}, {})
    assert job == clean
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["env"] == [
        {"name": "STATIC", "value": "1"},
        {"name": "OPT_FAST", "value": "yes"},
    ]
    assert "envFrom" not in container
    assert not any(value in json.dumps(job) for value in leaks.values())


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
def test_invalid_requests_name_the_field(
    key: str, data: dict[str, Any], overrides: dict[str, Any], field: str
) -> None:
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
