"""Builds the extender app: policy, decisions, metrics, and the node watch when a cluster is
configured."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import httpx
from fastapi import FastAPI

from extender.api.routes import health, scheduler
from extender.elastic_quota import QuotaGate
from extender.metrics import ExtenderMetrics
from extender.node_loads import NodeLoadCache, decode_node
from extender.scheduling import LoadAwareExtender
from extender.settings import ExtenderSettings
from extender.state import ExtenderState
from extender.wire import Node
from shared.errors import ConfigError
from shared.kube.config import KubeEndpoint, in_cluster, load_endpoint
from shared.kube.watching import Reflector
from shared.load_model import LoadRules
from shared.pods import POD_DECODER, Pod
from shared.policy import DynamicSchedulerPolicy, default_policy, load_policy
from shared.quota_ledger import ELASTIC_QUOTAS_PATH, QUOTA_DECODER, QuotaLedger, QuotaObject
from shared.settings import flag_and_variable

logger = logging.getLogger(__name__)


def utc_now() -> datetime:
    return datetime.now(UTC)


def resolve_endpoint(settings: ExtenderSettings) -> KubeEndpoint | None:
    """The cluster to watch nodes in: the kubeconfig, else in-cluster, else none."""
    if settings.kubeconfig is not None:
        return load_endpoint(str(settings.kubeconfig), context=settings.kube_context)
    if in_cluster():
        return load_endpoint(None)
    return None


def _quota_gate(
    settings: ExtenderSettings, node_cache: NodeLoadCache, metrics: ExtenderMetrics
) -> QuotaGate:
    ledger = QuotaLedger(assume_seconds=settings.quota_assume_seconds)
    metrics.quota_pods.set_function(lambda: len(ledger.pods))
    metrics.quotas.labels("active").set_function(lambda: len(ledger.quotas))
    metrics.quotas.labels("invalid").set_function(lambda: len(ledger.invalid))
    return QuotaGate(ledger, allocatable=node_cache.allocatable_of, metrics=metrics)


def _quota_reflectors(client: httpx.AsyncClient, ledger: QuotaLedger) -> list[Reflector[Any]]:
    return [
        Reflector[Pod](
            client=client,
            path="/api/v1/pods",
            decode=POD_DECODER.decode,
            store=ledger.pod_store,
            name="pods",
        ),
        Reflector[QuotaObject](
            client=client,
            path=ELASTIC_QUOTAS_PATH,
            decode=QUOTA_DECODER.decode,
            store=ledger.quota_store,
            name="elasticquotas",
        ),
    ]


def create_app(
    settings: ExtenderSettings,
    *,
    policy: DynamicSchedulerPolicy | None = None,
    endpoint: KubeEndpoint | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    clock: Callable[[], datetime] = utc_now,
) -> FastAPI:
    """The extender app. ``endpoint`` (and a fake ``transport`` in tests) enable the node cache."""
    if policy is None:
        policy = load_policy(settings.policy) if settings.policy else default_policy()
    rules = LoadRules.from_policy(policy)
    metrics = ExtenderMetrics()
    node_cache = NodeLoadCache(rules) if endpoint is not None else None
    quota: QuotaGate | None = None
    if settings.elastic_quota:
        if node_cache is None:
            raise ConfigError(
                flag_and_variable("elastic_quota"), "", "needs --kubeconfig or in-cluster"
            )
        quota = _quota_gate(settings, node_cache, metrics)
    state = ExtenderState(
        settings=settings,
        policy=policy,
        clock=clock,
        metrics=metrics,
        extender=LoadAwareExtender(
            rules=rules, clock=clock, metrics=metrics, node_cache=node_cache, quota=quota
        ),
        node_cache=node_cache,
    )

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if endpoint is None or node_cache is None:
            logger.info("no cluster configured: answering full-node requests only")
            yield
            return
        async with endpoint.client(transport=transport) as client:
            state.node_reflector = Reflector[Node](
                client=client,
                path="/api/v1/nodes",
                decode=decode_node,
                store=node_cache,
                name="nodes",
            )
            reflectors: list[Reflector[Any]] = [state.node_reflector]
            if quota is not None:
                state.quota_reflectors = _quota_reflectors(client, quota.ledger)
                reflectors += state.quota_reflectors
            tasks = [asyncio.create_task(r.run(), name=f"watch {r.name}") for r in reflectors]
            try:
                yield
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

    app = FastAPI(
        title="loadsched extender",
        summary="Load-aware filter and prioritize for the stock kube-scheduler",
        lifespan=lifespan,
    )
    app.state.loadsched = state
    app.include_router(scheduler.router)
    app.include_router(health.router)
    return app
