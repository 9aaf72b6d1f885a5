"""Builds the extender app from its two rooms (:mod:`extender.scheduling` and
:mod:`extender.dispatch`), each step a named function: what the process serves, the policy,
the scheduling decisions, the dispatch configuration, the watches each room needs, and the
background tasks. The only module that imports both rooms."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
from fastapi import FastAPI
from starlette.types import Receive, Scope, Send

from extender import health, openapi
from extender.capacity import NodeCapacity
from extender.dispatch import building
from extender.dispatch.authorizing import Authorizer, Identity, load_static_tokens
from extender.dispatch.building import DISPATCH_EXTRA, TEMPLATE_LABEL
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
from extender.dispatch.templates import JobTemplate, load_templates
from extender.scheduling import explain_routes
from extender.scheduling import routes as scheduler
from extender.scheduling.binding import BINDS_AT_ONCE
from extender.scheduling.explain import Explainer
from extender.scheduling.metrics import ExtenderMetrics
from extender.scheduling.node_cache import NodeLoadCache, decode_node
from extender.scheduling.placements import PlacementIndex
from extender.scheduling.quota_gate import QuotaGate
from extender.scheduling.requeue import Requeuer, RequeueTracker
from extender.scheduling.verbs import LoadAwareExtender
from extender.scheduling.wire import Node
from extender.scheduling.wording import Wording
from extender.settings import ExtenderSettings
from extender.state import ROOMS, ExtenderState, Room
from extender.status import routes as status
from extender.status.rebalance import RebalanceStatusReader
from extender.status.report import StatusSources
from extender.status.traffic import CountAnswers, api_requests
from shared.errors import ConfigError
from shared.kube.config import KubeEndpoint, in_cluster, load_endpoint
from shared.kube.paths import CRONJOBS, ELASTIC_QUOTAS, JOBS, NODES, PODS
from shared.kube.retrying import RetryPolicy
from shared.kube.watching import FanOut, Reflector, Store
from shared.load_model import LoadRules
from shared.pods import POD_DECODER, Pod
from shared.policy import DynamicSchedulerPolicy, default_policy, load_policy
from shared.quota_ledger import QUOTA_DECODER, QuotaLedger, QuotaObject
from shared.settings import flag_and_variable
from shared.version import VERSION

logger = logging.getLogger(__name__)
CONNECTIONS = 5 + 10
"""The API client's connections: one per watch (nodes, pods, quotas, Jobs, CronJobs, each
holding its own for as long as it runs) and ten for the rest (reviews, Jobs created,
admissions written). Bindings have a client of their own, :data:`BINDS_AT_ONCE` connections."""


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


@dataclass(frozen=True)
class DispatchConfig:
    """What the dispatch room is started with, checked before anything is served."""

    templates: Mapping[str, JobTemplate]
    static_tokens: dict[str, Identity] | None


def resolve_endpoint(settings: ExtenderSettings) -> KubeEndpoint | None:
    """The cluster to watch: the kubeconfig, else in-cluster, else none."""
    if settings.kubeconfig is not None:
        return load_endpoint(str(settings.kubeconfig), context=settings.kube_context)
    if in_cluster():
        return load_endpoint(None)
    return None


def served_rooms(settings: ExtenderSettings) -> frozenset[Room]:
    """``--serve``, else scheduling plus dispatch when job templates are configured."""
    if settings.serve is None:
        return frozenset(("scheduling", "dispatch") if settings.job_templates else ("scheduling",))
    rooms = frozenset(room for room in ROOMS if room in settings.serve.split(","))
    if "dispatch" in rooms and settings.job_templates is None:
        raise ConfigError(flag_and_variable("job_templates"), "", "needed by --serve dispatch")
    if "dispatch" not in rooms and settings.job_templates is not None:
        logger.warning("--job-templates is ignored: this process serves %s only", settings.serve)
    if "scheduling" not in rooms and settings.elastic_quota:
        logger.warning("--elastic-quota is ignored: this process does not serve scheduling")
    return rooms


def configured_policy(settings: ExtenderSettings) -> DynamicSchedulerPolicy:
    return load_policy(settings.policy) if settings.policy else default_policy()


def needs_cluster(setting: str, node_cache: NodeLoadCache | None) -> NodeLoadCache:
    if node_cache is None:
        raise ConfigError(flag_and_variable(setting), "", "needs --kubeconfig or in-cluster")
    return node_cache


def quota_gate(
    settings: ExtenderSettings,
    rooms: frozenset[Room],
    ledger: QuotaLedger,
    node_cache: NodeLoadCache | None,
    metrics: ExtenderMetrics,
) -> QuotaGate | None:
    """The elastic-quota gate of filter and preempt, when enabled."""
    if not settings.elastic_quota or "scheduling" not in rooms:
        return None
    nodes = needs_cluster("elastic_quota", node_cache)
    metrics.quota_pods.set_function(lambda: len(ledger.pods))
    metrics.quota_assumed.set_function(lambda: ledger.assumed)
    metrics.quotas.labels("active").set_function(lambda: len(ledger.quotas))
    metrics.quotas.labels("invalid").set_function(lambda: len(ledger.invalid))
    return QuotaGate(ledger, allocatable=nodes.allocatable_of, metrics=metrics)


def dispatch_config(
    settings: ExtenderSettings, rooms: frozenset[Room], node_cache: NodeLoadCache | None
) -> DispatchConfig | None:
    """Templates and tokens of the dispatch room, read and checked at start-up."""
    if "dispatch" not in rooms or settings.job_templates is None:
        return None
    needs_cluster("job_templates", node_cache)
    if not building.cron_available():
        raise ConfigError(flag_and_variable("job_templates"), "", f"needs {DISPATCH_EXTRA}")
    templates = load_templates(settings.job_templates)
    static_tokens = None
    if settings.dispatch_auth == "static":
        if settings.dispatch_tokens_file is None:
            raise ConfigError(
                flag_and_variable("dispatch_tokens_file"), "", "needed by --dispatch-auth static"
            )
        static_tokens = load_static_tokens(settings.dispatch_tokens_file)
    elif settings.dispatch_auth == "none":
        logger.warning("/v1/jobs accepts requests from anyone (--dispatch-auth none)")
    return DispatchConfig(templates, static_tokens)


def api_authorizer(settings: ExtenderSettings) -> Authorizer:
    """Who may read the extender's own views (``/v1/status``, ``/v1/explain``): the dispatch
    API's authentication (``--dispatch-auth``); with ``static`` and no tokens file, no token
    is accepted. Sends its reviews once the cluster is reached (:meth:`Authorizer.attach`)."""
    tokens = None
    if settings.dispatch_auth == "static" and settings.dispatch_tokens_file is not None:
        tokens = load_static_tokens(settings.dispatch_tokens_file)
    return Authorizer(settings.dispatch_auth, static_tokens=tokens, retry=settings.kube_retry())


def explain_service(
    settings: ExtenderSettings,
    rooms: frozenset[Room],
    extender: LoadAwareExtender,
    access: Authorizer,
    clock: Callable[[], datetime],
) -> explain_routes.ExplainService | None:
    """``/v1/explain`` with the scheduling room (and a node cache); who may ask is decided as
    for dispatch (:func:`api_authorizer`)."""
    if "scheduling" not in rooms:
        return None
    if settings.dispatch_auth == "none":
        logger.warning("/v1/explain answers anyone (--dispatch-auth none)")
    return explain_routes.ExplainService(Explainer(extender, clock=clock), access)


def pod_watch(
    client: httpx.AsyncClient, stores: list[Store[Pod]], retry: RetryPolicy
) -> Reflector[Pod]:
    """One watch of every pod, feeding each room's index of them."""
    return Reflector[Pod](
        client=client,
        retry=retry,
        path=PODS.path(),
        decode=POD_DECODER.decode,
        store=FanOut[Pod](*stores),
        name="pods",
    )


