"""The fields of a Pod that scheduling decisions read, decoded with msgspec (everything else in
the object is skipped unparsed), and what a pod asks of a node: its effective resource request.

The effective request follows kube-scheduler's rule: the larger of (regular containers plus
restartable init containers, "sidecars") and the peak of any one-shot init container together
with the sidecars started before it; plus ``spec.overhead``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

import msgspec

from shared.kube.meta import PodMeta
from shared.quantity import ResourceList, add, parse_resources

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


class Resources(msgspec.Struct, gc=False):
    requests: dict[str, str | int | float] | None = None
    limits: dict[str, str | int | float] | None = None


class Container(msgspec.Struct, gc=False):
    resources: Resources | None = None
    restartPolicy: str | None = None


class PodSpec(msgspec.Struct, gc=False):
    nodeName: str = ""
    schedulerName: str = ""
    priority: int | None = None
    preemptionPolicy: str | None = None
    nodeSelector: dict[str, str] | None = None
    tolerations: list[Any] | None = None
    """Raw; :func:`shared.node_fit.tolerations_of` reads them (a malformed one is skipped)."""
    containers: Sequence[Container] | None = None
    initContainers: Sequence[Container] | None = None
    overhead: dict[str, str | int | float] | None = None


class PodCondition(msgspec.Struct, gc=False):
    type: str = ""
    status: str = ""
    reason: str | None = None
    message: str | None = None
    lastTransitionTime: str | None = None


class PodStatus(msgspec.Struct, gc=False):
    phase: str | None = None
    nominatedNodeName: str | None = None
    conditions: list[PodCondition] | None = None


class Pod(msgspec.Struct, gc=False):
    metadata: PodMeta = msgspec.field(default_factory=PodMeta)
    spec: PodSpec = msgspec.field(default_factory=PodSpec)
    status: PodStatus = msgspec.field(default_factory=PodStatus)

    @property
    def key(self) -> str:
        return f"{self.metadata.namespace}/{self.metadata.name}"

    @property
    def is_daemonset_pod(self) -> bool:
        return any(ref.kind == "DaemonSet" for ref in self.metadata.ownerReferences or ())

    @property
    def priority(self) -> int:
        return self.spec.priority or 0

    @property
    def is_terminal(self) -> bool:
        return self.status.phase in TERMINAL_PHASES

    @property
    def is_unschedulable(self) -> bool:
        """Not bound, and the scheduler's last attempt found no node."""
        if self.spec.nodeName:
            return False
        return any(
            c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable"
            for c in self.status.conditions or ()
        )

    def request(self) -> ResourceList:
        """The effective request; ``ValueError`` names the container field that is malformed."""
        return pod_request(self.spec)

    def scheduled_at(self) -> str | None:
        """When the pod was bound: its ``PodScheduled`` condition's time, as written."""
        for condition in self.status.conditions or ():
            if condition.type == "PodScheduled" and condition.status == "True":
                return condition.lastTransitionTime
        return None

    def ready_at(self) -> str | None:
        """When the pod became Ready, if it is: its ``Ready`` condition's time, as written."""
        for condition in self.status.conditions or ():
            if condition.type == "Ready" and condition.status == "True":
                return condition.lastTransitionTime
        return None

    def container_resources(self) -> list[tuple[ResourceList, ResourceList]]:
        """(requests, limits) of each regular container; ``ValueError`` names a malformed one."""
        return [
            (
                _requests(container, f"spec.containers[{i}].resources.requests"),
                _limits(container, f"spec.containers[{i}].resources.limits"),
            )
            for i, container in enumerate(self.spec.containers or ())
        ]

    def limit(self) -> ResourceList:
        """The most the pod's running containers may use of each resource: the sum of the
        regular containers' and restartable sidecars' limits, plus the overhead, for a resource
        every one of them limits (a container without a limit leaves the pod unbounded in it,
        so the resource is absent). ``ValueError`` names a malformed field."""
        return pod_limit(self.spec)

    def overhead(self) -> ResourceList:
        overhead = self.spec.overhead
        return parse_resources(overhead, where="spec.overhead") if overhead else {}


POD_DECODER = msgspec.json.Decoder(Pod)


def _requests(container: Container, where: str) -> ResourceList:
    requests = container.resources.requests if container.resources else None
    return parse_resources(requests, where=where) if requests else {}


def _max(a: Mapping[str, Fraction], b: Mapping[str, Fraction]) -> ResourceList:
    out = dict(a)
    for name, value in b.items():
        if value > out.get(name, Fraction(0)):
            out[name] = value
    return out


def _limits(container: Container, where: str) -> ResourceList:
    limits = container.resources.limits if container.resources else None
    return parse_resources(limits, where=where) if limits else {}


def pod_limit(spec: PodSpec) -> ResourceList:
    running = [
        _limits(c, f"spec.containers[{i}].resources.limits")
        for i, c in enumerate(spec.containers or ())
    ]
    running += [
        _limits(c, f"spec.initContainers[{i}].resources.limits")
        for i, c in enumerate(spec.initContainers or ())
        if c.restartPolicy == "Always"
    ]
    if not running:
        return {}
    bounded = set(running[0]).intersection(*running[1:])
    total = add(*({k: v for k, v in limits.items() if k in bounded} for limits in running))
    if total and spec.overhead:
        overhead = parse_resources(spec.overhead, where="spec.overhead")
        total = add(total, {k: v for k, v in overhead.items() if k in total})
    return {name: value for name, value in total.items() if value}


def pod_request(spec: PodSpec) -> ResourceList:
    regular = add(
        *(
            _requests(c, f"spec.containers[{i}].resources.requests")
            for i, c in enumerate(spec.containers or ())
        )
    )
    sidecars: ResourceList = {}
    peak: ResourceList = {}
    for i, init in enumerate(spec.initContainers or ()):
        requests = _requests(init, f"spec.initContainers[{i}].resources.requests")
        if init.restartPolicy == "Always":
            sidecars = add(sidecars, requests)
        else:
            peak = _max(peak, add(sidecars, requests))
    total = _max(add(regular, sidecars), peak)
    if spec.overhead:
        total = add(total, parse_resources(spec.overhead, where="spec.overhead"))
    return {name: value for name, value in total.items() if value}
