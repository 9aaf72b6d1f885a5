"""The JSON of ``GET /v1/status`` (documented in the OpenAPI schema by these models)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, get_args

from pydantic import BaseModel, Field


class MetricCell(BaseModel):
    """One metric of one node, as the verdict read it."""

    state: str
    """``fresh``, or why the value is not used: missing, malformed, negative, not-finite,
    stale, future."""
    value: float | None
    """The annotation's value (also when stale, so an old value can be seen)."""
    age_seconds: float | None = Field(serialization_alias="ageSeconds")
    """Seconds since the value was sampled."""
    estimated: float
    """Added for pods the sample does not show yet (estimation)."""
    limit: float | None
    """The predicate's limit (``None``: not a predicate, or 0 = off)."""
    limit_from: str | None = Field(serialization_alias="limitFrom")
    """``policy``, or ``node`` when the node's own predicate-limits annotation sets it."""
    weight: float | None
    """The priority's weight (``None``: not a priority)."""
    points: float
    """This metric's share of the 0..100 score."""
    decided: bool
    """This metric rejected the node."""
    usage: float | None
    """(value + estimate) ÷ limit, else value + estimate: what the heatmap colours."""


class NodeRow(BaseModel):
    name: str
    passes: bool
    rejection: str | None
    """The filter's message when the node is rejected."""
    decided_by: str | None = Field(serialization_alias="decidedBy")
    reason: str | None
    """``overloaded``, or why the deciding value was unknown (fail-closed)."""
    score: int
    """0..100 (crane's scale, hot-value penalty included)."""
    extender_score: int = Field(serialization_alias="extenderScore")
    """0..10, what prioritize answers (crane's mapping; with ``normalize: minMax`` prioritize
    spreads the nodes asked about instead)."""
    hot: float
    """The fresh hot value (each point costs 10 of the 0..100 score)."""
    hot_age_seconds: float | None = Field(serialization_alias="hotAgeSeconds")
    placed: int
    """Pods bound since a sample that estimation counted."""
    limits_error: str | None = Field(serialization_alias="limitsError")
    metrics: dict[str, MetricCell]


class MetricColumn(BaseModel):
    name: str
    limit: float | None
    weight: float | None
    fresh_seconds: float = Field(serialization_alias="freshSeconds")
    """How long a value stays fresh (period + 5m)."""


class Nodes(BaseModel):
    available: bool
    """``False`` when this process has no node view (no cluster configured)."""
    total: int
    rejected: int
    stale: int
    """Nodes with at least one metric not fresh."""
    columns: list[MetricColumn]
    hot_limit: int = Field(serialization_alias="hotValueLimit")
    items: list[NodeRow]


class QuotaResource(BaseModel):
    min: str
    max: str | None
    used: str
    borrowed: str
    """Used over ``min``."""
    lent: str
    """Of its unused ``min``, what other namespaces borrow now (at most the total borrowed
    by the others)."""


class QuotaRow(BaseModel):
    namespace: str
    borrower: bool
    resources: dict[str, QuotaResource]


class InvalidQuota(BaseModel):
    namespace: str
    name: str
    reason: str


class Quotas(BaseModel):
    enabled: bool
    items: list[QuotaRow]
    pool: dict[str, dict[str, str]]
    """Per resource, the sums over every quota: ``min`` and ``used``."""
    invalid: list[InvalidQuota]


class TemplateRow(BaseModel):
    name: str
    namespace: str
    active: int
    pending: int
    max_active: int | None = Field(serialization_alias="maxActive")
    max_pending: int | None = Field(serialization_alias="maxPending")
    refusing: str | None
    """Why a new Job of the template would be answered 429 now (this replica's watches)."""


class Templates(BaseModel):
    enabled: bool
    items: list[TemplateRow]


StatusPart = Literal["nodes", "quotas", "templates", "rebalance"]
STATUS_PARTS: tuple[StatusPart, ...] = get_args(StatusPart)


class Status(BaseModel):
    generated_at: datetime = Field(serialization_alias="generatedAt")
    ready: bool
    readiness: str
    nodes: Nodes | None = Field(description="null when ?part= did not ask for it")
    quotas: Quotas | None = Field(description="null when ?part= did not ask for it")
    templates: Templates | None = Field(description="null when ?part= did not ask for it")
    rebalance: dict[str, Any] | None = Field(
        default=None,
        description="the rebalancer's last round: nodes over threshold, the plan, the last "
        "evictions (published by the annotator's leader); null when ?part= did not ask for it",
    )