def quota_watch(
    client: httpx.AsyncClient, ledger: QuotaLedger, retry: RetryPolicy
) -> Reflector[QuotaObject]:
    return Reflector[QuotaObject](
        client=client,
        retry=retry,
        path=ELASTIC_QUOTAS.path(),
        decode=QUOTA_DECODER.decode,
        store=ledger.quota_store,
        name="elasticquotas",
    )


def dispatched_watches(
    client: httpx.AsyncClient,
    jobs_store: JobStore,
    cronjobs_store: CronJobStore,
    retry: RetryPolicy,
) -> list[Reflector[Any]]:
    """The Jobs and CronJobs dispatch created (by their template label)."""
    return [
        Reflector[Job](
            client=client,
            retry=retry,
            path=JOBS.path(),
            decode=JOB_DECODER.decode,
            store=jobs_store,
            name="dispatched jobs",
            label_selector=TEMPLATE_LABEL,
        ),
        Reflector[CronJob](
            client=client,
            retry=retry,
            path=CRONJOBS.path(),
            decode=CRONJOB_DECODER.decode,
            store=cronjobs_store,
            name="dispatched cronjobs",
            label_selector=TEMPLATE_LABEL,
        ),
    ]


def start_dispatch(
    state: ExtenderState,
    config: DispatchConfig,
    client: httpx.AsyncClient,
    ledger: QuotaLedger,
    node_cache: NodeLoadCache,
) -> tuple[TemplatePodStore, list[Reflector[Any]]]:
    """The dispatcher, with its caches; returns its pod index and the watches feeding the rest."""
    jobs_store, pods, cronjobs_store = JobStore(), TemplatePodStore(), CronJobStore()
    retry = state.settings.kube_retry()
    state.dispatcher = Dispatcher(
        templates=config.templates,
        client=client,
        jobs=jobs_store,
        pods=pods,
        capacity=NodeCapacity(node_cache, ledger),
        clock=state.clock,
        retry_after=state.settings.dispatch_retry_after,
        kube_retry=retry,
        cronjobs=cronjobs_store,
        authorizer=Authorizer(
            state.settings.dispatch_auth,
            client=client,
            static_tokens=config.static_tokens,
            retry=retry,
        ),
    )
    return pods, dispatched_watches(client, jobs_store, cronjobs_store, retry)


