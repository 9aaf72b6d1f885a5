"""The rebalancer's status, as the annotator's leader publishes it: its ConfigMap
(``loadsched-rebalance``, key ``status.json``) in the namespace both run in, read when asked
(``/v1/status?part=rebalance``, the status page, ``kubectl loadsched rebalance``)."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import msgspec

from shared.annotation_keys import REBALANCE_STATUS_KEY
from shared.errors import APIForbiddenError, APINotFoundError, LoadschedError
from shared.kube import fetching
from shared.kube.paths import CONFIGMAPS
from shared.kube.requesting import DEFAULT_RETRY
from shared.kube.retrying import RetryPolicy

logger = logging.getLogger(__name__)

REBALANCE_STATUS_NAME = "loadsched-rebalance"


class _ConfigMap(msgspec.Struct):
    data: dict[str, str] | None = None


_DECODER = msgspec.json.Decoder(_ConfigMap)


class RebalanceStatusReader:
    def __init__(self, namespace: str, name: str = REBALANCE_STATUS_NAME) -> None:
        self.namespace = namespace
        self.name = name
        self._client: httpx.AsyncClient | None = None
        self._retry = DEFAULT_RETRY

    def attach(self, client: httpx.AsyncClient, retry: RetryPolicy) -> None:
        self._client, self._retry = client, retry

    async def read(self) -> dict[str, Any]:
        """The published status; ``{"published": false, "reason": ...}`` when there is none
        (the rebalancer is off, or has not run a round) or it cannot be read."""
        where = f"configmap {self.namespace}/{self.name}"
        if self._client is None:
            return {"published": False, "reason": "no cluster configured"}
        try:
            raw = await fetching.get(
                self._client,
                CONFIGMAPS,
                self.name,
                namespace=self.namespace,
                what=where,
                retry=self._retry,
            )
            text = (_DECODER.decode(raw).data or {}).get(REBALANCE_STATUS_KEY)
            status = json.loads(text) if text else None
        except (APINotFoundError, APIForbiddenError):  # off: the chart grants no access
            return {
                "published": False,
                "reason": f"no {where}: the rebalancer is off or has not run",
            }
        except (LoadschedError, msgspec.DecodeError, ValueError) as e:
            logger.warning("rebalance status not read: %s", e)
            return {"published": False, "reason": f"{where} not read: {e}"}
        if not isinstance(status, dict):
            return {"published": False, "reason": f"{where} holds no status"}
        return {"published": True, **status}
