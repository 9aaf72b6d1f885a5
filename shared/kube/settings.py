"""The settings of the Kubernetes client layer both services share: one retry policy."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from pydantic import Field, ValidationInfo, field_validator
from pydantic_settings import BaseSettings

from shared.kube import retrying
from shared.kube.retrying import RetryPolicy

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def default_namespace() -> str:
    """The pod's own namespace in-cluster, else ``$POD_NAMESPACE``, else ``default``."""
    if SERVICE_ACCOUNT_NAMESPACE.exists():
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip()
    return os.environ.get("POD_NAMESPACE", "default")


class KubeClientSettings(BaseSettings):
    """Mixed into each service's settings (``LOADSCHED_KUBE_*`` / ``--kube-*``)."""

    kube_retry_attempts: int = Field(default=retrying.DEFAULT_ATTEMPTS, ge=1, le=20)
    """Tries of one Kubernetes API call in all (1: never retried). Reads are retried on any
    transient failure; writes only when the API server did not run them (connect errors, 429,
    503) or when repeating them is harmless (node annotation patches, reviews)."""
    kube_retry_backoff: float = Field(default=retrying.DEFAULT_BACKOFF, ge=0, le=60)
    """Seconds of the first backoff step, doubled each retry (full jitter)."""
    kube_retry_backoff_max: float = Field(default=retrying.DEFAULT_BACKOFF_MAX, ge=0, le=600)
    """Longest wait between two tries; also caps a server's Retry-After."""
    kube_timeout: float = Field(default=retrying.DEFAULT_TIMEOUT, gt=0, le=300)
    """Seconds per try of a Kubernetes API call (watches excepted)."""

    @field_validator("kube_retry_backoff_max")
    @classmethod
    def _not_below_backoff(cls, value: float, info: ValidationInfo) -> float:
        backoff = info.data.get("kube_retry_backoff")
        if backoff is not None and value < backoff:
            raise ValueError(f"must be at least --kube-retry-backoff ({backoff}), got {value}")
        return value

    def kube_retry(self) -> RetryPolicy:
        """The retry policy of every Kubernetes API call of the service."""
        return RetryPolicy(
            attempts=self.kube_retry_attempts,
            backoff=self.kube_retry_backoff,
            backoff_max=self.kube_retry_backoff_max,
            timeout=self.kube_timeout,
        )


def add_flags(add: Callable[..., object]) -> None:
    """Add these settings' flags with ``add`` (a parser's or group's ``add_argument``)."""
    for flag, kind, text in FLAGS:
        add(flag, type=kind, help=text)


FLAGS: tuple[tuple[str, type, str], ...] = (
    ("--kube-retry-attempts", int, "tries of one Kubernetes API call (default 5; 1 = no retry)"),
    ("--kube-retry-backoff", float, "seconds of the first retry backoff step (default 0.2)"),
    ("--kube-retry-backoff-max", float, "longest retry wait, caps Retry-After (default 8)"),
    ("--kube-timeout", float, "seconds per Kubernetes API call (default 10)"),
)
"""The command-line flags of these settings, for each service's argument parser."""
