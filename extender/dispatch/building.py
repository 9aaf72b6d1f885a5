"""From a dispatch request to a ``batch/v1`` Job body. Pure; no I/O.

- The Job's name is derived from the template and the key alone (a hash), so concurrent
  duplicates all try to create the same object and the API server lets exactly one win.
- The environment is the template's static variables plus the caller's data keys that the
  template allows; nothing of the dispatcher's own environment.
"""

from __future__ import annotations

import hashlib
import importlib.util
import zoneinfo
from collections.abc import Mapping
from functools import cache
from typing import Any

from extender.dispatch.pod_security import literal_env_value
from extender.dispatch.templates import ENV_NAME, JobTemplate
from shared.annotation_keys import KEY_ANNOTATION as KEY_ANNOTATION
from shared.annotation_keys import KEY_HASH_LABEL as KEY_HASH_LABEL
from shared.annotation_keys import TEMPLATE_LABEL as TEMPLATE_LABEL
from shared.errors import LoadschedError

DISPATCH_EXTRA = "the dispatch extra: pip install 'loadsched[dispatch]'"
"""What the job-dispatch API needs installed besides the base: croniter, which checks cron
schedules (the extender refuses to serve dispatch without it, :mod:`extender.app`)."""


@cache
def cron_available() -> bool:
    return importlib.util.find_spec("croniter") is not None


def _valid_cron(text: str) -> bool:
    from croniter import croniter

    return bool(croniter.is_valid(text))


MAX_KEY_LENGTH = 253
MAX_DATA_KEYS = 128


