"""The annotator's settings: environment variables ``LOADSCHED_*``, overridden by CLI flags."""

from __future__ import annotations

import re
import socket
import uuid
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator
from pydantic_settings import SettingsConfigDict

from shared.errors import ConfigError
from shared.kube.settings import KubeClientSettings, default_namespace
from shared.logs import LogFormat
from shared.settings import ENV_PREFIX, build_settings, flag_and_variable


def _default_identity() -> str:
    return f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}"


class AnnotatorSettings(KubeClientSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid", frozen=True)

    policy: Path | None = None
    """The DynamicSchedulerPolicy file; crane's defaults when unset."""
    prometheus_url: str | None = None
    """Prometheus base URL, e.g. http://prometheus:9090 (required)."""
    prometheus_bearer_token_file: Path | None = None
    """File with a bearer token for Prometheus (read on every query)."""
    prometheus_username: str | None = None
    """Basic-auth user for Prometheus."""
    prometheus_password_file: Path | None = None
    """File with the basic-auth password."""
    prometheus_ca_file: Path | None = None
    """CA bundle for Prometheus's TLS certificate."""
    prometheus_insecure_skip_verify: bool = False
    """Do not verify Prometheus's TLS certificate."""
    prometheus_timeout: float = Field(default=10.0, gt=0)
    """Seconds per Prometheus query."""
    kubeconfig: Path | None = None
    """kubeconfig; in-cluster when unset."""
    kube_context: str | None = None
    """kubeconfig context."""
    kube_direct: bool = True
    """Write node annotation patches to the API server over connections of the annotator's
    own, each in one write and its answer parsed by httptools, rather than through httpx: a
    round patches every node, and httpx's work per request made rounds longer (see the
    development docs, "One HTTP stack per job"). Off, every request goes through httpx. A
    proxy named in the environment (``HTTPS_PROXY``) turns it off."""
    once: bool = False
    """Sync every metric once, then exit."""
    dry_run: bool = False
    """Log what would be written instead of writing."""
    leader_elect: bool = True
    """Take part in leader election; only the leader writes."""
    lease_name: str = "loadsched-annotator"
    """Name of the coordination.k8s.io Lease."""
    lease_namespace: str = Field(default_factory=default_namespace)
    """Namespace of the Lease (the pod's own namespace in-cluster)."""
    identity: str = Field(default_factory=_default_identity)
    """This replica's name in the Lease."""
    write_concurrency: int = Field(default=8, ge=1, le=256)
    """Node patches in flight at once."""
    elastic_quota: bool = False
    """Run the elastic-quota controller (leader only): status.used of every ElasticQuota, and
    reclaim of lent capacity by eviction. Needs the CRD installed."""
    evictions_per_minute: float = Field(default=30.0, gt=0)
    """Most borrower pods the reclaim controller evicts per minute."""
    eviction_grace_seconds: int | None = Field(default=None, ge=0)
    """Grace period of reclaim evictions; the pod's own when unset."""
    quota_period: float = Field(default=5.0, gt=0)
    """Seconds between elastic-quota passes when no watch event wakes the controller."""
    host: str = "127.0.0.1"
    """Address of /healthz, /readyz and /metrics."""
    port: int = Field(default=8889, ge=0, le=65535)
    """Port of /healthz, /readyz and /metrics (0: do not serve)."""
    log_level: str = Field(default="INFO", pattern=r"(?i)^(debug|info|warning|error)$")
    """debug, info, warning or error."""
    log_format: LogFormat = "text"
    """text or json."""

    @field_validator("prometheus_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"https?://\S+", value):
            raise ValueError(
                f"must be an http(s) URL such as http://prometheus:9090, got {value!r}"
            )
        return value


def load_settings(**overrides: Any) -> AnnotatorSettings:
    """Environment plus explicit overrides (``None`` overrides are ignored), validated."""
    settings = build_settings(AnnotatorSettings, overrides)
    if not settings.prometheus_url:
        raise ConfigError(flag_and_variable("prometheus_url"), "", "required")
    if settings.prometheus_password_file and not settings.prometheus_username:
        raise ConfigError(
            flag_and_variable("prometheus_password_file"), "", "needs --prometheus-username"
        )
    return settings
