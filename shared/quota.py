"""Elastic quota arithmetic (the ``scheduling.x-k8s.io/v1alpha1`` ElasticQuota): may a pod of a
namespace be admitted, and if not, could a legal preemption make room? Pure; no I/O.

- A quota governs the resources it names in ``min`` or ``max``; a pod's other resources are
  not limited by it (a quota of CPU only says nothing about memory).
- For a governed resource, a missing ``max`` is unlimited and a missing ``min`` is 0.
- Reject when ``used + request > max`` for a resource.
- A namespace may go above its ``min`` only by borrowing what the other namespaces with quotas
  leave unused of theirs: over all of them, ``Σ used ≤ Σ min`` for that resource.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from shared.quantity import ResourceList, add, format_quantity, parse_resources

ZERO = Fraction(0)


@dataclass(frozen=True)
class ElasticQuota:
    namespace: str
    min: ResourceList = field(default_factory=dict)
    max: ResourceList | None = None
    """``None``: no ceiling at all; a resource missing from it is unlimited too."""

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> ElasticQuota:
        """From the CRD object; ``ValueError`` names the field of a malformed one."""
        metadata = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        if not isinstance(spec, Mapping):
            raise ValueError("spec: must be an object")
        namespace = str(metadata.get("namespace", ""))
        minimum = parse_resources(_mapping(spec.get("min"), "spec.min"), where="spec.min")
        maximum = spec.get("max")
        ceiling = (
            None
            if maximum is None
            else parse_resources(_mapping(maximum, "spec.max"), where="spec.max")
        )
        return cls(namespace, minimum, ceiling)

    def ceiling(self, resource: str) -> Fraction | None:
        return None if self.max is None else self.max.get(resource)

    def guaranteed(self, resource: str) -> Fraction:
        return self.min.get(resource, ZERO)

    def governs(self, resource: str) -> bool:
        return resource in self.min or (self.max is not None and resource in self.max)


def _mapping(value: object, where: str) -> Mapping[str, object] | None:
    if value is None or isinstance(value, Mapping):
        return value
    raise ValueError(f"{where}: must be a map of resource quantities")


@dataclass(frozen=True)
class Admission:
    admitted: bool
    message: str = ""
    preemption_may_help: bool = False
    """True: reject through ``FailedNodes`` (kube-scheduler may preempt); else unresolvable."""


@dataclass(frozen=True)
class Totals:
    """Sums over every namespace that has a quota: of ``min`` (the pool that can be lent) and
    of what is in use."""

    min: Mapping[str, Fraction]
    used: Mapping[str, Fraction]

    @classmethod
    def of(
        cls, quotas: Mapping[str, ElasticQuota], used: Mapping[str, Mapping[str, Fraction]]
    ) -> Totals:
        return cls(
            min=add(*(q.min for q in quotas.values())),
            used=add(*(used.get(ns, {}) for ns in quotas)),
        )


def admit(
    namespace: str,
    request: Mapping[str, Fraction],
    quotas: Mapping[str, ElasticQuota],
    used: Mapping[str, Mapping[str, Fraction]],
    *,
    lower_priority_used: Mapping[str, Fraction] | None = None,
    totals: Totals | None = None,
) -> Admission:
    """Decide for a pod of ``namespace`` requesting ``request``. ``used`` is per namespace;
    ``lower_priority_used`` is what the namespace's own lower-priority pods hold (what a
    preemption inside the namespace could free). ``totals`` may be passed when the caller
    keeps them up to date (:class:`Totals`); they are computed otherwise."""
    quota = quotas.get(namespace)
    if quota is None:
        return Admission(True)
    mine = used.get(namespace, {})
    freeable = lower_priority_used or {}
    for resource, amount in request.items():
        if amount <= 0 or not quota.governs(resource):
            continue
        after = mine.get(resource, ZERO) + amount
        ceiling = quota.ceiling(resource)
        if ceiling is not None and after > ceiling:
            return Admission(
                False,
                _message(namespace, resource, "max", after, ceiling),
                preemption_may_help=after - freeable.get(resource, ZERO) <= ceiling,
            )
        if after <= quota.guaranteed(resource):
            continue  # within its own guarantee
        if totals is None:
            totals = Totals.of(quotas, used)
        pool = totals.min.get(resource, ZERO)
        in_use = totals.used.get(resource, ZERO) + amount
        if in_use > pool:
            shown_use, shown_pool = (
                format_quantity(resource, in_use),
                format_quantity(resource, pool),
            )
            return Admission(
                False,
                f"elastic quota of namespace {namespace}: {resource} would be borrowed beyond "
                f"what other namespaces leave unused of their min (in use {shown_use} "
                f"> sum of min {shown_pool})",
                preemption_may_help=in_use - freeable.get(resource, ZERO) <= pool,
            )
    return Admission(True)


def reclaiming(
    namespace: str,
    request: Mapping[str, Fraction],
    quotas: Mapping[str, ElasticQuota],
    used: Mapping[str, Mapping[str, Fraction]],
) -> bool:
    """True if the pod keeps its namespace within its ``min``: it may take back lent capacity."""
    quota = quotas.get(namespace)
    if quota is None:
        return False
    after = add(used.get(namespace, {}), request)
    return all(
        after.get(r, ZERO) <= quota.guaranteed(r)
        for r, amount in request.items()
        if amount > 0 and quota.governs(r)
    )


def _message(namespace: str, resource: str, limit: str, value: Fraction, bound: Fraction) -> str:
    return (
        f"elastic quota of namespace {namespace}: {resource} used + request "
        f"{format_quantity(resource, value)} > {limit} {format_quantity(resource, bound)}"
    )
