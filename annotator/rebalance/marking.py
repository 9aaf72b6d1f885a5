"""The rebalancer's marks on nodes (``loadsched.io/rebalanced-from``,
:mod:`shared.rebalance_marks`), written through the API server: added before an eviction and
awaited in the node watch (:class:`NodeMarks`), cleared once expired or once the node is under
every ``low``."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime

import httpx

from annotator.rebalance.nodes import NodeFacts, marks_of
from shared.annotation_keys import REBALANCED_FROM_ANNOTATION
from shared.errors import APINotFoundError, LoadschedError
from shared.kube import patching
from shared.kube.paths import NODES
from shared.kube.requesting import DEFAULT_RETRY
from shared.kube.retrying import RetryPolicy
from shared.overload_streaks import Observation
from shared.rebalance_marks import decode_departures, encode_departures

logger = logging.getLogger(__name__)

MARK_SEEN_SECONDS = 5.0
"""How long the rebalancer waits for its own node watch to show a mark it wrote before it
evicts (a stand-in for the extender's watch, which reads the same API server)."""


class NodeMarks:
    """Writes the marks on nodes and reads them back from the node watch."""

    def __init__(
        self,
        *,
        kube: httpx.AsyncClient,
        node_facts: Callable[[], Mapping[str, NodeFacts]],
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        retry: RetryPolicy = DEFAULT_RETRY,
    ) -> None:
        self._kube = kube
        self._node_facts = node_facts
        self._monotonic = monotonic
        self._sleep = sleep
        self._retry = retry

    def on(self, node: str) -> dict[str, datetime]:
        """The node's marks as the node watch shows them now."""
        return marks_of(self._node_facts().get(node))

    async def add(
        self, node: str, add: Mapping[str, datetime], now: datetime
    ) -> dict[str, datetime] | None:
        """Write ``add`` into the node's marks (those expired dropped); the marks written, or
        ``None`` when the write failed."""
        current = self.on(node)
        marks = {k: v for k, v in current.items() if v > now}
        marks.update(add)
        if not await self.write(node, encode_departures(marks)):
            return None
        return marks

    async def shown(self, node: str, marked: Mapping[str, datetime]) -> bool:
        """Whether this replica's node watch shows ``marked`` within :data:`MARK_SEEN_SECONDS`:
        the extender learns of the mark through a watch of its own, and a replacement it
        scheduled before would be placed as if there were none."""
        deadline = self._monotonic() + MARK_SEEN_SECONDS
        while True:
            shown = self.on(node)
            if all(k in shown and shown[k] >= v for k, v in marked.items()):
                return True
            if self._monotonic() >= deadline:
                return False
            await self._sleep(0.05)

    async def write(self, node: str, value: str | None) -> bool:
        """Set the node's marks to ``value`` (``None`` removes them); whether it was written."""
        body = {"metadata": {"annotations": {REBALANCED_FROM_ANNOTATION: value}}}
        try:
            await patching.patch(
                self._kube,
                NODES,
                node,
                body,
                what=f"node/{node}: mark rebalanced workloads",
                retry=self._retry,
                idempotent=True,
                conflicts=True,
            )
        except APINotFoundError:
            return False
        except LoadschedError as e:
            logger.warning("node/%s: rebalance mark not written; nothing moved: %s", node, e)
            return False
        return True

    async def clear(
        self, facts: Mapping[str, NodeFacts], observations: Mapping[str, Observation], now: datetime
    ) -> None:
        """Drop marks that expired; all of a node's once it is under every ``low``."""
        for name, node in facts.items():
            raw = node.annotations.get(REBALANCED_FROM_ANNOTATION)
            if raw is None:
                continue
            marks = decode_departures(raw)
            observation = observations.get(name)
            if observation is not None and observation.under_low:
                kept: dict[str, datetime] = {}
            else:
                kept = {k: v for k, v in marks.items() if v > now}
            if kept == marks and raw == encode_departures(marks):
                continue
            await self.write(name, encode_departures(kept) if kept else None)
