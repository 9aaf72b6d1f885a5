"""What a job template may give its pods, and what caller data may set.

- :func:`reserved_env_name`: environment variables caller data may never set (they change how
  programs start, what they load, whom they trust, or where in-cluster clients send their
  token);
- :func:`literal_env_value`: a data value as an env value the kubelet passes on unchanged;
- the pod and container fields a template may set (volumes, mounts, security contexts), each
  able to list what in it would give more than an ordinary pod of the namespace
  (:meth:`ContainerSecurityContext.escalations`, :attr:`Volume.source`); the template
  (:mod:`extender.dispatch.templates`) refuses those unless a named setting allows them.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"

RESERVED_ENV_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "SHELL",
        "USER",
        "HOSTNAME",
        "IFS",
        "ENV",
        "BASH_ENV",
        "GCONV_PATH",
        "NODE_OPTIONS",
        "NODE_PATH",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "JDK_JAVA_OPTIONS",
        "CLASSPATH",
        "PERL5OPT",
        "PERL5LIB",
        "PERLLIB",
        "RUBYOPT",
        "RUBYLIB",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "NO_PROXY",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
    }
)
"""Variables that change how a program starts, what it loads or whom it trusts (compared
without case: ``http_proxy`` too)."""
RESERVED_ENV_PREFIXES = ("LD_", "DYLD_", "PYTHON", "BASH_FUNC_", "KUBERNETES_")
RESERVED_ENV_SUFFIXES = ("_SERVICE_HOST", "_SERVICE_PORT")
"""Service links the kubelet sets (``KUBERNETES_SERVICE_HOST`` is where in-cluster clients
send their token)."""


def reserved_env_name(name: str) -> str | None:
    """Why caller data may not set the variable ``name``, or ``None`` when it may."""
    upper = name.upper()
    if upper in RESERVED_ENV_NAMES:
        return f"{name} changes how programs start, what they load or whom they trust"
    if upper.startswith(RESERVED_ENV_PREFIXES):
        return f"{name} is in a reserved family ({', '.join(RESERVED_ENV_PREFIXES)}...)"
    if upper.endswith(RESERVED_ENV_SUFFIXES):
        return f"{name} looks like a service link the kubelet sets"
    return None


RESERVED_SAMPLES = sorted(
    RESERVED_ENV_NAMES
    | {name.lower() for name in RESERVED_ENV_NAMES}
    | {prefix + "PRELOAD" for prefix in RESERVED_ENV_PREFIXES}
    | {prefix + "X" for prefix in RESERVED_ENV_PREFIXES}
    | {"KUBERNETES_SERVICE_HOST", "DB" + RESERVED_ENV_SUFFIXES[0], "DB" + RESERVED_ENV_SUFFIXES[1]}
)
"""Names an ``allowedKeys.pattern`` is tried against at load time (the request-time check
covers the rest of each family)."""
ENV_REFERENCE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def literal_env_value(value: str) -> str:
    """``value`` as an env value the kubelet passes on unchanged: it expands ``$(NAME)``
    and turns ``$$`` into ``$``, so every ``$`` is doubled."""
    return value.replace("$", "$$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class SeccompProfile(_Strict):
    type: Literal["RuntimeDefault", "Localhost", "Unconfined"]
    localhost_profile: str | None = Field(default=None, alias="localhostProfile")


class Capabilities(_Strict):
    add: list[str] = []
    drop: list[str] = []


class ContainerSecurityContext(_Strict):
    """The container's ``securityContext``; the fields that widen it need
    ``allowPrivileged``."""

    privileged: bool | None = None
    allow_privilege_escalation: bool | None = Field(default=None, alias="allowPrivilegeEscalation")
    capabilities: Capabilities | None = None
    proc_mount: Literal["Default", "Unmasked"] | None = Field(default=None, alias="procMount")
    seccomp_profile: SeccompProfile | None = Field(default=None, alias="seccompProfile")
    run_as_user: int | None = Field(default=None, ge=0, alias="runAsUser")
    run_as_group: int | None = Field(default=None, ge=0, alias="runAsGroup")
    run_as_non_root: bool | None = Field(default=None, alias="runAsNonRoot")
    read_only_root_filesystem: bool | None = Field(default=None, alias="readOnlyRootFilesystem")

    def escalations(self) -> list[tuple[str, str]]:
        """(field, why) for each setting that gives more than an ordinary container."""
        found = []
        if self.privileged:
            found.append(("privileged", "a privileged container is root on the node"))
        if self.allow_privilege_escalation:
            found.append(("allowPrivilegeEscalation", "lets a process gain more privileges"))
        if self.capabilities is not None and self.capabilities.add:
            found.append(("capabilities.add", f"adds capabilities {self.capabilities.add}"))
        if self.proc_mount == "Unmasked":
            found.append(("procMount", "an unmasked /proc exposes the host's kernel settings"))
        if self.seccomp_profile is not None and self.seccomp_profile.type == "Unconfined":
            found.append(("seccompProfile.type", "Unconfined turns system-call filtering off"))
        return found


class PodSecurityContext(_Strict):
    """The pod's ``securityContext`` (identity and file-system group; no sysctls)."""

    run_as_user: int | None = Field(default=None, ge=0, alias="runAsUser")
    run_as_group: int | None = Field(default=None, ge=0, alias="runAsGroup")
    run_as_non_root: bool | None = Field(default=None, alias="runAsNonRoot")
    fs_group: int | None = Field(default=None, ge=0, alias="fsGroup")
    supplemental_groups: list[int] = Field(default=[], alias="supplementalGroups")
    seccomp_profile: SeccompProfile | None = Field(default=None, alias="seccompProfile")


VOLUME_SOURCES = frozenset(
    {
        "emptyDir",
        "configMap",
        "secret",
        "persistentVolumeClaim",
        "projected",
        "downwardAPI",
        "ephemeral",
        "csi",
        "hostPath",
    }
)


class Volume(BaseModel):
    """A pod volume: its name and exactly one source among :data:`VOLUME_SOURCES`, passed
    as written (the API server checks the source's own fields)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    name: str = Field(pattern=DNS_LABEL, max_length=63)

    @model_validator(mode="after")
    def _one_known_source(self) -> Volume:
        sources = sorted(self.model_extra or {})
        unknown = [source for source in sources if source not in VOLUME_SOURCES]
        if unknown:
            raise ValueError(f"unknown volume source {unknown}; one of {sorted(VOLUME_SOURCES)}")
        if len(sources) != 1:
            raise ValueError(f"exactly one volume source, got {sources or 'none'}")
        return self

    @property
    def source(self) -> str:
        return next(iter(self.model_extra or {}))


class VolumeMount(_Strict):
    name: str
    mount_path: str = Field(alias="mountPath", pattern=r"^/")
    read_only: bool | None = Field(default=None, alias="readOnly")
    sub_path: str | None = Field(default=None, alias="subPath")

    @field_validator("sub_path")
    @classmethod
    def _inside_the_volume(cls, value: str | None) -> str | None:
        if value is not None and (value.startswith("/") or ".." in value.split("/")):
            raise ValueError("a relative path inside the volume, without '..'")
        return value
