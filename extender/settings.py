"""The extender's settings: environment variables ``LOADSCHED_*``, overridden by CLI flags."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from extender.dispatch.authorizing import AuthMode
from extender.scheduling.wire import RejectionListing
from shared.kube.settings import KubeClientSettings, default_namespace
from shared.load_model import MessageStyle
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
    rebalance_namespace: str = Field(default_factory=default_namespace)
    """Namespace of the rebalancer's published status (the ConfigMap loadsched-rebalance the
    annotator's leader writes): the pod's own namespace in-cluster."""
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
    filter_messages: MessageStyle = "per-node"
    """How filter words a load refusal: ``per-node``, crane's message with the node and its
    value (``Load[cpu_usage_avg_5m]=0.81200 of node[n3] is above 0.65``), or ``per-reason``,
    the same phrase for every node refused for the same reason (``node(s) with
    Load[cpu_usage_avg_5m] above 0.65``). kube-scheduler puts every distinct message, with how
    many nodes gave it, in an unschedulable pod's PodScheduled condition and FailedScheduling
    event (cut at 1,024 characters): per node, a list of every node; per reason, a count per
    reason. Explain and the extender's log keep the node's values either way."""
    filter_rejections: RejectionListing = "when-none-pass"
    """Which filter answers list the nodes refused, each with its message:
    ``when-none-pass`` (the default), only an answer that passes no node; ``always``, every
    answer. kube-scheduler reads the refusals only when no node is left for the pod (they make
    its FailedScheduling event and PodScheduled condition, and tell preemption which nodes it
    cannot help); an answer that passes nodes has its refusals dropped unread, after
    kube-scheduler decodes them: at 5,000 nodes most of the JSON of each filter call, for it and
    for the extender. A node left out of an answer is refused all the same, and as
    unresolvable, as a load refusal is. ``always`` is for a chain where another extender
    follows this one: if that one refuses every node this one passed, the pod's event then
    says why this one refused the others. Explain, the metrics and the log count every
    refusal either way."""
    job_templates: Path | None = None
    """Job templates file (YAML); enables the job-dispatch API /v1/jobs. Needs a cluster."""
    dispatch_auth: AuthMode = "tokenreview"
    """Who may use the /v1 API (jobs, cronjobs, explain, status): tokenreview (bearer tokens
    checked by the API server, actions by SubjectAccessReview: the cluster's RBAC decides),
    static (--dispatch-tokens-file), or none (no checks; only when set explicitly)."""
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
    tls_client_ca_file: Path | None = None
    """Verify client certificates against this CA bundle (PEM; needs --tls-cert-file). A
    certificate it did not sign fails the TLS handshake, and the scheduler verbs (filter,
    prioritize, preempt) answer 403 on a connection that presented none: kube-scheduler's
    extender tlsConfig carries certFile and keyFile. The probes, /metrics and /v1 (bearer
    tokens) need no client certificate."""
    http_keep_alive_seconds: int = Field(default=5, ge=1, le=300)
    """An idle connection is closed after this many seconds: after its last answer (uvicorn's
    timeout_keep_alive), and also a new connection that sends nothing."""
    http_request_seconds: float = Field(default=60.0, gt=0, le=3600)
    """A request must arrive whole (headers and body) within this many seconds of its first
    byte, or its connection is closed: a client trickling a body cannot hold a connection
    and a task for ever. Above kube-scheduler's extender httpTimeout (30 s at most in
    practice), past which it has given up anyway."""
    http_max_header_bytes: int = Field(default=64 * 1024, ge=1024)
    """Largest request line and headers together; larger ones get 431 and the connection is
    closed. (The extender runs uvicorn's httptools parser, which has no such limit of its own;
    h11's h11_max_incomplete_event_size does not apply to it.)"""
    http_max_connections: int = Field(default=4096, ge=16)
    """Open connections plus requests in progress beyond which new requests get 503
    (uvicorn's limit_concurrency). Idle keep-alive connections count, so it stays well above
    what kube-scheduler and the probes open; the open-files limit is raised to allow it."""
    log_level: str = Field(default="INFO", pattern=r"(?i)^(debug|info|warning|error)$")
    """debug, info, warning or error."""
    log_format: LogFormat = "text"
    """text or json (one object per line)."""

    @model_validator(mode="after")
    def _tls_files_together(self) -> ExtenderSettings:
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ValueError(
                "--tls-cert-file / LOADSCHED_TLS_CERT_FILE and --tls-key-file / "
                "LOADSCHED_TLS_KEY_FILE go together"
            )
        if self.tls_client_ca_file is not None and self.tls_cert_file is None:
            raise ValueError(
                "--tls-client-ca-file / LOADSCHED_TLS_CLIENT_CA_FILE needs --tls-cert-file "
                "and --tls-key-file: client certificates are checked only over HTTPS"
            )
        return self

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
