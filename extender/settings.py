"""The extender's settings: environment variables ``LOADSCHED_*``, overridden by CLI flags."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, field_validator
from pydantic_settings import SettingsConfigDict

from extender.dispatch.authorizing import AuthMode
from shared.kube.settings import KubeClientSettings
from shared.logs import LogFormat
from shared.settings import ENV_PREFIX, build_settings


class ExtenderSettings(KubeClientSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid", frozen=True)

    serve: str | None = None
    """What this process serves, comma-separated: ``scheduling`` (filter, prioritize, preempt),
    ``dispatch`` (/v1/jobs, /v1/cronjobs), or both. Unset: scheduling, plus dispatch when
    --job-templates is set."""
    policy: Path | None = None
    """The DynamicSchedulerPolicy file; crane's defaults when unset."""
    host: str = "127.0.0.1"
    """Address to listen on."""
    port: int = Field(default=8888, ge=0, le=65535)
    """Port to listen on (0 picks a free one)."""
    kubeconfig: Path | None = None
    """kubeconfig for the node cache; in-cluster when unset and running in a pod; without
    either, only full-node requests (nodeCacheCapable: false) can be answered."""
    kube_context: str | None = None
    """kubeconfig context; the current one when unset."""
    elastic_quota: bool = False
    """Enforce ElasticQuotas (scheduling.x-k8s.io/v1alpha1) at filter and preempt; needs the
    CRD installed and a cluster (kubeconfig or in-cluster). Watches pods and quotas."""
    quota_assume_seconds: float = Field(default=30.0, gt=0)
    """How long a pod admitted at filter counts against its quota before the watch shows it
    bound (kube-scheduler binds asynchronously)."""
    requeue: bool = True
    """Make kube-scheduler retry pods the extender refused once its own view would admit them
    (a node that now passes, a quota with room): one Node annotation write per change, at
    most one per --requeue-min-interval. Needs a cluster and `patch` on nodes."""
    requeue_period: float = Field(default=0.5, gt=0, le=60)
    """Seconds between checks of the refusals remembered for requeue (none while none are)."""
    requeue_min_interval: float = Field(default=1.0, ge=0, le=300)
    """Least seconds between two requeue writes of this replica."""
    job_templates: Path | None = None
    """Job templates file (YAML); enables the job-dispatch API /v1/jobs. Needs a cluster."""
    dispatch_auth: AuthMode = "tokenreview"
    """Who may use /v1/jobs: tokenreview (bearer tokens checked by the API server, actions by
    SubjectAccessReview: the cluster's RBAC decides), static (--dispatch-tokens-file), or none
    (no checks; only when set explicitly)."""
    dispatch_tokens_file: Path | None = None
    """For --dispatch-auth static: token,user,uid,"groups" lines (kube-apiserver's format)."""
    dispatch_retry_after: int = Field(default=10, ge=1)
    """Seconds a 429 from /v1/jobs asks the caller to wait (Retry-After)."""
    max_body_bytes: int = Field(default=256 * 1024 * 1024, gt=0)
    """Largest request body accepted; larger ones get 413."""
    tls_cert_file: Path | None = None
    """Serve HTTPS with this certificate (PEM; kube-scheduler's extender tlsConfig)."""
    tls_key_file: Path | None = None
    """The certificate's private key (PEM)."""
    log_level: str = Field(default="INFO", pattern=r"(?i)^(debug|info|warning|error)$")
    """debug, info, warning or error."""
    log_format: LogFormat = "text"
    """text or json (one object per line)."""

    @field_validator("serve")
    @classmethod
    def _known_rooms(cls, value: str | None) -> str | None:
        if value is None:
            return None
        rooms = [part.strip() for part in value.split(",") if part.strip()]
        unknown = [room for room in rooms if room not in ("scheduling", "dispatch")]
        if not rooms or unknown:
            raise ValueError(f"expected scheduling, dispatch or scheduling,dispatch; got {value!r}")
        return ",".join(sorted(set(rooms), reverse=True))


def load_settings(**overrides: Any) -> ExtenderSettings:
    """Environment plus explicit overrides (``None`` overrides are ignored), validated."""
    return build_settings(ExtenderSettings, overrides)
