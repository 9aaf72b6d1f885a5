"""loadsched's own placement fields of the policy, beside crane's: estimation
(``spec.estimation``) and the scoring strategies (``spec.scoring``)."""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

from pydantic import Field, field_validator, model_validator

from shared.policy_fields import GoDuration, Quantity, Resource, Strict


class ResourceFactors(Strict):
    """Per resource, the fraction of a pod's request assumed in use once it runs."""

    cpu: float = Field(default=0.85, ge=0, le=4, allow_inf_nan=False)
    """Of the CPU request."""
    memory: float = Field(default=0.70, ge=0, le=4, allow_inf_nan=False)
    """Of the memory request."""


class DefaultRequest(Strict):
    """The estimate for a pod that requests nothing of a resource (cores, bytes)."""

    cpu: Quantity = 0.25
    """Cores (250m)."""
    memory: Quantity = float(200 * 2**20)
    """Bytes (200Mi)."""


class EstimationPolicy(Strict):
    """loadsched: add an estimate of each pod bound after a metric's sample to the node's value
    until the metric's window covers it (Koordinator's defaults: 85 % of the CPU request, 70 %
    of the memory request; 250m and 200Mi for a pod that requests nothing). Off by default."""

    enabled: bool = False
    """Estimate at all."""
    factors: ResourceFactors = ResourceFactors()
    default_request: DefaultRequest = Field(default=DefaultRequest(), alias="defaultRequest")
    factor: float | None = Field(default=None, ge=0, le=4, allow_inf_nan=False)
    """Earlier spelling: one factor for every resource (``factors`` wins where both are set)."""
    basis: Literal["request", "limit"] = "request"
    """What the factor applies to: the request; or, as Koordinator does, the limit where it is
    above the request (never estimating more than the limit)."""
    when_no_node_has_room: Literal["place", "wait"] = Field(
        default="place", alias="whenNoNodeHasRoom"
    )
    """When no node asked about has room for the pod's own estimate: ``place`` passes the
    nodes under their limits on their own (crane's filter, with the estimates of the pods
    already there), so each takes about one pod past its room and no pod waits on an estimate;
    ``wait`` refuses them all, as Koordinator does, and the pod waits until a node has room."""
    subtract_departed: bool = Field(default=True, alias="subtractDeparted")
    """A pod that left the node (deleted or finished) is taken off the node's value for the
    part of the metric's window it still holds, at its estimate."""
    startup: GoDuration = timedelta(seconds=30)
    """How long after binding a pod that is not Ready yet is still taken as not started: its
    window starts at its Ready time, at the latest this long after binding (a pod uses little
    before it runs; the metric's window does not cover it from the binding)."""

    @field_validator("startup")
    @classmethod
    def _startup_range(cls, value: timedelta) -> timedelta:
        if not timedelta(0) <= value <= timedelta(hours=1):
            raise ValueError("must be between 0s and 1h")
        return value

    def factor_of(self, resource: Resource) -> float:
        if self.factor is not None and resource not in self.factors.model_fields_set:
            return self.factor
        return float(getattr(self.factors, resource))

    def default_of(self, resource: Resource) -> float:
        return float(getattr(self.default_request, resource))


class TargetLoadPacking(Strict):
    """Trimaran's TargetLoadPacking: pack nodes up to ``targetUtilization`` % CPU."""

    target_utilization: float = Field(default=40, gt=0, lt=100, alias="targetUtilization")
    """The CPU utilization (percent) nodes are packed up to; beyond it, less is better."""
    metric: str = Field(default="cpu_usage_avg_5m", min_length=1)
    """The CPU usage metric read (its average)."""
    default_requests: Quantity = Field(default=1.0, alias="defaultRequests")
    """Cores predicted for a container with neither a CPU limit nor a request (Trimaran: 1)."""
    requests_multiplier: float = Field(
        default=1.5, ge=0, le=100, allow_inf_nan=False, alias="requestsMultiplier"
    )
    """A container with a request and no limit is predicted at request × this (Trimaran: 1.5)."""


class ResourceStatistics(Strict):
    """The average and standard deviation metrics of one resource."""

    average: str = Field(min_length=1)
    """The metric of the resource's average usage (it needs a syncPolicy entry)."""
    stddev: str = Field(min_length=1)
    """The metric of its standard deviation (it needs a syncPolicy entry)."""


class LoadVariationRiskBalancing(Strict):
    """Trimaran's LoadVariationRiskBalancing: balance ``(μ + margin·σ^(1/sensitivity)) / 2``."""

    margin: float = Field(default=1, ge=0, le=100, allow_inf_nan=False)
    """How many standard deviations count on top of the average."""
    sensitivity: float = Field(default=1, gt=0, le=100, allow_inf_nan=False)
    """The root taken of the standard deviation (1: none)."""
    cpu: ResourceStatistics | None = ResourceStatistics(
        average="cpu_usage_avg_5m", stddev="cpu_usage_stddev_5m"
    )
    memory: ResourceStatistics | None = ResourceStatistics(
        average="mem_usage_avg_5m", stddev="mem_usage_stddev_5m"
    )


class ScoringPolicy(Strict):
    """loadsched: a scoring strategy instead of crane's least-loaded score (at most one)."""

    target_load_packing: TargetLoadPacking | None = Field(default=None, alias="targetLoadPacking")
    load_variation_risk_balancing: LoadVariationRiskBalancing | None = Field(
        default=None, alias="loadVariationRiskBalancing"
    )
    normalize: Literal["none", "minMax"] = "none"
    """How a node's 0..100 score becomes the protocol's 0..10: ``none`` is crane's
    ``round(score/10)``; ``minMax`` spreads the nodes asked about over the whole 0..10 (lowest
    0, highest 10), so that loads a few points apart are told apart."""

    @model_validator(mode="after")
    def _at_most_one(self) -> ScoringPolicy:
        if self.target_load_packing is not None and self.load_variation_risk_balancing is not None:
            raise ValueError("give targetLoadPacking or loadVariationRiskBalancing, not both")
        return self

    def metrics(self) -> list[tuple[str, str]]:
        """(field path under spec.scoring, metric name) of every metric the strategy reads."""
        named: list[tuple[str, str]] = []
        if self.target_load_packing is not None:
            named.append(("targetLoadPacking.metric", self.target_load_packing.metric))
        risk = self.load_variation_risk_balancing
        if risk is not None:
            for resource in ("cpu", "memory"):
                stats = getattr(risk, resource)
                if stats is not None:
                    path = f"loadVariationRiskBalancing.{resource}"
                    named.append((f"{path}.average", stats.average))
                    named.append((f"{path}.stddev", stats.stddev))
        return named
