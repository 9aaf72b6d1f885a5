"""The one ``ObjectMeta`` every decoded Kubernetes object uses: the fields loadsched reads or
writes, each optional, the rest skipped unparsed. Encoded with defaults omitted, so a body
built from it carries only what was set."""

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
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resourceVersion: str | None = None
    creationTimestamp: str | None = None
    deletionTimestamp: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    ownerReferences: list[OwnerReference] | None = None