class InvalidDispatch(LoadschedError, ValueError):
    """A request the template does not allow; ``field`` is its JSON path."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def key_hash(template: str, key: str) -> str:
    return hashlib.sha256(f"{template}\n{key}".encode()).hexdigest()[:16]


def job_name(template: JobTemplate, key: str) -> str:
    """``<template>-<16 hex digits>``: at most 57 characters, a valid DNS label."""
    return f"{template.name}-{key_hash(template.name, key)}"


def check_request(
    template: JobTemplate, key: str, data: Mapping[str, str], overrides: Mapping[str, int]
) -> None:
    """Raise :class:`InvalidDispatch` naming the first field the template does not allow."""
    if not key or len(key) > MAX_KEY_LENGTH:
        raise InvalidDispatch("key", f"must be 1 to {MAX_KEY_LENGTH} characters")
    if len(data) > MAX_DATA_KEYS:
        raise InvalidDispatch("data", f"at most {MAX_DATA_KEYS} keys, got {len(data)}")
    size = 0
    for name, value in data.items():
        if not ENV_NAME.fullmatch(name):
            raise InvalidDispatch(
                f"data.{name}", "not a valid environment variable name ([A-Za-z_][A-Za-z0-9_]*)"
            )
        if not template.allowed_keys.allows(name):
            raise InvalidDispatch(f"data.{name}", f"not allowed by template {template.name}")
        size += len(name) + len(value.encode())
    if size > template.max_data_bytes:
        raise InvalidDispatch(
            "data", f"{size} bytes is over the template's limit of {template.max_data_bytes}"
        )
    for field, number in overrides.items():
        if field not in template.overridable:
            raise InvalidDispatch(
                f"overrides.{field}",
                f"template {template.name} allows overriding only {template.overridable}",
            )
        if number < 0 or (field in ("completions", "activeDeadlineSeconds") and number < 1):
            raise InvalidDispatch(f"overrides.{field}", f"out of range: {number}")


def build_job(
    template: JobTemplate, key: str, data: Mapping[str, str], overrides: Mapping[str, int]
) -> dict[str, Any]:
    check_request(template, key, data, overrides)
    labels = {**template.labels, TEMPLATE_LABEL: template.name}
    container: dict[str, Any] = {
        "name": "task",
        "image": template.image,
        "env": [{"name": e.name, "value": e.value} for e in template.env]
        + [{"name": k, "value": literal_env_value(v)} for k, v in sorted(data.items())],
        **template.container_fields(),
    }
    optional: dict[str, Any] = {
        "command": template.command,
        "args": template.args,
        "resources": template.resources or None,
        "envFrom": template.env_from or None,
    }
    container.update({k: v for k, v in optional.items() if v is not None})
    pod_spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [container]}
    names = {
        "schedulerName": template.scheduler_name,
        "priorityClassName": template.priority_class_name,
        "serviceAccountName": template.service_account_name,
    }
    pod_spec.update({k: v for k, v in names.items() if v is not None})
    pod_spec.update(template.pod_fields())
    if template.node_selector:
        pod_spec["nodeSelector"] = dict(template.node_selector)
    if template.tolerations:
        pod_spec["tolerations"] = [
            t.model_dump(by_alias=True, exclude_defaults=True) for t in template.tolerations
        ]
    spec: dict[str, Any] = {
        "backoffLimit": template.backoff_limit,
        "template": {"metadata": {"labels": labels}, "spec": pod_spec},
    }
    counts = {
        "completions": template.completions,
        "parallelism": template.parallelism,
        "activeDeadlineSeconds": template.active_deadline_seconds,
        "ttlSecondsAfterFinished": template.ttl_seconds_after_finished,
    }
    spec.update({k: v for k, v in counts.items() if v is not None})
    spec.update(overrides)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(template, key),
            "namespace": template.namespace,
            "labels": {**labels, KEY_HASH_LABEL: key_hash(template.name, key)},
            "annotations": {KEY_ANNOTATION: key},
        },
        "spec": spec,
    }


CRON_MACROS = frozenset(
    {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
)


def cronjob_name(template: JobTemplate, key: str) -> str:
    """``<template>-<10 hex digits>``: at most 51 characters (a CronJob's limit is 52, so the
    Jobs it creates can carry an 11-character suffix)."""
    return f"{template.name}-{key_hash(template.name, key)[:10]}"


def check_schedule(schedule: str, time_zone: str | None) -> None:
    """The schedule as kube-controller-manager accepts it: five fields or a macro, no
    ``TZ=`` prefix (use ``timeZone``); the time zone must be a known IANA name."""
    text = schedule.strip()
    if "TZ=" in text:
        raise InvalidDispatch("schedule", "set the time zone with timeZone, not TZ= in schedule")
    if text.startswith("@"):
        if text not in CRON_MACROS:
            raise InvalidDispatch(
                "schedule", f"unknown macro {text!r}; one of {sorted(CRON_MACROS)}"
            )
    elif not cron_available():
        raise InvalidDispatch("schedule", f"cron schedules need {DISPATCH_EXTRA}")
    elif len(text.split()) != 5 or not _valid_cron(text):
        raise InvalidDispatch(
            "schedule", f"not a five-field cron schedule (minute hour day month weekday): {text!r}"
        )
    if time_zone is not None:
        try:
            zoneinfo.ZoneInfo(time_zone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError) as e:
            raise InvalidDispatch("timeZone", f"unknown time zone {time_zone!r}") from e


def build_cronjob(
    template: JobTemplate,
    key: str,
    data: Mapping[str, str],
    schedule: Mapping[str, Any],
) -> dict[str, Any]:
    """A ``batch/v1`` CronJob whose Jobs are what :func:`build_job` makes; ``schedule`` holds
    the CronJob spec fields (schedule, timeZone, concurrencyPolicy, history limits, ...)."""
    check_schedule(str(schedule["schedule"]), schedule.get("timeZone"))
    job = build_job(template, key, data, {})
    spec = {k: v for k, v in schedule.items() if v is not None}
    spec["jobTemplate"] = {
        "metadata": {
            "labels": job["metadata"]["labels"],
            "annotations": job["metadata"]["annotations"],
        },
        "spec": job["spec"],
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {
            "name": cronjob_name(template, key),
            "namespace": template.namespace,
            "labels": job["metadata"]["labels"],
            "annotations": job["metadata"]["annotations"],
        },
        "spec": spec,
    }
