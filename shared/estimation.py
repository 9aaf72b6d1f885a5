"""Estimation of pods a metric's value does not show yet. Pure; no I/O, no clock.

A metric's value is an average over a window ending at its sample time: its annotation's
timestamp less the metric's ``delay`` (scrape, recording rules and query come between what a
node used and the value written; the load model passes the difference). A pod bound after the
sample is not in it at all; a pod bound ``t`` before it is in it for ``t / window`` of the
window. Until the window covers the pod, the load model adds the part it misses:

    added = Σ pods  estimate(pod, resource) / node size(resource) × (1 - covered(pod))
          - Σ gone  estimate(pod, resource) / node size(resource) × held(pod)
    covered(pod) = clamp((sample time - started(pod)) / window, 0, 1)
    held(pod) = the part of the window from its Ready time until it left (0 if never Ready)
    started(pod) = its Ready time, at the latest the policy's ``startup`` after binding

A pod that has left the node (deleted, or finished) is still in the samples whose window saw it
run; with ``subtractDeparted`` (the default) that part of its estimate is taken off, so a node
whose pods are being replaced (a rolling update, a burst after a burst) does not read as
holding both.

A pod uses little before its containers run, so its window starts when it is Ready (kubelet
sets the condition) or, for a pod not Ready by then, ``startup`` (default 30 s) after binding.

``estimate`` is the pod's request × the policy's factor for the resource (Koordinator's
defaults: 85 % CPU, 70 % memory), or the policy's default for a resource it requests nothing of.
With ``basis: limit`` (Koordinator's rule) a pod whose limit is above its request is estimated
from its limit, never above it: a pod allowed to burst is taken to burst.
Nothing here depends on the time of reading: the value changes only when the node's sample or
its pods change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from fractions import Fraction
from typing import NamedTuple

from shared.placement_policy import EstimationPolicy, TargetLoadPacking
from shared.policy_fields import Resource
from shared.quantity import parse_quantity
from shared.scoring import go_round

CPU_MILLIS = 1000


@dataclass(frozen=True, slots=True)
class Placement:
    """A pod bound to a node, as estimation reads it."""

    uid: str
    bound_at: datetime
    cpu: float
    """Cores requested (the effective request; 0 when none)."""
    memory: float
    """Bytes requested (0 when none)."""
    cpu_limit: float = 0.0
    """Cores the pod is limited to (0 when unbounded)."""
    memory_limit: float = 0.0
    """Bytes the pod is limited to (0 when unbounded)."""
    predicted_cpu: float = 0.0
    """Cores Trimaran's TargetLoadPacking predicts the pod uses (limit, else request ×
    multiplier, else its default, per container), when that strategy is configured."""
    ready_at: datetime | None = None
    """When the pod became Ready, if it is."""
    gone_at: datetime | None = None
    """When the pod left the node (deleted or finished), for a pod that has: the samples
    taken up to a window later still hold its use."""

    def started_at(self, startup: timedelta) -> datetime:
        """When the pod is taken to start using what it uses: its Ready time, at the latest
        ``startup`` after its binding (never before the binding)."""
        latest = self.bound_at + startup
        if self.ready_at is None or self.ready_at >= latest:
            return latest
        return max(self.ready_at, self.bound_at)

    def requested(self, resource: Resource) -> float:
        return self.cpu if resource == "cpu" else self.memory

    def limited(self, resource: Resource) -> float:
        return self.cpu_limit if resource == "cpu" else self.memory_limit


@dataclass(frozen=True, slots=True)
class NodeSize:
    """What a node has of CPU (cores) and memory (bytes): its capacity, which usage metrics
    are fractions of, and its allocatable, which requests are counted against."""

    capacity_cpu: float | None = None
    capacity_memory: float | None = None
    allocatable_cpu: float | None = None
    allocatable_memory: float | None = None

    def capacity(self, resource: Resource) -> float | None:
        """Capacity, else allocatable (a node object may carry only one)."""
        if resource == "cpu":
            return self.capacity_cpu or self.allocatable_cpu
        return self.capacity_memory or self.allocatable_memory

    def allocatable(self, resource: Resource) -> float | None:
        if resource == "cpu":
            return self.allocatable_cpu or self.capacity_cpu
        return self.allocatable_memory or self.capacity_memory

    @classmethod
    def from_status(
        cls,
        capacity: Mapping[str, str | int | float] | None,
        allocatable: Mapping[str, str | int | float] | None,
    ) -> NodeSize:
        """From ``status.capacity`` and ``status.allocatable``; a malformed, zero or missing
        quantity is unknown (``None``)."""
        return cls(
            capacity_cpu=_size(capacity, "cpu"),
            capacity_memory=_size(capacity, "memory"),
            allocatable_cpu=_size(allocatable, "cpu"),
            allocatable_memory=_size(allocatable, "memory"),
        )


def _size(resources: Mapping[str, str | int | float] | None, name: str) -> float | None:
    if not resources or name not in resources:
        return None
    try:
        value = parse_quantity(resources[name])
    except ValueError:
        return None
    return float(value) if value > 0 else None


def pod_estimate(placement: Placement, resource: Resource, policy: EstimationPolicy) -> float:
    """What the pod is assumed to use of ``resource`` once it runs (cores or bytes): its
    request × the factor; with ``basis: limit``, the larger of its limit and request × the
    factor, at most the limit; the policy's default when neither is set."""
    requested = placement.requested(resource)
    if policy.basis == "limit":
        limit = placement.limited(resource)
        base = max(requested, limit)
        if base > 0:
            estimate = base * policy.factor_of(resource)
            return min(estimate, limit) if limit > 0 else estimate
    elif requested > 0:
        return requested * policy.factor_of(resource)
    return policy.default_of(resource)