def room_watches(
    state: ExtenderState,
    client: httpx.AsyncClient,
    ledger: QuotaLedger,
    *,
    quota: QuotaGate | None,
    dispatch: DispatchConfig | None,
) -> list[Reflector[Any]]:
    """Every watch besides nodes, each recorded under the rooms whose readiness waits on it.
    Pods are watched once when either room needs them: quotas count them, estimation and
    TargetLoadPacking read the recently bound ones, dispatch indexes the pods of its Jobs and
    what bound pods use per node."""
    retry = state.settings.kube_retry()
    pod_stores: list[Store[Pod]] = []
    scheduling: list[Reflector[Any]] = []
    dispatching: list[Reflector[Any]] = []
    if quota is not None or dispatch is not None:
        pod_stores.append(ledger.pod_store)
    placements = state.node_cache.placements if state.node_cache is not None else None
    if placements is not None:
        pod_stores.append(placements)
    if quota is not None:
        scheduling.append(quota_watch(client, ledger, retry))
    if dispatch is not None:
        pods, dispatched = start_dispatch(
            state, dispatch, client, ledger, needs_cluster("job_templates", state.node_cache)
        )
        pod_stores.append(pods)
        dispatching += dispatched
    if not pod_stores:
        return []
    pod_reflector = pod_watch(client, pod_stores, retry)
    if quota is not None or placements is not None:
        scheduling.insert(0, pod_reflector)
    if dispatch is not None:
        dispatching.insert(0, pod_reflector)
    state.watches = {"scheduling": scheduling, "dispatch": dispatching}
    return list(dict.fromkeys([*scheduling, *dispatching]))


def cluster_lifespan(
    state: ExtenderState,
    *,
    endpoint: KubeEndpoint | None,
    transport: httpx.AsyncBaseTransport | None,
    ledger: QuotaLedger,
    quota: QuotaGate | None,
    dispatch: DispatchConfig | None,
    requeuer: Requeuer | None,
    access: Authorizer,
    rebalance: RebalanceStatusReader | None = None,
) -> Callable[[FastAPI], contextlib.AbstractAsyncContextManager[None]]:
    """Runs the watches and background tasks while the app serves."""

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if endpoint is None or state.node_cache is None:
            logger.info("no cluster configured: answering full-node requests only")
            yield
            return
        async with (
            endpoint.client(transport=transport, max_connections=CONNECTIONS) as client,
            # the bindings' own connections: a burst of other calls cannot hold them up
            endpoint.client(transport=transport, max_connections=BINDS_AT_ONCE) as binding,
        ):
            access.attach(client)
            if rebalance is not None:
                rebalance.attach(client, state.settings.kube_retry())
            state.node_reflector = Reflector[Node](
                client=client,
                retry=state.settings.kube_retry(),
                path=NODES.path(),
                decode=decode_node,
                store=state.node_cache,
                name="nodes",
            )
            reflectors = [
                state.node_reflector,
                *room_watches(state, client, ledger, quota=quota, dispatch=dispatch),
            ]
            tasks = [asyncio.create_task(r.run(), name=f"watch {r.name}") for r in reflectors]
            if quota is not None:
                quota.attach(client, state.settings.kube_retry())
            state.extender.binder.attach(binding, state.settings.kube_retry())
            if state.explain is not None:
                state.explain.attach(client, state.settings.kube_retry())
            if requeuer is not None:
                tasks.append(asyncio.create_task(requeuer.run(client), name="requeue"))
            try:
                yield
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                state.extender.binder.detach()

    return lifespan


