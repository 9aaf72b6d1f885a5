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
from starlette.types import Receive, Scope, Send

from extender import health
from extender.dispatch.authorizing import Authorizer, load_static_tokens
from extender.dispatch.building import TEMPLATE_LABEL
from extender.dispatch.caches import (
    CRONJOB_DECODER,
    JOB_DECODER,
    CronJob,
    CronJobStore,
    Job,
    JobStore,
    TemplatePodStore,
)
from extender.dispatch.dispatcher import Dispatcher
from extender.dispatch.routes import cronjobs, jobs
from extender.dispatch.templates import load_templates
from extender.scheduling import routes as scheduler
from extender.scheduling.metrics import ExtenderMetrics
from extender.scheduling.node_view import NodeLoadCache, decode_node
from extender.scheduling.quota_gate import QuotaGate
from extender.scheduling.requeue import Requeuer, RequeueTracker
from extender.scheduling.verbs import LoadAwareExtender
from extender.scheduling.wire import Node
from extender.settings import ExtenderSettings
from extender.state import ExtenderState
from shared.errors import ConfigError
from shared.kube.config import KubeEndpoint, in_cluster, load_endpoint
from shared.kube.watching import FanOut, Reflector, Store
from shared.load_model import LoadRules
from shared.pods import POD_DECODER, Pod
from shared.policy import DynamicSchedulerPolicy, default_policy, load_policy
from shared.quota_ledger import ELASTIC_QUOTAS_PATH, QUOTA_DECODER, QuotaLedger, QuotaObject
from shared.settings import flag_and_variable

logger = logging.getLogger(__name__)


def utc_now() -> datetime:
    return datetime.now(UTC)