class Need(NamedTuple):
    """What a pod is estimated to use once it runs (cores, bytes)."""

    cpu: float
    memory: float

    def of(self, resource: Resource) -> float:
        return self.cpu if resource == "cpu" else self.memory

    def at_least(self, floor: Need) -> Need:
        """Each resource raised to ``floor``'s."""
        return Need(max(self.cpu, floor.cpu), max(self.memory, floor.memory))


def need_of(placement: Placement, policy: EstimationPolicy) -> Need:
    """:func:`pod_estimate` of both resources."""
    return Need(pod_estimate(placement, "cpu", policy), pod_estimate(placement, "memory", policy))


def uncovered(started_at: datetime, sample_at: datetime, window: timedelta) -> float:
    """The part of ``window`` before ``sample_at`` during which the pod had not started yet:
    1 for a pod started at or after the sample, 0 once the window covers it."""
    before = (sample_at - started_at).total_seconds()
    if before <= 0:
        return 1.0
    span = window.total_seconds()
    return max(0.0, 1.0 - before / span) if span > 0 else 0.0


def estimated_share(
    placements: Iterable[Placement],
    *,
    resource: Resource,
    sample_at: datetime,
    window: timedelta,
    size: float,
    policy: EstimationPolicy,
    releases: bool = True,
) -> float:
    """The fraction of the node (``size``: cores or bytes) the sample misses of its pods, net
    of what it still holds of pods gone (only for a value that ``releases`` them: an average,
    not a maximum); negative when those weigh more."""
    if not size > 0:
        return 0.0
    added = 0.0
    for placement in placements:
        if placement.gone_at is not None:
            # a pod that left counts from its Ready time only: one never Ready used little
            if not releases or placement.ready_at is None:
                continue
            started = max(placement.ready_at, placement.bound_at)
            part = -still_held(started, placement.gone_at, sample_at, window)
        else:
            part = uncovered(placement.started_at(policy.startup), sample_at, window)
        if part:
            added += pod_estimate(placement, resource, policy) * part
    return added / size


def still_held(
    started_at: datetime, gone_at: datetime, sample_at: datetime, window: timedelta
) -> float:
    """The part of ``window`` before ``sample_at`` during which a pod that has left ran: what
    the sample still holds of a pod that will not use anything any more (0 for a pod that left
    before the window, or before it started)."""
    span = window.total_seconds()
    if not span > 0:
        return 0.0
    begin = max(started_at, sample_at - window)
    end = min(gone_at, sample_at)
    return max(0.0, (end - begin).total_seconds() / span)


def predicted_cpu(
    containers: Iterable[tuple[Mapping[str, Fraction], Mapping[str, Fraction]]],
    overhead: Mapping[str, Fraction],
    settings: TargetLoadPacking,
) -> float:
    """Trimaran's prediction of a pod's CPU use, in cores, from each regular container's
    (requests, limits): the limit where one is set, else the request × ``requestsMultiplier``,
    else ``defaultRequests``; plus the pod's overhead. Rounded to whole millicores as Trimaran
    rounds them (``PredictUtilisation``): limits, requests and ``defaultRequests`` up (Kubernetes'
    MilliValue), the request × multiplier half away from zero (Go's ``math.Round``). Like
    Trimaran, init containers (sidecars too) are not counted."""
    millis = 0
    for requests, limits in containers:
        if "cpu" in limits:
            millis += _millis(limits["cpu"])
        elif "cpu" in requests:
            millis += go_round(_millis(requests["cpu"]) * settings.requests_multiplier)
        else:
            millis += _millis(Fraction(settings.default_requests).limit_denominator(10**9))
    millis += _millis(overhead.get("cpu", Fraction(0)))
    return millis / CPU_MILLIS


def _millis(cores: Fraction) -> int:
    """Kubernetes' MilliValue: millicores rounded up."""
    scaled = cores * CPU_MILLIS
    return -(-scaled.numerator // scaled.denominator)
