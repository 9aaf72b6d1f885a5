"""What a rebalance round reads beyond the watches: the pods on a node, from the API server
(the opt-out annotation and the newest state count), and each pod's usage, from Prometheus."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from urllib.parse import quote

import httpx
import msgspec

from annotator.metrics import AnnotatorMetrics
from annotator.rebalance.full_pod import POD_LIST, FullPod
from shared.errors import LoadschedError
from shared.kube.paths import PODS
from shared.kube.requesting import DEFAULT_RETRY, request
from shared.kube.retrying import RetryPolicy
from shared.rebalance_policy import PodUsageQueries

logger = logging.getLogger(__name__)

UsageQuery = Callable[[str], Awaitable[dict[tuple[str, str], float]]]
"""Runs a PromQL query; (namespace, pod) → value."""


async def pods_on(
    kube: httpx.AsyncClient, node: str, retry: RetryPolicy = DEFAULT_RETRY
) -> list[FullPod] | None:
    """The node's pods not finished, or ``None`` when they could not be read."""
    path = PODS.path() + "?fieldSelector=" + quote(f"spec.nodeName={node}", safe="")
    try:
        response = await request(kube, "GET", path, what=f"pods on node/{node}", retry=retry)
        items = POD_LIST.decode(response.content).items or []
    except (LoadschedError, msgspec.DecodeError) as e:
        logger.warning("node/%s: pods not read; not rebalanced this round: %s", node, e)
        return None
    return [p for p in items if p.status.phase not in ("Succeeded", "Failed")]


async def measured(
    usage: UsageQuery, queries: PodUsageQueries, metrics: AnnotatorMetrics
) -> dict[str, dict[tuple[str, str], float]]:
    """Per resource, (namespace, pod) → usage; a failed query is none (estimates apply)."""
    by_resource: dict[str, dict[tuple[str, str], float]] = {}
    for resource, promql in (("cpu", queries.cpu), ("memory", queries.memory)):
        try:
            by_resource[resource] = await usage(promql)
        except LoadschedError as e:
            metrics.rebalance_usage_errors.labels(resource).inc()
            logger.warning("per-pod %s usage not read; requests count instead: %s", resource, e)
            by_resource[resource] = {}
    return by_resource
