"""What the rebalancer reads of a pod from the API server: more than the watches keep (its
affinity, spread, ports and volumes), to judge whether it may move."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from shared.kube.meta import ObjectMeta
from shared.pods import Container, PodSpec, PodStatus


class FullContainer(Container, gc=False):
    ports: list[dict[str, Any]] | None = None


class FullPodSpec(PodSpec, gc=False):
    """:class:`shared.pods.PodSpec` with what only moving a pod reads (raw)."""

    affinity: dict[str, Any] | None = None
    volumes: list[dict[str, Any]] | None = None
    topologySpreadConstraints: list[Any] | None = None
    containers: Sequence[FullContainer] | None = None
    initContainers: Sequence[FullContainer] | None = None

    @property
    def local_storage(self) -> bool:
        """An ``emptyDir`` or ``hostPath`` volume: what it holds stays behind when it moves."""
        return any("emptyDir" in v or "hostPath" in v for v in self.volumes or ())

    @property
    def unjudged(self) -> str | None:
        """What this pod asks of a node that the rebalancer's target check does not judge, or
        ``None``: its replacement might find no node but the one it left. Required pod
        affinity or anti-affinity and ``DoNotSchedule`` topology spread (kube-scheduler's),
        host ports of its containers and sidecars (kube-scheduler's NodePorts; API defaulting
        sets them for ``hostNetwork`` pods), and claimed volumes (a volume bound to a node or a
        zone: kube-scheduler's volume binding)."""
        affinity = self.affinity or {}
        for kind in ("podAffinity", "podAntiAffinity"):
            terms = affinity.get(kind)
            if isinstance(terms, dict) and terms.get(
                "requiredDuringSchedulingIgnoredDuringExecution"
            ):
                return f"required {kind}"
        for constraint in self.topologySpreadConstraints or ():
            if (
                not isinstance(constraint, dict)
                or constraint.get("whenUnsatisfiable") != "ScheduleAnyway"
            ):
                return "topology spread (DoNotSchedule)"
        sidecars = (c for c in self.initContainers or () if c.restartPolicy == "Always")
        for container in (*(self.containers or ()), *sidecars):
            if any(
                isinstance(port, dict) and port.get("hostPort") for port in container.ports or ()
            ):
                return "hostPort"
        for volume in self.volumes or ():
            if "persistentVolumeClaim" in volume or "ephemeral" in volume:
                return "persistent volume"
        return None


class FullPod(msgspec.Struct, gc=False):
    """A pod as the rebalancer reads it from the API server: with its annotations."""

    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: FullPodSpec = msgspec.field(default_factory=FullPodSpec)
    status: PodStatus = msgspec.field(default_factory=PodStatus)


class PodList(msgspec.Struct, gc=False):
    items: list[FullPod] | None = None


POD_LIST = msgspec.json.Decoder(PodList)
