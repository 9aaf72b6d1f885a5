"""The scheduler-extender wire format, exactly as kube-scheduler sends and reads it.

The Go types (``k8s.io/kube-scheduler/extender/v1``) carry no json tags, so the keys are the Go
field names (``Pod``, ``Nodes``, ``NodeNames``, ``FailedNodes``, ...). Kubernetes objects are
parsed only as far as a decision needs: node items stay raw bytes (``msgspec.Raw``) so a
5,000-node list is never materialised, and a passing node is sent back byte for byte.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from shared.errors import LoadschedError
from shared.kube.meta import NodeMeta as NodeMeta
from shared.kube.meta import PodMeta
from shared.nodes import NODE_DECODER as NODE_DECODER
from shared.nodes import Node as Node
from shared.pods import Pod

PodInfo = Pod
"""The fields of a Pod the extender reads (:mod:`shared.pods`); the rest is skipped unparsed.
Nodes are :class:`shared.nodes.Node`, re-exported here with their decoder."""


class NodeList(msgspec.Struct, gc=False):
    items: list[msgspec.Raw] | None = None


NULL = msgspec.Raw(b"null")


class ExtenderArgs(msgspec.Struct, gc=False):
    """Body of ``/filter`` and ``/prioritize``: ``Nodes`` is null in names-only mode
    (``nodeCacheCapable: true``), ``NodeNames`` is null otherwise.

    ``NodeNames`` is kept as sent, JSON: kube-scheduler asks about the same windows of nodes pod
    after pod, so those bytes are the key of the answers kept for them
    (:class:`extender.scheduling.memos.WindowMemo`), and the names are decoded
    (:func:`node_names`) only when an answer is computed."""

    Pod: PodInfo | None = None
    Nodes: NodeList | None = None
    NodeNames: msgspec.Raw = NULL

    @property
    def names_only(self) -> bool:
        """``NodeNames`` is not null."""
        return self.NodeNames != NULL


class InvalidNodeNames(LoadschedError):
    """``NodeNames`` is not a list of strings: the message names where, like msgspec's."""


_NAMES_DECODER = msgspec.json.Decoder(list[str])


def node_names(raw: msgspec.Raw) -> list[str]:
    """The names of a request's ``NodeNames`` (not null)."""
    try:
        return _NAMES_DECODER.decode(raw)
    except msgspec.DecodeError as e:
        detail = str(e).replace("- at `$", "- at `$.NodeNames", 1)
        if "- at `$" not in detail:
            detail += " - at `$.NodeNames`"
        raise InvalidNodeNames(detail) from e


RejectionListing = Literal["when-none-pass", "always"]
"""Which filter answers list the nodes refused (``--filter-rejections``)."""


class FilterResult(msgspec.Struct, gc=False):
    Nodes: NodeList | None = None
    NodeNames: list[str] | None = None
    FailedNodes: dict[str, str] = msgspec.field(default_factory=dict)
    FailedAndUnresolvableNodes: dict[str, str] = msgspec.field(default_factory=dict)
    Error: str = ""


class HostPriority(msgspec.Struct, gc=False):
    Host: str
    Score: int


class MetaPod(msgspec.Struct, gc=False):
    UID: str


class MetaVictims(msgspec.Struct, gc=False):
    Pods: list[MetaPod] = msgspec.field(default_factory=list)
    NumPDBViolations: int = 0


class VictimPod(msgspec.Struct, gc=False):
    metadata: PodMeta = msgspec.field(default_factory=PodMeta)


class Victims(msgspec.Struct, gc=False):
    Pods: list[VictimPod] | None = None
    NumPDBViolations: int = 0


class PreemptionArgs(msgspec.Struct, gc=False):
    """Body of ``/preempt``: full victims, or UIDs only when the extender is node-cache capable."""

    Pod: PodInfo | None = None
    NodeNameToVictims: dict[str, Victims] | None = None
    NodeNameToMetaVictims: dict[str, MetaVictims] | None = None


class PreemptionResult(msgspec.Struct, gc=False):
    NodeNameToMetaVictims: dict[str, MetaVictims]


class BindingArgs(msgspec.Struct, gc=False):
    """Body of ``/bind`` (kube-scheduler's ExtenderBindingArgs)."""

    PodName: str = ""
    PodNamespace: str = ""
    PodUID: str = ""
    Node: str = ""


class BindingResult(msgspec.Struct, gc=False):
    Error: str = ""


ARGS_DECODER = msgspec.json.Decoder(ExtenderArgs)
BINDING_DECODER = msgspec.json.Decoder(BindingArgs)
PREEMPTION_DECODER = msgspec.json.Decoder(PreemptionArgs)
ENCODER = msgspec.json.Encoder()


def encode_filter_result(result: FilterResult) -> bytes:
    """Encode a filter answer. Raw node items are joined in one pass rather than copied into
    a growing buffer: a full-node answer is most of the request's size again."""
    items = result.Nodes.items if result.Nodes is not None else None
    if not items:
        return ENCODER.encode(result)
    rest = ENCODER.encode(
        FilterResult(
            NodeNames=result.NodeNames,
            FailedNodes=result.FailedNodes,
            FailedAndUnresolvableNodes=result.FailedAndUnresolvableNodes,
            Error=result.Error,
        )
    )
    # rest is '{"Nodes":null,"NodeNames":...}': replace its first member.
    head = b'{"Nodes":null,'
    if not rest.startswith(head):  # pragma: no cover - field order is fixed by the struct
        return ENCODER.encode(result)
    return b"".join((b'{"Nodes":{"items":[', b",".join(items), b"]},", rest[len(head) :]))
