"""Whether a pod may run on a node: the node is schedulable, its labels match the pod's
``nodeSelector``, the pod tolerates its NoSchedule and NoExecute taints, and the pod's
requests (plus one ``pods`` slot) fit in its allocatable minus what the pods bound there
request. Pure; no I/O.

These are the checks of kube-scheduler's NodeUnschedulable, NodeAffinity (``nodeSelector``, and
the required node affinity where the caller reads it), TaintToleration and NodeResourcesFit
filters, with their rules: a cordoned node admits
a pod that tolerates ``node.kubernetes.io/unschedulable:NoSchedule``; PreferNoSchedule taints
do not block; resources the node does not list are not checked (kube-scheduler refuses
those before asking anyone else). Quota reclaim and dispatch's "no node fits" check both use
this module, so the two answer alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Protocol

from shared.quantity import ResourceList, add, format_quantity, parse_resources

POD_SLOT: Mapping[str, Fraction] = {"pods": Fraction(1)}
"""Every pod takes one of the node's ``pods`` (allocatable pod count)."""
BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
"""Taint effects that keep an intolerant pod off a node; ``PreferNoSchedule`` only scores."""
UNSCHEDULABLE_TAINT_KEY = "node.kubernetes.io/unschedulable"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        """kubectl's spelling: ``key=value:effect`` (``key:effect`` without a value)."""
        return (
            f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"
        )


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    """``Equal`` (also when empty) or ``Exists``; any other operator tolerates nothing."""
    value: str = ""
    effect: str = ""
    """Empty: every effect."""
    toleration_seconds: int | None = None
    """For NoExecute only: how long the pod stays after the taint appears (not a fit rule)."""

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes' ``Toleration.ToleratesTaint``."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return False


