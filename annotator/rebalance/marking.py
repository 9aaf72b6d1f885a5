"""The rebalancer's marks on nodes (``loadsched.io/rebalanced-from``, with what each moved pod
used in ``loadsched.io/rebalanced-usage``; :mod:`shared.rebalance_marks`), written through the
API server in one patch: added before an eviction and awaited in the node watch
(:class:`NodeMarks`), cleared once expired or once the node is under every ``low``."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime

import httpx

from annotator.rebalance.nodes import NodeFacts, marks_of, usages_of
from shared.annotation_keys import REBALANCED_FROM_ANNOTATION, REBALANCED_USAGE_ANNOTATION
from shared.errors import APINotFoundError, LoadschedError
from shared.estimation import Need
from shared.kube import patching
from shared.kube.paths import NODES
from shared.kube.requesting import DEFAULT_RETRY
from shared.kube.retrying import RetryPolicy
from shared.overload_streaks import Observation
from shared.rebalance_marks import encode_departures, encode_usages

logger = logging.getLogger(__name__)

MARK_SEEN_SECONDS = 5.0
"""How long the rebalancer waits for its own node watch to show a mark it wrote before it
evicts (a stand-in for the extender's watch, which reads the same API server)."""


def annotations_of(
    marks: Mapping[str, datetime], usages: Mapping[str, Need]
) -> dict[str, str | None]:
    """The node annotations that say ``marks`` and the usages of the marked workloads
    (``None`` removes one that would say nothing)."""
    carried = {k: v for k, v in usages.items() if k in marks}
    return {
        REBALANCED_FROM_ANNOTATION: encode_departures(marks) if marks else None,
        REBALANCED_USAGE_ANNOTATION: encode_usages(carried) if carried else None,
    }


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

    def usages_on(self, node: str) -> dict[str, Need]:
        """What the node watch shows each marked workload's moved pod used."""
        return usages_of(self._node_facts().get(node))

    async def add(
        self, node: str, add: Mapping[str, datetime], now: datetime, usages: Mapping[str, Need]
    ) -> tuple[dict[str, datetime], dict[str, Need]] | None:
        """Write ``add`` into the node's marks (those expired dropped), and ``usages`` (what
        each workload's moved pod uses) beside them; the marks and usages written, or ``None``
        when the write failed."""
        current = self.on(node)
        marks = {k: v for k, v in current.items() if v > now}
        marks.update(add)
        carried = {k: v for k, v in self.usages_on(node).items() if k in marks}
        carried.update({k: v for k, v in usages.items() if k in add})
        if not await self.write(node, marks, carried):
            return None
        return marks, carried

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

    async def write(
        self, node: str, marks: Mapping[str, datetime], usages: Mapping[str, Need]
    ) -> bool:
        """Set the node's marks and the usages of the marked workloads (none removes the
        annotation); whether it was written."""
        body = {"metadata": {"annotations": annotations_of(marks, usages)}}
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
        """Drop marks that expired, with their usages; all of a node's once it is under every
        ``low``; usages without a mark."""
        for name, node in facts.items():
            raw = node.annotations.get(REBALANCED_FROM_ANNOTATION)
            raw_usages = node.annotations.get(REBALANCED_USAGE_ANNOTATION)
            if raw is None and raw_usages is None:
                continue
            observation = observations.get(name)
            if observation is not None and observation.under_low:
                kept: dict[str, datetime] = {}
            else:
                kept = {k: v for k, v in marks_of(node).items() if v > now}
            usages = usages_of(node)
            if annotations_of(kept, usages) == {
                REBALANCED_FROM_ANNOTATION: raw,
                REBALANCED_USAGE_ANNOTATION: raw_usages,
            }:
                continue
            await self.write(name, kept, usages)
