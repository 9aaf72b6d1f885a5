"""kube-scheduler's bind verb (``bindVerb: bind``): the extender binds the pod itself, and counts
it on its node first.

kube-scheduler binds a pod in the background and goes on to the next one; the extender learns
of the binding from its pod watch only after the API server has written it. In a burst, pods
are decided before the previous ones' bindings reach the watch, and estimation cannot count
them. As the binder, the extender knows each placement before the next pod is asked about:
the pod (remembered from filter and prioritize, which carry it) is counted on its node at once
(:meth:`PlacementIndex.record_binding`), then bound with a ``Binding``; a failed binding is
taken back and its error returned to kube-scheduler, which retries the pod.

A burst's pods are bound at once, so each binding is written as bytes over kept-alive
connections of the binder's own (:class:`shared.kube.kept_alive.DirectWrite`), at most
:data:`BINDS_AT_ONCE` at a time, rather than through httpx, whose pool's work per request grows
with the requests waiting (a client that cannot be written to directly, such as a test's fake
transport, goes through httpx).

The cost: with the bind verb configured, kube-scheduler cannot bind while the extender is down
(``ignorable`` does not cover binding); the pods wait for it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from functools import partial
from typing import NamedTuple
from urllib.parse import quote

import httpx

from extender.scheduling.placements import PlacementIndex
from extender.scheduling.wire import BindingArgs, BindingResult
from shared.errors import APIError, APIUnreachableError
from shared.kube import direct
from shared.kube.bodies import JSON, encode
from shared.kube.creating import create
from shared.kube.kept_alive import ConnectionPool, DirectWrite
from shared.kube.paths import PODS
from shared.kube.requesting import retried
from shared.kube.retrying import RetryPolicy
from shared.pods import Pod

logger = logging.getLogger(__name__)

REMEMBERED = 10_000
"""Pods remembered from filter and prioritize, waiting for their binding."""
BINDS_AT_ONCE = 16
"""Bindings written at once (and connections kept for them); the others wait their turn."""


JSON_TYPE = JSON["Content-Type"]


class _Cluster(NamedTuple):
    """Where bindings are written, from :meth:`Binder.attach` to :meth:`Binder.detach`."""

    client: httpx.AsyncClient
    retry: RetryPolicy
    turns: asyncio.Semaphore
    """At most :data:`BINDS_AT_ONCE` bindings written at once."""
    pool: ConnectionPool | None
    """The binder's own connections, when the client can be written to directly."""
    write: DirectWrite | None


class Binder:
    def __init__(self, placements: PlacementIndex | None) -> None:
        self._placements = placements
        self._asked: dict[str, Pod] = {}
        self._cluster: _Cluster | None = None

    def attach(self, client: httpx.AsyncClient, retry: RetryPolicy) -> None:
        """Bind in ``client``'s cluster (called on the running event loop)."""
        route = direct.route(client)
        pool, write = None, None
        if route is not None:
            pool = ConnectionPool(route.tls, BINDS_AT_ONCE)
            write = DirectWrite(pool, route, retry.http_timeout)
        self._cluster = _Cluster(client, retry, asyncio.Semaphore(BINDS_AT_ONCE), pool, write)

    def detach(self) -> None:
        """The cluster is gone (the service stops): its connections are closed. A binding
        already under way ends on the cluster it started on."""
        cluster, self._cluster = self._cluster, None
        if cluster is not None and cluster.pool is not None:
            cluster.pool.close()

    def remember(self, pod: Pod) -> None:
        """A pod kube-scheduler asked about (it may be bound next)."""
        uid = pod.metadata.uid
        if not uid or self._placements is None:
            return
        if len(self._asked) >= REMEMBERED and uid not in self._asked:
            del self._asked[next(iter(self._asked))]
        self._asked[uid] = pod

    async def bind(self, args: BindingArgs) -> BindingResult:
        """Count the pod on its node, then bind it; an error is kube-scheduler's to retry."""
        cluster = self._cluster
        if cluster is None:
            return BindingResult(Error="loadsched extender has no cluster to bind in")
        where = f"pod/{args.PodNamespace}/{args.PodName}"
        pod = self._asked.pop(args.PodUID, None)
        placements = self._placements
        if placements is not None and pod is not None:
            placements.record_binding(pod, args.Node)
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
    """POST the Binding: straight to the binder's connections, else through httpx."""
    if cluster.write is None:
        await create(
            cluster.client,
            PODS,
            body,
            namespace=args.PodNamespace,
            name=args.PodName,
            subresource="binding",
            what=what,
            retry=cluster.retry,
        )
        return
    # quoted as httpx would: the names come from the request, unchecked
    path = PODS.path(
        quote(args.PodName, safe=""),
        namespace=quote(args.PodNamespace, safe=""),
        subresource="binding",
    )
    send = partial(cluster.write.send, b"POST", path.encode(), encode(body), JSON_TYPE, what)
    await retried(send, method="POST", what=what, retry=cluster.retry)
