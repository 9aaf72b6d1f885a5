"""The scheduler-extender wire format, exactly as kube-scheduler sends and reads it.

The Go types (``k8s.io/kube-scheduler/extender/v1``) carry no json tags, so the keys are the Go
field names (``Pod``, ``Nodes``, ``NodeNames``, ``FailedNodes``, ...). Kubernetes objects are
parsed only as far as a decision needs: node items stay raw bytes (``msgspec.Raw``) so a
5,000-node list is never materialised, and a passing node is sent back byte for byte.
"""

from __future__ import annotations

import msgspec


class OwnerReference(msgspec.Struct):
    kind: str = ""
    name: str = ""


class PodMeta(msgspec.Struct):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    ownerReferences: list[OwnerReference] | None = None


class PodInfo(msgspec.Struct):
    """The few fields of a Pod the extender reads; everything else is skipped unparsed."""

    metadata: PodMeta = msgspec.field(default_factory=PodMeta)

    @property
    def key(self) -> str:
        return f"{self.metadata.namespace}/{self.metadata.name}"

    @property
    def is_daemonset_pod(self) -> bool:
        return any(ref.kind == "DaemonSet" for ref in self.metadata.ownerReferences or ())


class NodeMeta(msgspec.Struct):
    name: str = ""
    annotations: dict[str, str] | None = None


class Node(msgspec.Struct):
    metadata: NodeMeta = msgspec.field(default_factory=NodeMeta)


class NodeList(msgspec.Struct):
    items: list[msgspec.Raw] | None = None


class ExtenderArgs(msgspec.Struct):
    """Body of ``/filter`` and ``/prioritize``: ``Nodes`` is null in names-only mode
    (``nodeCacheCapable: true``), ``NodeNames`` is null otherwise."""

    Pod: PodInfo | None = None
    Nodes: NodeList | None = None
    NodeNames: list[str] | None = None


class FilterResult(msgspec.Struct, omit_defaults=False):
    Nodes: NodeList | None = None
    NodeNames: list[str] | None = None
    FailedNodes: dict[str, str] = msgspec.field(default_factory=dict)
    FailedAndUnresolvableNodes: dict[str, str] = msgspec.field(default_factory=dict)
    Error: str = ""


class HostPriority(msgspec.Struct):
    Host: str
    Score: int


class MetaPod(msgspec.Struct):
    UID: str


class MetaVictims(msgspec.Struct):
    Pods: list[MetaPod] = msgspec.field(default_factory=list)
    NumPDBViolations: int = 0


class VictimPodMeta(msgspec.Struct):
    uid: str = ""


class VictimPod(msgspec.Struct):
    metadata: VictimPodMeta = msgspec.field(default_factory=VictimPodMeta)


class Victims(msgspec.Struct):
    Pods: list[VictimPod] | None = None
    NumPDBViolations: int = 0


class PreemptionArgs(msgspec.Struct):
    """Body of ``/preempt``: full victims, or UIDs only when the extender is node-cache capable."""

    Pod: PodInfo | None = None
    NodeNameToVictims: dict[str, Victims] | None = None
    NodeNameToMetaVictims: dict[str, MetaVictims] | None = None


class PreemptionResult(msgspec.Struct):
    NodeNameToMetaVictims: dict[str, MetaVictims]


ARGS_DECODER = msgspec.json.Decoder(ExtenderArgs)
NODE_DECODER = msgspec.json.Decoder(Node)
PREEMPTION_DECODER = msgspec.json.Decoder(PreemptionArgs)
ENCODER = msgspec.json.Encoder()
