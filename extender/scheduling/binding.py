"""kube-scheduler's bind verb (``bindVerb: bind``): the extender binds the pod itself, and counts
it on its node first.

kube-scheduler binds a pod in the background and goes on to the next one; the extender learns
of the binding from its pod watch only after the API server has written it. In a burst, pods
are decided before the previous ones' bindings reach the watch, and estimation cannot count
them. As the binder, the extender knows each placement before the next pod is asked about:
the pod (remembered from filter and prioritize, which carry it) is counted on its node at once
(:meth:`PlacementIndex.record_binding`), then bound with a ``Binding``; a failed binding is
taken back and its error returned to kube-scheduler, which retries the pod.

A burst's pods are bound at once: at most :data:`BINDS_AT_ONCE` bindings are written at a time,
the others wait their turn.

kube-scheduler still decides the next pods while a binding is on its way to the extender: each
binding observes how many filter answers for other pods came between its pod's filter and
itself (``loadsched_extender_filters_before_binding``), the pods placed without it counted.

The cost: with the bind verb configured, kube-scheduler cannot bind while the extender is down
(``ignorable`` does not cover binding); the pods wait for it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import NamedTuple
from urllib.parse import quote

import httpx
from prometheus_client import Histogram

from extender.scheduling.placements import PlacementIndex
from extender.scheduling.wire import BindingArgs, BindingResult
from shared.errors import APIError, APIUnreachableError
from shared.kube.creating import create
from shared.kube.paths import PODS
from shared.kube.retrying import RetryPolicy
from shared.pods import Pod

logger = logging.getLogger(__name__)

REMEMBERED = 10_000
"""Pods remembered from filter and prioritize, waiting for their binding."""
BINDS_AT_ONCE = 16
"""Bindings written at once (and connections kept for them); the others wait their turn."""


class _Cluster(NamedTuple):
    """Where bindings are written, from :meth:`Binder.attach` to :meth:`Binder.detach`."""

    client: httpx.AsyncClient
    retry: RetryPolicy
    turns: asyncio.Semaphore
    """At most :data:`BINDS_AT_ONCE` bindings written at once."""


class Binder:
    def __init__(
        self, placements: PlacementIndex | None, overtaken: Histogram | None = None
    ) -> None:
        self._placements = placements
        self._overtaken = overtaken
        """Observes, per binding, the filter answers for other pods since its pod's filter."""
        self._asked: dict[str, tuple[Pod, int]] = {}
        """Per pod uid: the pod, and :attr:`_filters` at its latest filter."""
        self._filters = 0
        """Filter answers so far."""
        self._cluster: _Cluster | None = None

    def attach(self, client: httpx.AsyncClient, retry: RetryPolicy) -> None:
        """Bind in ``client``'s cluster (called on the running event loop)."""
        self._cluster = _Cluster(client, retry, asyncio.Semaphore(BINDS_AT_ONCE))

    def detach(self) -> None:
        """The cluster is gone (the service stops). A binding already under way ends on the
        cluster it started on."""
        self._cluster = None

    def remember(self, pod: Pod, *, filtered: bool = False) -> None:
        """A pod kube-scheduler asked about (it may be bound next); ``filtered``: in a filter
        call."""
        if filtered:
            self._filters += 1
        uid = pod.metadata.uid
        if not uid or self._placements is None:
            return
        if len(self._asked) >= REMEMBERED and uid not in self._asked:
            del self._asked[next(iter(self._asked))]
        previous = self._asked.get(uid)
        at = self._filters if filtered or previous is None else previous[1]
        self._asked[uid] = (pod, at)

    async def bind(self, args: BindingArgs) -> BindingResult:
        """Count the pod on its node, then bind it; an error is kube-scheduler's to retry."""
        cluster = self._cluster
        if cluster is None:
            return BindingResult(Error="loadsched extender has no cluster to bind in")
        where = f"pod/{args.PodNamespace}/{args.PodName}"
        asked = self._asked.pop(args.PodUID, None)
        placements = self._placements
        if placements is not None and asked is not None:
            pod, filtered_at = asked
            placements.record_binding(pod, args.Node)
            if self._overtaken is not None:
                self._overtaken.observe(self._filters - filtered_at)
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": args.PodName, "namespace": args.PodNamespace, "uid": args.PodUID},
            "target": {"apiVersion": "v1", "kind": "Node", "name": args.Node},
        }
        what = f"{where}: bind to node/{args.Node}"
        try:
            async with cluster.turns:
                await _write(cluster, args, body, what)
        except (APIError, APIUnreachableError) as e:
            if placements is not None:
                placements.forget(args.PodUID)
            logger.warning("%s: binding to node/%s failed: %s", where, args.Node, e)
            return BindingResult(Error=f"binding {where} to {args.Node}: {e}")
        return BindingResult()


async def _write(
    cluster: _Cluster, args: BindingArgs, body: Mapping[str, object], what: str
) -> None:
    """POST the Binding; the names come from the request, unchecked, so they are quoted into
    the path (a line break cannot add a header)."""
    await create(
        cluster.client,
        PODS,
        body,
        namespace=quote(args.PodNamespace, safe=""),
        name=quote(args.PodName, safe=""),
        subresource="binding",
        what=what,
        retry=cluster.retry,
    )
