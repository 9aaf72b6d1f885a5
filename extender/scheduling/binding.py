"""kube-scheduler's bind verb (``bindVerb: bind``): the extender binds the pod itself, and counts
it on its node first.

kube-scheduler binds a pod in the background and goes on to the next one; the extender learns
of the binding from its pod watch only after the API server has written it. In a burst, pods
are decided before the previous ones' bindings reach the watch, and estimation cannot count
them. As the binder, the extender knows each placement before the next pod is asked about:
the pod (remembered from filter and prioritize, which carry it) is counted on its node at once
(:meth:`PlacementIndex.assume`), then bound with a ``Binding``; a failed binding is taken back
and its error returned to kube-scheduler, which retries the pod.

The cost: with the bind verb configured, kube-scheduler cannot bind while the extender is down
(``ignorable`` does not cover binding); the pods wait for it.
"""

from __future__ import annotations

import logging

import httpx

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


class Binder:
    def __init__(self, placements: PlacementIndex | None) -> None:
        self._placements = placements
        self._asked: dict[str, Pod] = {}
        self._client: httpx.AsyncClient | None = None
        self._retry: RetryPolicy | None = None

    def attach(self, client: httpx.AsyncClient, retry: RetryPolicy) -> None:
        self._client, self._retry = client, retry

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
        client, retry = self._client, self._retry
        if client is None or retry is None:
            return BindingResult(Error="loadsched extender has no cluster to bind in")
        where = f"pod/{args.PodNamespace}/{args.PodName}"
        pod = self._asked.pop(args.PodUID, None)
        placements = self._placements
        if placements is not None and pod is not None:
            placements.assume(pod, args.Node)
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": args.PodName, "namespace": args.PodNamespace, "uid": args.PodUID},
            "target": {"apiVersion": "v1", "kind": "Node", "name": args.Node},
        }
        try:
            await create(
                client,
                PODS,
                body,
                namespace=args.PodNamespace,
                name=args.PodName,
                subresource="binding",
                what=f"{where}: bind to node/{args.Node}",
                retry=retry,
            )
        except (APIError, APIUnreachableError) as e:
            if placements is not None:
                placements.forget(args.PodUID)
            logger.warning("%s: binding to node/%s failed: %s", where, args.Node, e)
            return BindingResult(Error=f"binding {where} to {args.Node}: {e}")
        return BindingResult()
