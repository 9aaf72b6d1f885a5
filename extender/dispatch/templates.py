"""Job templates: the server-side configuration that decides what a dispatched Job may be.

A caller names a template, gives an idempotency key and the task's data; the template fixes
the namespace, image, command, resources, static environment, which data keys may become
environment variables, the limits (``maxActive``, ``maxPending``) and how long a finished key
is remembered (``keyRetentionSeconds``); those three are kept across replicas in an admission
record (:mod:`extender.dispatch.admission`). Callers never choose the image or the namespace,
and the dispatcher's own environment is never copied into Jobs.

The file is YAML: ``{templates: [{name: ..., namespace: ..., image: ..., ...}]}``. Errors name
the file and the field path (``templates[2].allowedKeys.pattern``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from shared.errors import ConfigError

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
OVERRIDABLE = frozenset(
    {
        "completions",
        "parallelism",
        "backoffLimit",
        "activeDeadlineSeconds",
        "ttlSecondsAfterFinished",
    }
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class AllowedKeys(_Strict):
    names: list[str] = []
    """Data keys allowed by exact name."""
    pattern: str | None = None
    """A regular expression a whole data key may match instead."""

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as e:
                raise ValueError(f"not a regular expression: {e}") from e
        return value

    def allows(self, key: str) -> bool:
        return key in self.names or (
            self.pattern is not None and re.fullmatch(self.pattern, key) is not None
        )


class EnvVar(_Strict):
    name: str = Field(pattern=ENV_NAME.pattern)
    value: str


class PodToleration(_Strict):
    """A toleration as in a pod spec; an empty key needs ``Exists``, which takes no value."""

    key: str = ""
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str = ""
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] = ""
    toleration_seconds: int | None = Field(default=None, alias="tolerationSeconds")

    @model_validator(mode="after")
    def _consistent(self) -> PodToleration:
        if not self.key and self.operator != "Exists":
            raise ValueError("an empty key tolerates every taint only with operator Exists")
        if self.operator == "Exists" and self.value:
            raise ValueError("operator Exists takes no value")
        return self


class JobTemplate(_Strict):
    name: str = Field(pattern=DNS_LABEL, max_length=40)
    namespace: str = Field(pattern=DNS_LABEL, max_length=63)
    image: str = Field(min_length=1)
    command: list[str] | None = None
    args: list[str] | None = None
    resources: dict[str, dict[str, str]] = {}
    """``{requests: {cpu: 500m}, limits: {...}}`` as in a container."""
    env: list[EnvVar] = []
    """Static environment variables, set on every Job of the template."""
    env_from: list[dict[str, Any]] = Field(default=[], alias="envFrom")
    """``configMapRef``/``secretRef`` entries, as in a container."""
    allowed_keys: AllowedKeys = Field(default_factory=AllowedKeys, alias="allowedKeys")
    """Which data keys become environment variables; any other key is refused."""
    labels: dict[str, str] = {}
    priority_class_name: str | None = Field(default=None, alias="priorityClassName")
    scheduler_name: str | None = Field(default=None, alias="schedulerName")
    service_account_name: str | None = Field(default=None, alias="serviceAccountName")
    node_selector: dict[str, str] = Field(default={}, alias="nodeSelector")
    """The pods' ``nodeSelector``; the "no node fits" check honours it, and ``tolerations``."""
    tolerations: list[PodToleration] = []
    completions: int | None = Field(default=None, ge=1)
    parallelism: int | None = Field(default=None, ge=0)
    backoff_limit: int = Field(default=0, ge=0, alias="backoffLimit")
    active_deadline_seconds: int | None = Field(default=None, ge=1, alias="activeDeadlineSeconds")
    ttl_seconds_after_finished: int | None = Field(
        default=3600, ge=0, alias="ttlSecondsAfterFinished"
    )
    max_active: int | None = Field(default=None, ge=1, alias="maxActive")
    """Refuse (429) while this many Jobs of the template are active."""
    max_pending: int | None = Field(default=None, ge=0, alias="maxPending")
    """Refuse (429) while this many of the template's pods are Pending (a Job admitted but
    whose pods are not seen yet counts as its first pods, Pending)."""
    key_retention_seconds: int | None = Field(
        default=None, ge=1, le=30 * 24 * 3600, alias="keyRetentionSeconds"
    )
    """Keep a finished-key record this long after a key's Job is seen finished or gone: a
    repeated key is answered ``200`` with what is known of its Job, never a second Job, even
    after ``ttlSecondsAfterFinished`` deleted it. Unset: a key is known while its Job exists."""
    overridable: list[str] = ["completions", "parallelism"]
    """Job fields a caller may override, among completions, parallelism, backoffLimit,
    activeDeadlineSeconds and ttlSecondsAfterFinished."""
    max_data_bytes: int = Field(default=32 * 1024, ge=1, alias="maxDataBytes")
    """Largest total size of the data values."""

    @field_validator("overridable")
    @classmethod
    def _known_fields(cls, value: list[str]) -> list[str]:
        unknown = sorted(set(value) - OVERRIDABLE)
        if unknown:
            raise ValueError(f"unknown Job fields {unknown}; allowed: {sorted(OVERRIDABLE)}")
        return value

    @field_validator("resources")
    @classmethod
    def _resource_kinds(cls, value: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
        unknown = sorted(set(value) - {"requests", "limits"})
        if unknown:
            raise ValueError(f"only requests and limits, not {unknown}")
        return value

    @model_validator(mode="after")
    def _static_env_is_not_data(self) -> JobTemplate:
        clash = sorted(e.name for e in self.env if self.allowed_keys.allows(e.name))
        if clash:
            raise ValueError(f"static env {clash} would be overridable by caller data")
        return self


class TemplateFile(_Strict):
    templates: list[JobTemplate] = []

    @field_validator("templates")
    @classmethod
    def _unique(cls, value: list[JobTemplate]) -> list[JobTemplate]:
        names = [t.name for t in value]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate template names {dupes}")
        return value


def parse_templates(data: object, *, source: str) -> dict[str, JobTemplate]:
    try:
        parsed = TemplateFile.model_validate(data if data is not None else {})
    except ValidationError as e:
        detail = e.errors()[0]
        raise ConfigError(source, _path(detail["loc"]), detail["msg"]) from e
    return {t.name: t for t in parsed.templates}


def load_templates(path: Path) -> dict[str, JobTemplate]:
    """Templates by name; :class:`ConfigError` names the file and field of a bad one."""
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as e:
        raise ConfigError(str(path), "", f"cannot read: {e.strerror}") from e
    except yaml.YAMLError as e:
        raise ConfigError(str(path), "", f"not YAML: {e}") from e
    return parse_templates(data, source=str(path))


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