class ExtenderApp(FastAPI):
    """The extender's FastAPI app, with the scheduler verbs served ahead of it
    (:mod:`extender.scheduling.routes`)."""

    scheduler_verbs: scheduler.SchedulerVerbs | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        verbs = self.scheduler_verbs
        if verbs is not None and scope["type"] == "http" and scope["path"] in scheduler.PATHS:
            await verbs(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


def resolve_endpoint(settings: ExtenderSettings) -> KubeEndpoint | None:
    """The cluster to watch nodes in: the kubeconfig, else in-cluster, else none."""
    if settings.kubeconfig is not None:
        return load_endpoint(str(settings.kubeconfig), context=settings.kube_context)
    if in_cluster():
        return load_endpoint(None)
    return None


def _quota_gate(
    ledger: QuotaLedger, node_cache: NodeLoadCache, metrics: ExtenderMetrics
) -> QuotaGate:
    metrics.quota_pods.set_function(lambda: len(ledger.pods))
    metrics.quotas.labels("active").set_function(lambda: len(ledger.quotas))
    metrics.quotas.labels("invalid").set_function(lambda: len(ledger.invalid))
    return QuotaGate(ledger, allocatable=node_cache.allocatable_of, metrics=metrics)


def _watches(
    client: httpx.AsyncClient,
    ledger: QuotaLedger,
    *,
    quotas: bool,
    dispatch: tuple[JobStore, TemplatePodStore, CronJobStore] | None,
) -> list[Reflector[Any]]:
    """The watches besides nodes: every pod (what nodes and namespaces use, and the pods of
    dispatched Jobs), ElasticQuotas, and dispatched Jobs."""
    pod_stores: list[Store[Pod]] = [ledger.pod_store]
    if dispatch is not None:
        pod_stores.append(dispatch[1])
    reflectors: list[Reflector[Any]] = [
        Reflector[Pod](
            client=client,
            path="/api/v1/pods",
            decode=POD_DECODER.decode,
            store=FanOut[Pod](*pod_stores),
            name="pods",
        )
    ]
    if quotas:
        reflectors.append(
            Reflector[QuotaObject](
                client=client,
                path=ELASTIC_QUOTAS_PATH,
                decode=QUOTA_DECODER.decode,
                store=ledger.quota_store,
                name="elasticquotas",
            )
        )
    if dispatch is not None:
        reflectors.append(
            Reflector[Job](
                client=client,
                path="/apis/batch/v1/jobs",
                decode=JOB_DECODER.decode,
                store=dispatch[0],
                name="dispatched jobs",
                label_selector=TEMPLATE_LABEL,
            )
        )
        reflectors.append(
            Reflector[CronJob](
                client=client,
                path="/apis/batch/v1/cronjobs",
                decode=CRONJOB_DECODER.decode,
                store=dispatch[2],
                name="dispatched cronjobs",
                label_selector=TEMPLATE_LABEL,
            )
        )
    return reflectors


def _needs_cluster(setting: str, node_cache: NodeLoadCache | None) -> NodeLoadCache:
    if node_cache is None:
        raise ConfigError(flag_and_variable(setting), "", "needs --kubeconfig or in-cluster")
    return node_cache


def create_app(
    settings: ExtenderSettings,
    *,
    policy: DynamicSchedulerPolicy | None = None,
    endpoint: KubeEndpoint | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    clock: Callable[[], datetime] = utc_now,
) -> ExtenderApp:
    """The extender app. ``endpoint`` (and a fake ``transport`` in tests) enable the node cache."""
    if policy is None:
        policy = load_policy(settings.policy) if settings.policy else default_policy()
    rules = LoadRules.from_policy(policy)
    metrics = ExtenderMetrics()
    node_cache = NodeLoadCache(rules) if endpoint is not None else None
    ledger = QuotaLedger(assume_seconds=settings.quota_assume_seconds)
    quota: QuotaGate | None = None
    if settings.elastic_quota:
        quota = _quota_gate(ledger, _needs_cluster("elastic_quota", node_cache), metrics)
    templates = load_templates(settings.job_templates) if settings.job_templates else None
    static_tokens = None
    if templates is not None:
        _needs_cluster("job_templates", node_cache)
        if settings.dispatch_auth == "static":
            if settings.dispatch_tokens_file is None:
                raise ConfigError(
                    flag_and_variable("dispatch_tokens_file"),
                    "",
                    "needed by --dispatch-auth static",
                )
            static_tokens = load_static_tokens(settings.dispatch_tokens_file)
        elif settings.dispatch_auth == "none":
            logger.warning("/v1/jobs accepts requests from anyone (--dispatch-auth none)")
    tracker = RequeueTracker() if node_cache is not None and settings.requeue else None
    state = ExtenderState(
        settings=settings,
        policy=policy,
        clock=clock,
        metrics=metrics,
        extender=LoadAwareExtender(
            rules=rules,
            clock=clock,
            metrics=metrics,
            node_cache=node_cache,
            quota=quota,
            requeue=tracker,
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
            dispatch = None
            if templates is not None:
                dispatch = (JobStore(), TemplatePodStore(), CronJobStore())
                state.dispatcher = Dispatcher(
                    templates=templates,
                    client=client,
                    jobs=dispatch[0],
                    pods=dispatch[1],
                    ledger=ledger,
                    nodes=node_cache,
                    clock=clock,
                    retry_after=settings.dispatch_retry_after,
                    cronjobs=dispatch[2],
                    authorizer=Authorizer(
                        settings.dispatch_auth, client=client, static_tokens=static_tokens
                    ),
                )
            if quota is not None or dispatch is not None:
                state.watches = _watches(
                    client, ledger, quotas=quota is not None, dispatch=dispatch
                )
                reflectors += state.watches
            tasks = [asyncio.create_task(r.run(), name=f"watch {r.name}") for r in reflectors]
            if tracker is not None:
                requeuer = Requeuer(
                    tracker=tracker,
                    node_cache=node_cache,
                    quota=quota,
                    fail_closed=rules.fail_closed,
                    metrics=metrics,
                    clock=clock,
                    period=settings.requeue_period,
                    min_interval=settings.requeue_min_interval,
                )
                tasks.append(asyncio.create_task(requeuer.run(client), name="requeue"))
            try:
                yield
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

    app = ExtenderApp(
        title="loadsched extender",
        summary="Load-aware filter and prioritize for the stock kube-scheduler",
        lifespan=lifespan,
    )
    app.state.loadsched = state
    app.scheduler_verbs = scheduler.SchedulerVerbs(state)
    app.include_router(health.router)
    app.include_router(jobs.router)
    app.include_router(cronjobs.router)
    return app
