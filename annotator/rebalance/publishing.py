"""Publishes the rebalancer's status (:class:`annotator.rebalance.status.RebalanceStatus`) as
the ConfigMap that the extender's ``/v1/status?part=rebalance`` and ``kubectl loadsched
rebalance`` read: a server-side apply, only when it changed."""

from __future__ import annotations

import json
import logging

import httpx

from annotator.rebalance.status import RebalanceStatus
from shared.annotation_keys import REBALANCE_STATUS_KEY
from shared.errors import LoadschedError
from shared.kube.bodies import encode
from shared.kube.paths import CONFIGMAPS
from shared.kube.requesting import DEFAULT_RETRY, request
from shared.kube.retrying import RetryPolicy

logger = logging.getLogger(__name__)


class StatusPublisher:
    """Applies the status ConfigMap ``namespace/name``; remembers what it last applied."""

    def __init__(
        self,
        *,
        kube: httpx.AsyncClient,
        namespace: str,
        name: str,
        retry: RetryPolicy = DEFAULT_RETRY,
    ) -> None:
        self._kube = kube
        self._namespace = namespace
        self._name = name
        self._retry = retry
        self._published = b""

    async def publish(self, status: RebalanceStatus) -> None:
        """The status as a ConfigMap (when it changed), for the extender and the plugin."""
        text = json.dumps(status.as_json(), indent=1, sort_keys=True)
        body = encode(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": self._name,
                    "namespace": self._namespace,
                    "labels": {"app.kubernetes.io/managed-by": "loadsched"},
                },
                "data": {REBALANCE_STATUS_KEY: text},
            }
        )
        if body == self._published:
            return
        path = CONFIGMAPS.path(self._name, namespace=self._namespace)
        try:
            await request(
                self._kube,
                "PATCH",
                path + "?fieldManager=loadsched-rebalancer&force=true",
                what=f"configmap/{self._namespace}/{self._name}: apply",
                retry=self._retry,
                idempotent=True,
                conflicts=True,
                content=body,
                headers={"Content-Type": "application/apply-patch+yaml"},
            )
        except LoadschedError as e:
            logger.warning("rebalance status not published: %s", e)
            return
        self._published = body