def tolerates(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    """True if any of ``tolerations`` tolerates ``taint``."""
    return any(t.tolerates(taint) for t in tolerations)


@dataclass(frozen=True)
class FitNode:
    """What fitting a pod reads of a Node."""

    name: str
    allocatable: Mapping[str, str]
    """``status.allocatable`` as the API gives it (quantities as strings)."""
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    """``spec.unschedulable``: cordoned."""


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ``matchExpressions`` (on labels) or ``matchFields`` (on ``metadata.name``) entry."""

    key: str
    operator: str
    values: tuple[str, ...] = ()
    field: bool = False

    def matches(self, node: FitNode) -> bool:
        value = node.name if self.field else node.labels.get(self.key)
        if self.field and self.key != "metadata.name":
            return False
        if self.operator == "In":
            return value is not None and value in self.values
        if self.operator == "NotIn":
            return value is None or value not in self.values
        if self.operator == "Exists":
            return value is not None
        if self.operator == "DoesNotExist":
            return value is None
        if self.operator in ("Gt", "Lt") and value is not None and len(self.values) == 1:
            try:
                have, bound = int(value), int(self.values[0])
            except ValueError:
                return False
            return have > bound if self.operator == "Gt" else have < bound
        return False


@dataclass(frozen=True, slots=True)
class NodeAffinity:
    """A pod's required node affinity: a node matches if any term matches, and a term matches
    when all of its requirements do (kube-scheduler's NodeAffinity filter). A term with no
    requirement matches nothing, as kube-scheduler reads it."""

    terms: tuple[tuple[Requirement, ...], ...]

    def matches(self, node: FitNode) -> bool:
        return any(term and all(r.matches(node) for r in term) for term in self.terms)


def required_affinity(affinity: object) -> NodeAffinity | None:
    """The required node affinity of a pod's raw ``spec.affinity``; ``None`` when there is
    none. A malformed one matches no node (the pod is taken to run nowhere else)."""
    if not isinstance(affinity, Mapping):
        return None
    node_affinity = affinity.get("nodeAffinity")
    required = (
        node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
        if isinstance(node_affinity, Mapping)
        else None
    )
    if required is None:
        return None
    terms_raw = required.get("nodeSelectorTerms") if isinstance(required, Mapping) else None
    if not isinstance(terms_raw, list):
        return NodeAffinity(())
    terms: list[tuple[Requirement, ...]] = []
    for term in terms_raw:
        if not isinstance(term, Mapping):
            return NodeAffinity(())
        found: list[Requirement] = []
        for name, is_field in (("matchExpressions", False), ("matchFields", True)):
            for entry in term.get(name) or ():
                if not isinstance(entry, Mapping) or not isinstance(entry.get("key"), str):
                    return NodeAffinity(())
                values = entry.get("values") or ()
                if not isinstance(values, list | tuple):
                    return NodeAffinity(())
                found.append(
                    Requirement(
                        entry["key"],
                        str(entry.get("operator", "")),
                        tuple(str(v) for v in values),
                        is_field,
                    )
                )
        terms.append(tuple(found))
    return NodeAffinity(tuple(terms))


@dataclass(frozen=True)
class PodNeeds:
    """What fitting a pod reads of the pod."""

    requests: ResourceList
    """The effective request (:func:`shared.pods.pod_request`)."""
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    required: NodeAffinity | None = None
    """``requiredDuringSchedulingIgnoredDuringExecution`` of its node affinity, when read."""


class Holding(Protocol):
    """A pod on a node, by what it holds there (:class:`shared.quota_ledger.PodUsage`)."""

    @property
    def request(self) -> Mapping[str, Fraction]: ...


def free_on_node(allocatable: Mapping[str, str], pods: Iterable[Holding]) -> ResourceList:
    """Allocatable minus every given pod's request (and one ``pods`` slot each). ``ValueError``
    for a malformed allocatable, naming the resource."""
    free = parse_resources(allocatable, where="status.allocatable")
    for usage in pods:
        for name, value in add(usage.request, POD_SLOT).items():
            if name in free:
                free[name] -= value
    return free


def deficit(request: Mapping[str, Fraction], free: Mapping[str, Fraction]) -> ResourceList:
    """What must be freed for ``request`` (and a pod slot) to fit; resources the node does not
    list are not checked (kube-scheduler rejects those before asking the extender)."""
    need = add(request, POD_SLOT)
    return {
        name: value - free[name]
        for name, value in need.items()
        if value > 0 and name in free and value > free[name]
    }


def placement_reason(pod: PodNeeds, node: FitNode) -> str | None:
    """The first check not about room that keeps ``pod`` off ``node``, or ``None``: cordoned,
    then ``nodeSelector``, then taints."""
    if node.unschedulable and not tolerates(
        pod.tolerations, Taint(UNSCHEDULABLE_TAINT_KEY, "", "NoSchedule")
    ):
        return "node is cordoned"
    for key, value in pod.node_selector.items():
        if node.labels.get(key) != value:
            return f"nodeSelector {key}={value} does not match"
    if pod.required is not None and not pod.required.matches(node):
        return "required node affinity does not match"
    for taint in node.taints:
        if taint.effect in BLOCKING_EFFECTS and not tolerates(pod.tolerations, taint):
            return f"taint {taint} not tolerated"
    return None


def describe_short(short: Mapping[str, Fraction]) -> str:
    """``cpu 2, memory 1Gi``: what a node lacks, resources in name order."""
    return ", ".join(f"{name} {format_quantity(name, short[name])}" for name in sorted(short))


def unfit_reason(pod: PodNeeds, node: FitNode, bound: Iterable[Holding]) -> str | None:
    """``None`` if ``pod`` fits on ``node`` with ``bound`` (the pods holding room there);
    else why not, naming the first check that fails. A node whose allocatable cannot be read
    fits nothing."""
    reason = placement_reason(pod, node)
    if reason is not None:
        return reason
    try:
        free = free_on_node(node.allocatable, bound)
    except ValueError as e:
        return f"allocatable unreadable: {e}"
    short = deficit(pod.requests, free)
    if short:
        return f"needs {describe_short(short)} more than free"
    return None


def fits(pod: PodNeeds, node: FitNode, bound: Iterable[Holding]) -> bool:
    return unfit_reason(pod, node, bound) is None


# -- from the API's JSON: total, a malformed entry is skipped ---------------------------------


def _text(value: object) -> str | None:
    if value is None:
        return ""
    return value if isinstance(value, str) else None


def taints_of(node_spec: object) -> tuple[Taint, ...]:
    """The taints of a Node's ``spec`` (a dict), or its ``spec.taints`` (a list); entries
    without a string key and effect, or with a non-string value, are skipped."""
    raw = node_spec.get("taints") if isinstance(node_spec, Mapping) else node_spec
    found: list[Taint] = []
    for entry in raw if isinstance(raw, list) else ():
        if not isinstance(entry, Mapping):
            continue
        key, value, effect = (_text(entry.get(f)) for f in ("key", "value", "effect"))
        if key and effect and value is not None:
            found.append(Taint(key, value, effect))
    return tuple(found)


def tolerations_of(tolerations: object) -> tuple[Toleration, ...]:
    """A Pod's ``spec.tolerations`` (a list); entries with a non-string key, operator, value
    or effect, or a non-integer ``tolerationSeconds``, are skipped."""
    found: list[Toleration] = []
    for entry in tolerations if isinstance(tolerations, list) else ():
        if not isinstance(entry, Mapping):
            continue
        key, operator, value, effect = (
            _text(entry.get(f)) for f in ("key", "operator", "value", "effect")
        )
        seconds = entry.get("tolerationSeconds")
        if key is None or operator is None or value is None or effect is None:
            continue
        if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int)):
            continue
        found.append(Toleration(key, operator or "Equal", value, effect, seconds))
    return tuple(found)
