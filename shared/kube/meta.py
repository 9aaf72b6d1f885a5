"""Object metadata: :class:`ObjectMeta`, which every decoded or written Kubernetes object
uses, and two cuts of it for the two kinds decoded on hot paths, where a field parsed for
nothing costs measurable time (``bench/decode.py`` prints before and now side by side).

Fields are the ones loadsched reads or writes, each optional; the rest is skipped unparsed.
Encoded with defaults omitted, so a body built from a struct carries only what was set.

- :class:`PodMeta` (pods: 100,000 on a watch): no ``annotations`` (nobody reads a pod's) and
  owner references cut to kind and name. Decoding pods with :class:`ObjectMeta` instead took
  1.20-1.25x the time on ``bench/decode.py``'s 100,000 pods (three annotations each: 1.20x;
  whole owner references: 1.05x more).
- :class:`NodeMeta` (nodes: every item of a full-node request, 5,000 per call): ``labels``
  kept raw, decoded only by the node watch for node fit. With :class:`ObjectMeta` the
  extender's node decode took 1.03-1.05x the time (eight labels a node).
"""

from __future__ import annotations

import msgspec


class OwnerReference(msgspec.Struct, gc=False, omit_defaults=True):
    """Whole, so that an object read and written back (a Lease) keeps a valid reference."""

    apiVersion: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None
    blockOwnerDeletion: bool | None = None


class ObjectMeta(msgspec.Struct, gc=False, omit_defaults=True):
    """The metadata of every object but Pods and Nodes (Leases, ConfigMaps, Jobs, CronJobs,
    ElasticQuotas), and of every object loadsched writes."""

    name: str = ""
    namespace: str = ""
    uid: str = ""
    resourceVersion: str | None = None
    creationTimestamp: str | None = None
    deletionTimestamp: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    ownerReferences: list[OwnerReference] | None = None


class OwnerKind(msgspec.Struct, gc=False, omit_defaults=True):
    """What a pod's owner reference is read for: a DaemonSet's pod, a Job's."""

    kind: str = ""
    name: str = ""


class PodMeta(msgspec.Struct, gc=False, omit_defaults=True):
    """:class:`ObjectMeta` of a Pod, without ``annotations`` and ``resourceVersion``, owner
    references cut to :class:`OwnerKind` (see the module's figures)."""

    name: str = ""
    namespace: str = ""
    uid: str = ""
    creationTimestamp: str | None = None
    deletionTimestamp: str | None = None
    labels: dict[str, str] | None = None
    ownerReferences: list[OwnerKind] | None = None


class NodeMeta(msgspec.Struct, gc=False, omit_defaults=True):
    """:class:`ObjectMeta` of a Node: ``labels`` raw (never validated here: read for node fit
    by :meth:`shared.nodes.Node.fit`), nothing else but name and annotations (see the
    module's figures)."""

    name: str = ""
    annotations: dict[str, str] | None = None
    labels: msgspec.Raw = msgspec.Raw()
