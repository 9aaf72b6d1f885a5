"""The rebalancer's part of the policy (``spec.rebalance``): thresholds, limits, the pods it
may move and how their usage is read."""

from __future__ import annotations

from datetime import timedelta

from pydantic import Field, field_validator, model_validator

from shared.policy_fields import GoDuration, Strict

DEFAULT_POD_CPU_QUERY = (
    'sum by (namespace, pod) (irate(container_cpu_usage_seconds_total{container!="", '
    'container!="POD"}[2m]))'
)
"""Cores each pod uses now (its last two samples), from the kubelet's cAdvisor series that
clusters already scrape. Not ``rate(...[5m])``: that divides by the whole range, so a pod
started a minute ago would read as a fifth of what it uses, and the pods that came last, the
usual cause of an overload, would look the lightest."""
DEFAULT_POD_MEMORY_QUERY = (
    'sum by (namespace, pod) (container_memory_working_set_bytes{container!="", container!="POD"})'
)
"""Bytes each pod uses (its working set), from the same series."""
LOW_OF_HIGH = 0.8
"""A threshold's ``low`` when not given: this fraction of its ``high``."""


class RebalanceThreshold(Strict):
    """A usage a node must not stay above, on one metric with a resource."""

    metric: str = Field(min_length=1)
    """The metric (it needs a syncPolicy entry whose resource is cpu or memory)."""
    high: float = Field(gt=0, le=10, allow_inf_nan=False)
    """A node above this for ``consecutiveRounds`` rounds of fresh data has pods moved off."""
    low: float | None = Field(default=None, ge=0, le=10, allow_inf_nan=False)
    """Until the node is under this, the replacement of a pod moved off it is refused there
    (for ``cooldown`` at most); default 0.8 × ``high``."""

    @model_validator(mode="after")
    def _low_under_high(self) -> RebalanceThreshold:
        if self.low is not None and self.low >= self.high:
            raise ValueError("low must be less than high")
        return self

    @property
    def low_or_default(self) -> float:
        return self.low if self.low is not None else round(self.high * LOW_OF_HIGH, 6)


class RebalanceLimits(Strict):
    """How many evictions the rebalancer may ask for."""

    per_node: int = Field(default=2, ge=1, le=100, alias="perNode")
    """Pods moved off one node at a time: the node is then held until its metric shows them
    gone (the metric's window and delay after the last eviction)."""
    per_namespace: int = Field(default=2, ge=1, le=1000, alias="perNamespace")
    """Evictions in one namespace per round."""
    per_round: int = Field(default=5, ge=1, le=1000, alias="perRound")
    """Evictions per round, over the cluster (made: one blocked or failed is not counted)."""
    per_minute: float = Field(default=10, gt=0, le=6000, allow_inf_nan=False, alias="perMinute")
    """Evictions a minute, over the cluster (a token bucket; one blocked or failed gives its
    token back)."""


class PodUsageQueries(Strict):
    """PromQL giving each pod's usage, one series per pod with ``namespace`` and ``pod``."""

    cpu: str = Field(default=DEFAULT_POD_CPU_QUERY, min_length=1)
    """Cores per pod."""
    memory: str = Field(default=DEFAULT_POD_MEMORY_QUERY, min_length=1)
    """Bytes per pod."""


class RebalanceNamespaces(Strict):
    """Which namespaces' pods may be moved."""

    include: tuple[str, ...] = ()
    """Only these (empty: every namespace not excluded)."""
    exclude: tuple[str, ...] = ("kube-system",)
    """Never these."""


class RebalancePolicy(Strict):
    """loadsched: move pods off nodes that stay above a usage threshold (the annotator's
    rebalancer). Off by default."""

    enabled: bool = False
    """Run the rebalancer (in the annotator's leader)."""
    dry_run: bool = Field(default=False, alias="dryRun")
    """Compute and show the plan (status, events, logs, metrics); evict nothing."""
    thresholds: tuple[RebalanceThreshold, ...] = ()
    """Per metric; default: every predicate on an average with a resource, ``high`` its
    limit."""
    consecutive_rounds: int = Field(default=5, ge=1, le=1000, alias="consecutiveRounds")
    """Rounds of fresh data a node must stay above ``high`` before pods are moved off it."""
    period: GoDuration = timedelta(minutes=1)
    """How often the rebalancer looks at the nodes (a round)."""
    cooldown: GoDuration = timedelta(minutes=15)
    """How long a workload's replacement is refused on the node it was moved off (until that
    node is under ``low``), and how long before a pod of the same workload is moved again."""
    max_priority: int = Field(default=999_999, alias="maxPriority")
    """Pods of a higher priority are never moved (system-critical ones never are)."""
    namespaces: RebalanceNamespaces = RebalanceNamespaces()
    pod_selector: dict[str, str] = Field(default_factory=dict, alias="podSelector")
    """Only pods with all these labels (empty: any pod)."""
    limits: RebalanceLimits = RebalanceLimits()
    usage: PodUsageQueries = PodUsageQueries()
    """Each pod's measured usage; a pod without a sample counts at its request × the
    estimation factor."""
    grace_seconds: int | None = Field(default=None, ge=0, alias="gracePeriodSeconds")
    """The evicted pods' grace period (default: their own)."""

    @field_validator("period", "cooldown")
    @classmethod
    def _positive(cls, value: timedelta) -> timedelta:
        if value <= timedelta(0):
            raise ValueError("must be > 0")
        return value
