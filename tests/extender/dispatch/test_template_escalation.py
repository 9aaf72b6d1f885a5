"""Job templates cannot be used to escalate, and dispatched data only ever becomes env values.

- Load time: every field that would give a template's pods more than an ordinary pod of the
  namespace is refused naming the field, and accepted (and carried into the Job) with the
  named setting that allows it.
- Request time: hostile data keys and values are refused naming ``data.KEY``, or become
  env values and nothing else: the Job built with them equals the Job built without data,
  env values aside, and each value reaches the process unchanged after the kubelet's
  ``$(VAR)`` expansion (:func:`kubelet_expand`, a port of Kubernetes'
  ``third_party/forked/golang/expansion``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pytest

from extender.dispatch.building import InvalidDispatch, build_cronjob, build_job
from extender.dispatch.pod_security import RESERVED_ENV_NAMES
from extender.dispatch.templates import JobTemplate, parse_templates
from shared.errors import ConfigError

BASE: dict[str, Any] = {
    "name": "report",
    "namespace": "batch",
    "image": "registry.example/reports:1.4.2",
    "command": ["python", "-m", "reports.render"],
    "env": [{"name": "REPORTS_BUCKET", "value": "s3://reports"}],
    "allowedKeys": {"names": ["REPORT_ID", "CUSTOMER_ID"], "pattern": "^OPT_[A-Z0-9_]+$"},
}


def template(**fields: Any) -> JobTemplate:
    return parse_templates({"templates": [{**copy.deepcopy(BASE), **fields}]}, source="t.yaml")[
        "report"
    ]


def refusal(**fields: Any) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        template(**fields)
    return caught.value


ESCALATIONS: list[tuple[dict[str, Any], str, str]] = [
    (
        {"volumes": [{"name": "host", "hostPath": {"path": "/"}}]},
        "templates[0].volumes[0].hostPath",
        "allowHostPath",
    ),
    (
        {"securityContext": {"privileged": True}},
        "templates[0].securityContext.privileged",
        "allowPrivileged",
    ),
    (
        {"securityContext": {"allowPrivilegeEscalation": True}},
        "templates[0].securityContext.allowPrivilegeEscalation",
        "allowPrivileged",
    ),
    (
        {"securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}},
        "templates[0].securityContext.capabilities.add",
        "allowPrivileged",
    ),
    (
        {"securityContext": {"procMount": "Unmasked"}},
        "templates[0].securityContext.procMount",
        "allowPrivileged",
    ),
    (
        {"securityContext": {"seccompProfile": {"type": "Unconfined"}}},
        "templates[0].securityContext.seccompProfile.type",
        "allowPrivileged",
    ),
    (
        {"podSecurityContext": {"seccompProfile": {"type": "Unconfined"}}},
        "templates[0].podSecurityContext.seccompProfile.type",
        "allowPrivileged",
    ),
    ({"hostNetwork": True}, "templates[0].hostNetwork", "allowHostNamespaces"),
    ({"hostPID": True}, "templates[0].hostPID", "allowHostNamespaces"),
    ({"hostIPC": True}, "templates[0].hostIPC", "allowHostNamespaces"),
    (
        {"serviceAccountName": "cluster-admin-bot"},
        "templates[0].serviceAccountName",
        "allowOtherServiceAccount",
    ),
]


@pytest.mark.parametrize(("fields", "field", "setting"), ESCALATIONS)
def test_escalating_fields_are_refused_naming_the_field_and_the_setting(
    fields: dict[str, Any], field: str, setting: str
) -> None:
    error = refusal(**fields)
    assert error.source == "t.yaml" and error.field == field
    assert f"{setting}: true" in error.message


@pytest.mark.parametrize(("fields", "field", "setting"), ESCALATIONS)
def test_the_named_setting_allows_it_and_the_job_carries_it(
    fields: dict[str, Any], field: str, setting: str
) -> None:
    allowed = template(**fields, **{setting: True})
    spec = build_job(allowed, "k", {}, {})["spec"]["template"]["spec"]
    container = spec["containers"][0]
    key = next(iter(fields))
    if key == "securityContext":
        assert container["securityContext"] == fields[key]
    elif key == "podSecurityContext":
        assert spec["securityContext"] == fields[key]
    else:
        assert spec[key] == fields[key]
    # one setting allows its own fields only
    others = {s for _, _, s in ESCALATIONS} - {setting}
    for other in others:
        with pytest.raises(ConfigError):
            template(**fields, **{other: True})


@pytest.mark.parametrize(
    "fields",
    [
        {"securityContext": {"privileged": True}, "hostNetwork": True},
        {"securityContext": {"privileged": True}},
    ],
)
def test_an_unrelated_setting_does_not_allow_it(fields: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="allow"):
        template(**fields, allowHostPath=True)


def test_what_does_not_escalate_is_accepted_and_carried_as_written() -> None:
    safe = template(
        serviceAccountName="report",  # the template's own
        volumes=[
            {"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}},
            {"name": "settings", "configMap": {"name": "report-settings"}},
        ],
        volumeMounts=[
            {"name": "scratch", "mountPath": "/tmp"},
            {"name": "settings", "mountPath": "/etc/report", "readOnly": True},
        ],
        securityContext={
            "allowPrivilegeEscalation": False,
            "privileged": False,
            "capabilities": {"drop": ["ALL"]},
            "runAsNonRoot": True,
            "readOnlyRootFilesystem": True,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        podSecurityContext={"runAsUser": 10001, "fsGroup": 10001},
    )
    spec = build_job(safe, "k", {}, {})["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == "report"
    assert spec["volumes"][0] == {"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}}
    assert spec["securityContext"] == {"runAsUser": 10001, "fsGroup": 10001}
    container = spec["containers"][0]
    assert container["volumeMounts"][1] == {
        "name": "settings",
        "mountPath": "/etc/report",
        "readOnly": True,
    }
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert not {"hostNetwork", "hostPID", "hostIPC"} & set(spec)
    # the namespace's default account needs no setting either
    assert template(serviceAccountName="default").service_account_name == "default"


@pytest.mark.parametrize(
    ("fields", "field", "mentions"),
    [
        ({"volumes": [{"name": "x", "nfs": {"server": "h"}}]}, "volumes[0]", "unknown volume"),
        ({"volumes": [{"name": "x"}]}, "volumes[0]", "exactly one volume source"),
        (
            {"volumes": [{"name": "x", "emptyDir": {}, "secret": {"secretName": "s"}}]},
            "volumes[0]",
            "exactly one",
        ),
        ({"volumeMounts": [{"name": "nope", "mountPath": "/x"}]}, "volumeMounts[0].name", "no "),
        (
            {
                "volumes": [{"name": "x", "emptyDir": {}}],
                "volumeMounts": [{"name": "x", "mountPath": "/x", "subPath": "../../etc"}],
            },
            "volumeMounts[0].subPath",
            "without '..'",
        ),
        ({"securityContext": {"sysctls": []}}, "securityContext.sysctls", "Extra inputs"),
        ({"podSecurityContext": {"sysctls": []}}, "podSecurityContext.sysctls", "Extra inputs"),
        ({"hostPath": {"path": "/"}}, "hostPath", "Extra inputs"),
        ({"privileged": True}, "privileged", "Extra inputs"),
        ({"args": ["--id", "$(REPORT_ID)"]}, "args[1]", "caller data into the command line"),
        ({"command": ["sh", "-c", "echo $(OPT_X)"]}, "command[2]", "command line"),
        ({"allowedKeys": {"names": ["LD_PRELOAD"]}}, "allowedKeys.names", "LD_PRELOAD"),
        ({"allowedKeys": {"names": ["PATH"]}}, "allowedKeys.names", "PATH"),
        ({"allowedKeys": {"pattern": ".*"}}, "allowedKeys.pattern", "narrow the pattern"),
        ({"allowedKeys": {"pattern": "^[A-Z_]+$"}}, "allowedKeys.pattern", "narrow the pattern"),
        (
            {"allowedKeys": {"pattern": "^KUBERNETES_.*$"}},
            "allowedKeys.pattern",
            "KUBERNETES_",
        ),
        (
            {"allowedKeys": {"pattern": "(?i)^http_proxy$"}},
            "allowedKeys.pattern",
            "HTTP_PROXY",
        ),
    ],
)
def test_other_refusals_name_the_field(fields: dict[str, Any], field: str, mentions: str) -> None:
    error = refusal(**fields)
    assert error.field.startswith(f"templates[0].{field}"), error
    assert mentions in error.message, error


def test_escaped_references_and_references_to_non_data_stay_allowed() -> None:
    """``$$(X)`` is a literal; ``$(HOME)`` is not caller data."""
    ok = template(args=["--literal", "$$(REPORT_ID)", "--home", "$(REPORTS_BUCKET)"])
    assert ok.args == ["--literal", "$$(REPORT_ID)", "--home", "$(REPORTS_BUCKET)"]


def kubelet_expand(value: str, env: Mapping[str, str]) -> str:
    """Kubernetes' ``expansion.Expand`` (third_party/forked/golang/expansion): ``$(NAME)``
    becomes the value of an earlier variable (left as written when unknown), ``$$`` becomes
    ``$``, any other ``$`` stays."""
    out, i = [], 0
    while i < len(value):
        if value[i] == "$" and i + 1 < len(value):
            following = value[i + 1]
            if following == "$":
                out.append("$")
                i += 2
                continue
            if following == "(":
                end = value.find(")", i + 2)
                if end != -1:
                    name = value[i + 2 : end]
                    out.append(env.get(name, f"$({name})"))
                    i = end + 1
                    continue
                out.append("$(")
                i += 2
                continue
            out.append("$" + following)
            i += 2
            continue
        out.append(value[i])
        i += 1
    return "".join(out)


def process_environment(job: dict[str, Any]) -> dict[str, str]:
    """What the process sees: each env entry expanded against the ones before it."""
    seen: dict[str, str] = {}
    for entry in job["spec"]["template"]["spec"]["containers"][0]["env"]:
        seen[entry["name"]] = kubelet_expand(entry["value"], seen)
    return seen


HOSTILE_VALUES = [
    "$(REPORTS_BUCKET)",
    "$(CUSTOMER_ID)",
    "$$(REPORTS_BUCKET)",
    "a$",
    "$",
    "$$$",
    "${HOME}",
    "$(",
    "line one\nline two\r\n",
    "../../etc/passwd",
    "'; rm -rf / #",
    '"},"securityContext":{"privileged":true},"x":{"',
    "ünïcødé ✓ 日本語 \u202e",
    "x" * 30_000,
    "",
]


@pytest.mark.parametrize("value", HOSTILE_VALUES, ids=range(len(HOSTILE_VALUES)))
def test_hostile_values_reach_only_env_values_and_arrive_unchanged(value: str) -> None:
    plain = template()
    data = {"REPORT_ID": value, "CUSTOMER_ID": "c-1"}
    job = build_job(plain, "key-1", data, {})
    assert process_environment(job)["REPORT_ID"] == value
    assert process_environment(job)["CUSTOMER_ID"] == "c-1"
    assert process_environment(job)["REPORTS_BUCKET"] == "s3://reports"
    assert without_env(job) == without_env(build_job(plain, "key-1", {}, {}))
    cron = build_cronjob(plain, "key-1", data, {"schedule": "@daily"})
    container = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert container["env"] == job["spec"]["template"]["spec"]["containers"][0]["env"]


def without_env(job: dict[str, Any]) -> dict[str, Any]:
    stripped = copy.deepcopy(job)
    stripped["spec"]["template"]["spec"]["containers"][0].pop("env")
    return stripped


@pytest.mark.parametrize(
    "key",
    [
        "../etc",
        "REPORT_ID/../x",
        "$(REPORT_ID)",
        "REPORT_ID\nX",
        "REPORT ID",
        "RÉPORT",
        "REPORT_ID=1",
        "0REPORT",
        "",
        "OPT_" + "X" * 5000,
        "REPORTS_BUCKET",  # the template's own static env
        "LD_PRELOAD",
        "PATH",
        "http_proxy",
        "KUBERNETES_SERVICE_HOST",
        "DB_SERVICE_HOST",
        "OPT_X_SERVICE_PORT",
        "PYTHONSTARTUP",
        "image",
        "securityContext",
        "serviceAccountName",
        "spec.template.spec.hostNetwork",
        "metadata",
    ],
)
def test_hostile_keys_are_refused_naming_the_key(key: str) -> None:
    plain = template(allowedKeys={"names": ["REPORT_ID"], "pattern": "^OPT_[A-Z0-9_]+$"})
    with pytest.raises(InvalidDispatch) as caught:
        build_job(plain, "key-1", {key: "1"}, {})
    assert caught.value.field == f"data.{key}" or caught.value.field == "data"


def test_reserved_names_are_refused_even_when_named_by_a_pattern_family() -> None:
    """The load-time check tries samples of each family; the request-time check is the rule."""
    loose = template(allowedKeys={"pattern": "^OPT_[A-Z0-9_]+$"})
    for key in ("OPT_DB_SERVICE_HOST", "OPT_API_SERVICE_PORT"):
        with pytest.raises(InvalidDispatch, match=f"data.{key}"):
            build_job(loose, "k", {key: "evil"}, {})
    assert all(not loose.allowed_keys.allows(name) for name in RESERVED_ENV_NAMES)


def test_the_example_templates_still_load() -> None:
    from pathlib import Path

    from extender.dispatch.templates import load_templates

    root = Path(__file__).resolve().parents[3]
    assert "report" in load_templates(root / "examples" / "job-templates.yaml")
