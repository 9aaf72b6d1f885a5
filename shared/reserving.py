"""Write a reservation on an ElasticQuota (:data:`shared.quota_ledger.ADMITTED_ANNOTATION`):
an extender replica's admission, or the reclaim controller's promise of the room it freed.

The patch carries the resourceVersion the caller's decision was made on
(:meth:`shared.quota_ledger.QuotaLedger.reservation_patch`), so of two writers at once one
gets a 409: the object is read again into the ledger, and the caller decides again on it.
"""

from __future__ import annotations

import logging

import httpx
import msgspec

from shared.errors import APIConflictError
from shared.kube import fetching, patching
from shared.kube.paths import ELASTIC_QUOTAS
from shared.kube.retrying import RetryPolicy
from shared.quota_ledger import QUOTA_DECODER, QuotaLedger
from shared.quota_objects import ReservationPatch

logger = logging.getLogger(__name__)


async def write_reservation(
    client: httpx.AsyncClient,
    ledger: QuotaLedger,
    target: ReservationPatch,
    *,
    what: str,
    retry: RetryPolicy,
) -> bool:
    """Patch ``target`` onto its ElasticQuota and learn the object written; ``False`` when
    another writer came first (the ledger then holds the object as it is now). Other
    :class:`shared.errors.LoadschedError` s are the caller's to handle."""
    try:
        written = await patching.patch(
            client,
            ELASTIC_QUOTAS,
            target.name,
            target.body,
            namespace=target.namespace,
            what=f"elasticquota/{target.namespace}/{target.name}: {what}",
            retry=retry,
        )
    except APIConflictError:
        current = await fetching.get(
            client, ELASTIC_QUOTAS, target.name, namespace=target.namespace, retry=retry
        )
        learn(ledger, current)
        return False
    learn(ledger, written)
    return True


def learn(ledger: QuotaLedger, content: bytes) -> None:
    """Put an ElasticQuota the API server answered with into ``ledger``."""
    try:
        obj = QUOTA_DECODER.decode(content)
    except msgspec.DecodeError as e:
        logger.warning("elasticquota: unreadable answer: %s", e)
        return
    ledger.set_quota_objects([obj], replace=False)
