"""Job templates: the server-side configuration that decides what a dispatched Job may be.

A caller names a template, gives an idempotency key and the task's data; the template fixes
the namespace, image, command, resources, static environment, which data keys may become
environment variables, the limits (``maxActive``, ``maxPending``) and how long a finished key
is remembered (``keyRetentionSeconds``); those three are kept across replicas in an admission
record (:mod:`extender.dispatch.admission`). Callers never choose the image or the namespace,
and the dispatcher's own environment is never copied into Jobs.

The file is YAML: ``{templates: [{name: ..., namespace: ..., image: ..., ...}]}``. Errors name
the file and the field path (``templates[2].allowedKeys.pattern``).

A template cannot be used to escalate. What would give its pods more than an ordinary pod of
the namespace is refused at load time, naming the field, unless the template says so with a
named setting: ``hostPath`` volumes (``allowHostPath``); ``privileged``,
``allowPrivilegeEscalation: true``, added capabilities, an unmasked ``procMount`` or an
``Unconfined`` seccomp profile (``allowPrivileged``); ``hostNetwork``, ``hostPID``,
``hostIPC`` (``allowHostNamespaces``); a ServiceAccount other than the template's own, the
one named after the template (``allowOtherServiceAccount``). Caller data only ever becomes
environment variable values: a data key may not name a variable that changes how programs
start or find their cluster (:func:`reserved_env_name`), the command and arguments may not
refer to a data key (``$(KEY)`` would be expanded into them by the kubelet), and ``$`` in a
value is escaped so that the kubelet expands nothing in it (:func:`literal_env_value`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from extender.dispatch.pod_security import (
    ENV_REFERENCE,
    RESERVED_SAMPLES,
    ContainerSecurityContext,
    PodSecurityContext,
    Volume,
    VolumeMount,
    reserved_env_name,
)
from shared.errors import ConfigError

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_DATA_KEY_LENGTH = 256
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

    @field_validator("names")
    @classmethod
    def _not_reserved(cls, value: list[str]) -> list[str]:
        for name in value:
            reason = reserved_env_name(name)
            if reason is not None:
                raise ValueError(f"caller data may not set {name}: {reason}")
        return value

    @field_validator("pattern")
    @classmethod
    def _matches_nothing_reserved(cls, value: str | None) -> str | None:
        if value is not None:
            matched = [name for name in RESERVED_SAMPLES if re.fullmatch(value, name)]
            if matched:
                raise ValueError(
                    f"also matches {matched[:5]}, which caller data may not set "
                    f"({reserved_env_name(matched[0])}); narrow the pattern"
                )
        return value

    def allows(self, key: str) -> bool:
        """Whether caller data may set ``key``: allowed by name or pattern, at most
        :data:`MAX_DATA_KEY_LENGTH` characters, and not reserved."""
        if len(key) > MAX_DATA_KEY_LENGTH or reserved_env_name(key) is not None:
            return False
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
    volumes: list[Volume] = []
    """The pods' volumes; ``hostPath`` needs ``allowHostPath``."""
    volume_mounts: list[VolumeMount] = Field(default=[], alias="volumeMounts")
    """Where the container mounts them."""
    security_context: ContainerSecurityContext | None = Field(default=None, alias="securityContext")
    """The container's securityContext; what widens it needs ``allowPrivileged``."""
    pod_security_context: PodSecurityContext | None = Field(
        default=None, alias="podSecurityContext"
    )
    """The pod's securityContext."""
    host_network: bool = Field(default=False, alias="hostNetwork")
    host_pid: bool = Field(default=False, alias="hostPID")
    host_ipc: bool = Field(default=False, alias="hostIPC")
    """The host's namespaces: each needs ``allowHostNamespaces``."""
    allow_host_path: bool = Field(default=False, alias="allowHostPath")
    """Allow ``hostPath`` volumes (the node's files)."""
    allow_privileged: bool = Field(default=False, alias="allowPrivileged")
    """Allow privileged containers, privilege escalation, added capabilities, an unmasked
    /proc and an Unconfined seccomp profile."""
    allow_host_namespaces: bool = Field(default=False, alias="allowHostNamespaces")
    """Allow hostNetwork, hostPID and hostIPC."""
    allow_other_service_account: bool = Field(default=False, alias="allowOtherServiceAccount")
    """Allow a ``serviceAccountName`` other than the template's own (its name)."""

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

    @model_validator(mode="after")
    def _no_data_in_the_command_line(self) -> JobTemplate:
        for field, words in (("command", self.command), ("args", self.args)):
            for index, word in enumerate(words or ()):
                for name in ENV_REFERENCE.findall(word.replace("$$", "")):
                    if self.allowed_keys.allows(name):
                        raise TemplateFieldError(
                            f"{field}[{index}]",
                            f"$({name}) would put caller data into the command line (the "
                            "kubelet expands it); read it from the environment instead",
                        )
        return self

    @model_validator(mode="after")
    def _no_escalation(self) -> JobTemplate:
        for field, why, allowed_by in self.escalations():
            if not getattr(self, allowed_by):
                raise TemplateFieldError(
                    field, f"{why}; refused unless the template sets {_ALIASES[allowed_by]}: true"
                )
        declared = {v.name for v in self.volumes}
        for index, mount in enumerate(self.volume_mounts):
            if mount.name not in declared:
                raise TemplateFieldError(
                    f"volumeMounts[{index}].name", f"no volume {mount.name!r} in volumes"
                )
        return self

    def escalations(self) -> list[tuple[str, str, str]]:
        """(field, why, the setting that allows it) for everything this template gives its
        pods beyond an ordinary pod of the namespace."""
        found = [
            (f"volumes[{i}].hostPath", "mounts the node's files", "allow_host_path")
            for i, volume in enumerate(self.volumes)
            if volume.source == "hostPath"
        ]
        if self.security_context is not None:
            found += [
                (f"securityContext.{field}", why, "allow_privileged")
                for field, why in self.security_context.escalations()
            ]
        pod = self.pod_security_context
        if pod is not None and pod.seccomp_profile is not None:
            if pod.seccomp_profile.type == "Unconfined":
                why = "Unconfined turns system-call filtering off"
                found.append(("podSecurityContext.seccompProfile.type", why, "allow_privileged"))
        for field, on in (
            ("hostNetwork", self.host_network),
            ("hostPID", self.host_pid),
            ("hostIPC", self.host_ipc),
        ):
            if on:
                found.append((field, "shares the node's namespace", "allow_host_namespaces"))
        account = self.service_account_name
        if account not in (None, "default", self.name):
            why = (
                f"runs as ServiceAccount {account!r}, not the template's own ({self.name!r}) "
                "or the namespace's default"
            )
            found.append(("serviceAccountName", why, "allow_other_service_account"))
        return found

    def pod_fields(self) -> dict[str, Any]:
        """The pod spec's volumes, securityContext and host namespaces, as set."""
        fields: dict[str, Any] = {}
        if self.volumes:
            fields["volumes"] = [v.model_dump(by_alias=True) for v in self.volumes]
        if self.pod_security_context is not None:
            fields["securityContext"] = _dump(self.pod_security_context)
        for name, on in (
            ("hostNetwork", self.host_network),
            ("hostPID", self.host_pid),
            ("hostIPC", self.host_ipc),
        ):
            if on:
                fields[name] = True
        return fields

    def container_fields(self) -> dict[str, Any]:
        """The container's volumeMounts and securityContext, as set."""
        fields: dict[str, Any] = {}
        if self.volume_mounts:
            fields["volumeMounts"] = [_dump(m) for m in self.volume_mounts]
        if self.security_context is not None:
            fields["securityContext"] = _dump(self.security_context)
        return fields


class TemplateFieldError(ValueError):
    """A template field refused; ``field`` is its path inside the template."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


_ALIASES = {
    name: info.alias or name
    for name, info in JobTemplate.model_fields.items()
    if name.startswith("allow_")
}


def _dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(by_alias=True, exclude_none=True, exclude_defaults=True)


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
        loc = tuple(detail["loc"])
        cause = (detail.get("ctx") or {}).get("error")
        if isinstance(cause, TemplateFieldError):
            # a model validator's error: the template's place, then the field inside it
            return_path = f"{_path(loc)}.{cause.field}" if loc else cause.field
            raise ConfigError(source, return_path, cause.message) from e
        raise ConfigError(source, _path(loc), detail["msg"]) from e
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
