"""The ElasticQuota object as the quota watches decode it, and the reservations recorded on
it (:data:`ADMITTED_ANNOTATION`, see :mod:`shared.quota_ledger`): the admissions extender
replicas make, and the room the reclaim controller frees for a waiting pod. Pure."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import msgspec

from shared.annotation_keys import ADMITTED_ANNOTATION as ADMITTED_ANNOTATION
from shared.kube.meta import ObjectMeta
from shared.quantity import ResourceList, parse_resources, to_quantity

logger = logging.getLogger(__name__)


class QuotaStatus(msgspec.Struct, gc=False):
    used: dict[str, Any] | None = None


class QuotaObject(msgspec.Struct, gc=False):
    """An ElasticQuota as listed; ``spec`` stays untyped so a malformed one can be reported."""

    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: Any = None
    status: QuotaStatus | None = None


QUOTA_DECODER = msgspec.json.Decoder(QuotaObject)


@dataclass(frozen=True, slots=True)
class Reservation:
    """A pod admitted by some replica, or promised reclaimed room, as written on its
    namespace's ElasticQuota."""

    until: float
    """Wall-clock deadline, Unix seconds."""
    request: ResourceList
    priority: int | None = None
    """A promise: the reclaim controller freed this room for a waiting pod of this priority.
    It holds against pods of that priority or lower (first come, first served), not against
    a higher one, as CapacityScheduling counts nominated pods. ``None``: an admission, which
    holds against every pod."""

    def holds_against(self, priority: int | None) -> bool:
        """Does this reservation count for a decision about a pod of ``priority``?"""
        return self.priority is None or priority is None or self.priority >= priority


@dataclass(frozen=True, slots=True)
class ReservationPatch:
    """The merge patch that adds a reservation to an ElasticQuota, guarded by the
    resourceVersion its decision was made on."""

    namespace: str
    name: str
    body: dict[str, Any]


def reservations_of(obj: QuotaObject) -> dict[str, Reservation]:
    """The reservations on an ElasticQuota; a malformed annotation or entry is skipped."""
    text = (obj.metadata.annotations or {}).get(ADMITTED_ANNOTATION)
    if not text:
        return {}
    try:
        entries = json.loads(text)
    except ValueError:
        logger.warning("elasticquota/%s: %s is not JSON", obj.metadata.name, ADMITTED_ANNOTATION)
        return {}
    found: dict[str, Reservation] = {}
    for uid, entry in entries.items() if isinstance(entries, dict) else ():
        try:
            until, request, *promise = entry
            priority = None
            if promise:
                (priority,) = promise
                if not isinstance(priority, int) or isinstance(priority, bool):
                    continue
            found[uid] = Reservation(float(until), parse_resources(request, where=uid), priority)
        except (TypeError, ValueError):
            continue
    return found


def encode_reservations(reservations: dict[str, Reservation]) -> str:
    return json.dumps(
        {uid: _entry(r) for uid, r in reservations.items()},
        separators=(",", ":"),
    )


def _entry(r: Reservation) -> list[Any]:
    entry: list[Any] = [round(r.until, 3), {k: to_quantity(v) for k, v in r.request.items()}]
    if r.priority is not None:
        entry.append(r.priority)
    return entry


def is_older(obj: QuotaObject, current: QuotaObject | None) -> bool:
    if current is None or current.metadata.uid != obj.metadata.uid:
        return False
    new, old = obj.metadata.resourceVersion or "", current.metadata.resourceVersion or ""
    return new.isdigit() and old.isdigit() and int(new) < int(old)
