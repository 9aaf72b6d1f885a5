"""Elastic quota arithmetic (the ``scheduling.x-k8s.io/v1alpha1`` ElasticQuota): may a pod of a
namespace be admitted, and if not, could a legal preemption make room? Pure; no I/O.

- A quota governs the resources it names in ``min`` or ``max``; a pod's other resources are
  not limited by it (a quota of CPU only says nothing about memory).
- For a governed resource, a missing ``max`` is unlimited and a missing ``min`` is 0.
- A namespace is a *borrower* when its use is over its ``min`` in **any** governed resource;
  a pod is a *lender's* (it reclaims) when its namespace, with the pod, stays within its
  ``min`` in every governed resource (CapacityScheduling's ``usedOverMin``).
- Reject when ``used + request > max`` for a resource, and — for every pod, also a lender's —
  when the sum of use over all namespaces with quotas plus the request would exceed the sum
  of their ``min`` (``Σ used ≤ Σ min``, per resource, over the quotas that govern it). A
  lender's pod refused that way takes its guarantee back from the borrowers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal

from shared.quantity import ResourceList, add, format_quantity, parse_resources, subtract

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

    def governed(self, resources: Mapping[str, Fraction]) -> ResourceList:
        """The part of ``resources`` this quota governs."""
        return {name: value for name, value in resources.items() if self.governs(name)}

    def over_min(self, used: Mapping[str, Fraction]) -> bool:
        """True for a borrower: over its ``min`` in any resource it governs."""
        return any(v > self.guaranteed(r) for r, v in used.items() if self.governs(r))


def _mapping(value: object, where: str) -> Mapping[str, object] | None:
    if value is None or isinstance(value, Mapping):
        return value
    raise ValueError(f"{where}: must be a map of resource quantities")


QuotaRule = Literal["no-quota", "within-min", "borrowing", "max", "pool", "reclaiming"]
"""Which rule decided an admission: no quota governs the pod; it stays within its namespace's
``min``; it borrows what other namespaces leave unused of theirs; it would pass ``max``; it
would borrow beyond what the pool of ``min`` leaves; it is within ``min`` but that is lent
out (borrowers give it back)."""


@dataclass(frozen=True)
class Admission:
    admitted: bool
    message: str = ""
    preemption_may_help: bool = False
    """True: reject through ``FailedNodes`` (kube-scheduler may preempt); else unresolvable."""
    rule: QuotaRule | None = None
    """The rule that decided (``None``: no quota rule, e.g. an admission not recorded)."""


@dataclass(frozen=True)
class Totals:
    """Sums over every namespace that has a quota: of ``min`` (the pool that can be lent) and
    of what is in use, each resource over the quotas that govern it."""

    min: Mapping[str, Fraction]
    used: Mapping[str, Fraction]

    @classmethod
    def of(
        cls, quotas: Mapping[str, ElasticQuota], used: Mapping[str, Mapping[str, Fraction]]
    ) -> Totals:
        return cls(
            min=add(*(q.min for q in quotas.values())),
            used=add(*(q.governed(used.get(ns, {})) for ns, q in quotas.items())),
        )


@dataclass(frozen=True)
class QuotaState:
    """Every quota and what each namespace uses, at one moment."""

    quotas: Mapping[str, ElasticQuota]
    used: Mapping[str, Mapping[str, Fraction]]
    totals: Totals

    @classmethod
    def of(
        cls, quotas: Mapping[str, ElasticQuota], used: Mapping[str, Mapping[str, Fraction]]
    ) -> QuotaState:
        return cls(quotas, used, Totals.of(quotas, used))

    def use_of(self, namespace: str) -> Mapping[str, Fraction]:
        return self.used.get(namespace, {})

    def without(self, namespace: str, request: Mapping[str, Fraction]) -> QuotaState:
        """The state as if a pod of ``namespace`` holding ``request`` were not counted."""
        quota = self.quotas.get(namespace)
        pool = self.totals.used
        if quota is not None:
            pool = subtract(pool, quota.governed(request))
        return QuotaState(
            self.quotas,
            {**self.used, namespace: subtract(self.use_of(namespace), request)},
            Totals(min=self.totals.min, used=pool),
        )

    def is_borrower(self, namespace: str) -> bool:
        quota = self.quotas.get(namespace)
        return quota is not None and quota.over_min(self.use_of(namespace))

    def reclaiming(self, namespace: str, request: Mapping[str, Fraction]) -> bool:
        """True if the pod keeps its namespace within its ``min`` in every governed resource:
        it may take back lent capacity."""
        quota = self.quotas.get(namespace)
        return quota is not None and not quota.over_min(add(self.use_of(namespace), request))

    def pool_excess(self, namespace: str, request: Mapping[str, Fraction]) -> ResourceList:
        """What the pod would put over the sum of ``min``, per resource its quota governs."""
        quota = self.quotas.get(namespace)
        if quota is None:
            return {}
        excess = {}
        for name, amount in request.items():
            if amount > 0 and quota.governs(name):
                over = self.totals.used.get(name, ZERO) + amount - self.totals.min.get(name, ZERO)
                if over > 0:
                    excess[name] = over
        return excess

    def max_excess(self, namespace: str, request: Mapping[str, Fraction]) -> ResourceList:
        """What the pod would put its namespace over its ``max``, per resource."""
        quota = self.quotas.get(namespace)
        if quota is None:
            return {}
        mine = self.use_of(namespace)
        excess = {}
        for name, amount in request.items():
            ceiling = quota.ceiling(name)
            if amount > 0 and ceiling is not None:
                over = mine.get(name, ZERO) + amount - ceiling
                if over > 0:
                    excess[name] = over
        return excess

    def decide(
        self,
        namespace: str,
        request: Mapping[str, Fraction],
        *,
        lower_priority_used: Mapping[str, Fraction] | None = None,
    ) -> Admission:
        return decide(
            namespace,
            request,
            self.quotas,
            self.used,
            lower_priority_used=lower_priority_used,
            totals=self.totals,
        )


def decide(
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
        return Admission(True, rule="no-quota")
    mine = used.get(namespace, {})
    freeable = lower_priority_used or {}
    lender: bool | None = None
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
                rule="max",
            )
        if totals is None:
            totals = Totals.of(quotas, used)
        pool = totals.min.get(resource, ZERO)
        in_use = totals.used.get(resource, ZERO) + amount
        if in_use <= pool:
            continue
        if lender is None:
            lender = not quota.over_min(add(mine, request))
        numbers = (
            f"in use {format_quantity(resource, in_use)} > sum of min "
            f"{format_quantity(resource, pool)}"
        )
        if lender:
            # Within its own min, the rest is held by borrowers: they give it back.
            return Admission(
                False,
                f"elastic quota of namespace {namespace}: {resource} of its min is lent to "
                f"namespaces over theirs ({numbers}); reclaiming",
                preemption_may_help=True,
                rule="reclaiming",
            )
        return Admission(
            False,
            f"elastic quota of namespace {namespace}: {resource} would be borrowed beyond "
            f"what other namespaces leave unused of their min ({numbers})",
            preemption_may_help=in_use - freeable.get(resource, ZERO) <= pool,
            rule="pool",
        )
    if lender is None:
        lender = not quota.over_min(add(mine, request))
    return Admission(True, rule="within-min" if lender else "borrowing")


def reclaiming(
    namespace: str,
    request: Mapping[str, Fraction],
    quotas: Mapping[str, ElasticQuota],
    used: Mapping[str, Mapping[str, Fraction]],
) -> bool:
    """True if the pod keeps its namespace within its ``min`` in every governed resource."""
    quota = quotas.get(namespace)
    return quota is not None and not quota.over_min(add(used.get(namespace, {}), request))


def _message(namespace: str, resource: str, limit: str, value: Fraction, bound: Fraction) -> str:
    return (
        f"elastic quota of namespace {namespace}: {resource} used + request "
        f"{format_quantity(resource, value)} > {limit} {format_quantity(resource, bound)}"
    )