def assemble(
    state: ExtenderState,
    lifespan: Callable[[FastAPI], contextlib.AbstractAsyncContextManager[None]],
    *,
    status_sources: StatusSources,
    access: Authorizer,
) -> ExtenderApp:
    """The app: health always; the scheduler verbs and the dispatch routers per room."""
    app = ExtenderApp(
        title="loadsched extender",
        summary="Load-aware filter and prioritize for the stock kube-scheduler, and job dispatch",
        version=VERSION,
        lifespan=lifespan,
        # every endpoint is authenticated or public (tests/extender/test_public_routes.py):
        # the schema is served to authenticated callers by extender.openapi, no docs pages
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.loadsched = state
    app.include_router(health.router)
    if "scheduling" in state.rooms:
        app.scheduler_verbs = scheduler.SchedulerVerbs(state)
    app.include_router(jobs.router)
    app.include_router(cronjobs.router)
    app.include_router(explain_routes.router)
    app.state.status = status_sources
    app.state.api_authorizer = access
    app.include_router(status.router)
    app.include_router(openapi.router)
    app.add_middleware(CountAnswers, counter=api_requests(state.metrics.registry))
    return app


def create_app(
    settings: ExtenderSettings,
    *,
    policy: DynamicSchedulerPolicy | None = None,
    endpoint: KubeEndpoint | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    clock: Callable[[], datetime] = utc_now,
) -> ExtenderApp:
    """The extender app. ``endpoint`` (and a fake ``transport`` in tests) enable the node cache."""
    rooms = served_rooms(settings)
    policy = policy or configured_policy(settings)
    rules = LoadRules.from_policy(policy)
    metrics = ExtenderMetrics()
    wording = Wording(settings.filter_messages, rules.hot_limit)
    node_cache = NodeLoadCache(rules, wording) if endpoint is not None else None
    if node_cache is not None and rules.reads_pods and "scheduling" in rooms:
        node_cache.placements = PlacementIndex(rules, clock=clock, on_change=node_cache.touch)
    elif rules.reads_pods and "scheduling" in rooms:
        logger.warning(
            "spec.estimation and targetLoadPacking need the pod watch (--kubeconfig or "
            "in-cluster): pods bound since a sample are not counted"
        )
    ledger = QuotaLedger(assume_seconds=settings.quota_assume_seconds, shared_admission=True)
    quota = quota_gate(settings, rooms, ledger, node_cache, metrics)
    dispatch = dispatch_config(settings, rooms, node_cache)
    tracker = (
        RequeueTracker()
        if node_cache is not None and settings.requeue and "scheduling" in rooms
        else None
    )
    access = api_authorizer(settings)
    state = ExtenderState(
        settings=settings,
        policy=policy,
        clock=clock,
        metrics=metrics,
        rooms=rooms,
        extender=LoadAwareExtender(
            rules=rules,
            clock=clock,
            metrics=metrics,
            node_cache=node_cache,
            quota=quota,
            requeue=tracker,
            defer=lambda call: asyncio.get_running_loop().call_soon(call),
            wording=wording,
            rejections=settings.filter_rejections,
        ),
        node_cache=node_cache,
    )
    if node_cache is not None:
        state.explain = explain_service(settings, rooms, state.extender, access, clock)
    requeuer = None
    if tracker is not None and node_cache is not None:
        requeuer = Requeuer(
            tracker=tracker,
            node_cache=node_cache,
            quota=quota,
            fail_closed=rules.fail_closed,
            metrics=metrics,
            clock=clock,
            period=settings.requeue_period,
            min_interval=settings.requeue_min_interval,
            retry=settings.kube_retry(),
        )
    rebalance = RebalanceStatusReader(settings.rebalance_namespace)
    lifespan = cluster_lifespan(
        state,
        endpoint=endpoint,
        transport=transport,
        ledger=ledger,
        quota=quota,
        dispatch=dispatch,
        requeuer=requeuer,
        access=access,
        rebalance=rebalance,
    )
    sources = StatusSources(
        rules=rules,
        clock=clock,
        node_cache=node_cache,
        ledger=ledger if quota is not None else None,
        dispatcher=lambda: state.dispatcher,
        readiness=state.readiness,
        rebalance=rebalance,
    )
    return assemble(state, lifespan, status_sources=sources, access=access)
