"""Record Kubernetes Events (``core/v1``) on the objects the controllers act on, so that
``kubectl describe pod`` tells an operator why a pod was evicted or is still waiting.

The same (object, reason, message) is recorded at most once per ``repeat_after`` seconds, and a
failure to record is logged, never raised: events are best-effort by design.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

import httpx

from shared.errors import LoadschedError
from shared.kube import creating
from shared.kube.paths import EVENTS
from shared.kube.requesting import DEFAULT_RETRY
from shared.kube.retrying import RetryPolicy

logger = logging.getLogger(__name__)

COMPONENT = "loadsched-annotator"


@dataclass(frozen=True)
class ObjectRef:
    kind: str
    namespace: str
    name: str
    uid: str = ""
    api_version: str = "v1"

    @property
    def event_namespace(self) -> str:
        """Where its Events go: its namespace; ``default`` for a cluster-scoped object (a
        Node, whose UID the kubelet's own events give as its name)."""
        return self.namespace or "default"


class EventRecorder:
    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        instance: str,
        repeat_after: float = 600.0,
        monotonic: Callable[[], float] = time.monotonic,
        retry: RetryPolicy = DEFAULT_RETRY,
    ) -> None:
        self._client = client
        self._retry = retry
        self._instance = instance
        self._repeat_after = repeat_after
        self._monotonic = monotonic
        self._recent: dict[tuple[str, str, str], float] = {}

    async def record(
        self,
        ref: ObjectRef,
        reason: str,
        message: str,
        *,
        kind: Literal["Normal", "Warning"] = "Normal",
    ) -> None:
        key = (f"{ref.kind}/{ref.namespace}/{ref.name}/{ref.uid}", reason, message)
        now = self._monotonic()
        if now - self._recent.get(key, -self._repeat_after) < self._repeat_after:
            return
        if len(self._recent) > 10_000:
            self._recent.clear()
        self._recent[key] = now
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{ref.name}.", "namespace": ref.event_namespace},
            "involvedObject": {
                "apiVersion": ref.api_version,
                "kind": ref.kind,
                "namespace": ref.namespace,
                "name": ref.name,
                "uid": ref.uid,
            },
            "reason": reason,
            "message": message[:1024],
            "type": kind,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self._instance,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        try:
            await creating.create(
                self._client,
                EVENTS,
                body,
                namespace=ref.event_namespace,
                what=f"{ref.kind.lower()}/{ref.namespace}/{ref.name}: event {reason}",
                retry=self._retry,
            )
        except LoadschedError as e:
            logger.warning(
                "%s/%s: event %s not recorded: %s", ref.kind.lower(), ref.name, reason, e
            )
