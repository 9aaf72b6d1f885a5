"""Wires the annotator: watches, leader election, sync loops and the health server."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

import httpx
import uvicorn

from annotator.health import health_app
from annotator.leader import LeaderElector
from annotator.metrics import AnnotatorMetrics
from annotator.objects import NODE_DECODER, Node, NodeStore
from annotator.patching import NodePatcher, kube_client
from annotator.quota.controller import QuotaController, WaitingPods
from annotator.rebalance.controller import Rebalancer
from annotator.rebalance.nodes import NodeFacts
from annotator.rebalance.pods import BoundPods
from annotator.recording import EventRecorder
from annotator.settings import AnnotatorSettings
from annotator.sync.bindings import POD_DECODER, BindingStore, Pod
from annotator.sync.hot_value import BindingWindows
from annotator.sync.prometheus import PrometheusAuth, PrometheusClient
from annotator.sync.rounds import AnnotationSync, MetricSync
from annotator.sync.runner import Runner
from shared.errors import ConfigError
from shared.kube.config import KubeEndpoint, load_endpoint
from shared.kube.paths import ELASTIC_QUOTAS, NODES, PODS
from shared.kube.watching import FanOut, Reflector, Store
from shared.policy import DynamicSchedulerPolicy, default_policy, load_policy
from shared.quota_ledger import QUOTA_DECODER, QuotaLedger, QuotaObject
from shared.rules import LoadRules
from shared.settings import flag_and_variable

logger = logging.getLogger(__name__)


def utc_now() -> datetime:
    return datetime.now(UTC)


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: the annotator shuts down in its own order."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@dataclass
class Annotator:
    settings: AnnotatorSettings
    policy: DynamicSchedulerPolicy
    kube: httpx.AsyncClient
    prometheus: PrometheusClient
    clock: Callable[[], datetime] = utc_now
    metrics: AnnotatorMetrics = field(default_factory=AnnotatorMetrics)

    def __post_init__(self) -> None:
        self.metric_syncs = MetricSync.all_from(self.policy)
        self.elector = self._leader_elector()
        self.nodes = NodeStore(on_new=lambda names: self.runner.nodes_added(names))
        self.sync = self._annotation_sync(hot_value_windows(self.policy))
        self.runner = Runner(self.sync, self.metric_syncs)
        self.node_reflector = self._node_watch()
        bindings = BindingStore(
            self.sync.windows, clock=self.clock, on_change=self.runner.bindings_changed
        )
        self.quotas: QuotaController | None = None
        self.quota_reflector: Reflector[QuotaObject] | None = None
        self.rebalancer: Rebalancer | None = None
        pod_stores: list[Store[Pod]] = [bindings]
        # it reads the reservations too: the extender's admissions and its own promises
        ledger = QuotaLedger(shared_admission=True) if self.settings.elastic_quota else None
        if self.policy.spec.rebalance.enabled and not self.settings.once:
            self.rebalancer, bound = self._rebalancer(ledger)
            pod_stores.append(bound)
        if ledger is None:
            self.pod_reflector = self._bound_pod_watch(FanOut[Pod](*pod_stores))
            return
        self.quotas = self._quota_controller(ledger)
        # every pod: bound ones for hot values and quota use, unschedulable ones for reclaim
        self.pod_reflector = self._pod_watch(
            FanOut[Pod](*pod_stores, ledger.pod_store, self.quotas.waiting)
        )
        self.quota_reflector = self._quota_watch(ledger)

    # -- the wiring, one piece each -------------------------------------------------------------

    def _leader_elector(self) -> LeaderElector | None:
        """The Lease election, unless disabled or running one round (``--once``)."""
        if not self.settings.leader_elect or self.settings.once:
            return None
        return LeaderElector(
            self.kube,
            name=self.settings.lease_name,
            namespace=self.settings.lease_namespace,
            identity=self.settings.identity,
            on_change=lambda lead: self.metrics.leader.set(int(lead)),
            retry=self.settings.kube_retry(),
        )

    def _annotation_sync(self, windows: BindingWindows) -> AnnotationSync:
        """Queries Prometheus and writes node annotations (only while this replica leads)."""
        return AnnotationSync(
            policy=self.policy,
            prometheus=self.prometheus,
            nodes=self.nodes,
            patcher=NodePatcher(self.kube, retry=self.settings.kube_retry()),
            windows=windows,
            metrics=self.metrics,
            clock=self.clock,
            may_write=self.may_write,
            concurrency=self.settings.write_concurrency,
            dry_run=self.settings.dry_run,
        )

    def _node_watch(self) -> Reflector[Node]:
        return Reflector[Node](
            client=self.kube,
            path=NODES.path(),
            decode=NODE_DECODER.decode,
            store=self.nodes,
            name="nodes",
            retry=self.settings.kube_retry(),
        )

    def _bound_pod_watch(self, store: FanOut[Pod]) -> Reflector[Pod]:
        """Without elastic quotas only bound pods matter (hot values, the rebalancer)."""
        return Reflector[Pod](
            client=self.kube,
            path=PODS.path(),
            decode=POD_DECODER.decode,
            store=store,
            name="bound pods",
            field_selector="spec.nodeName!=",
            retry=self.settings.kube_retry(),
        )

    def _pod_watch(self, store: FanOut[Pod]) -> Reflector[Pod]:
        return Reflector[Pod](
            client=self.kube,
            path=PODS.path(),
            decode=POD_DECODER.decode,
            store=store,
            name="pods",
            retry=self.settings.kube_retry(),
        )

    def _quota_controller(self, ledger: QuotaLedger) -> QuotaController:
        """``status.used`` of every ElasticQuota and reclaim of lent capacity (leader only)."""
        return QuotaController(
            kube=self.kube,
            ledger=ledger,
            nodes=self.nodes,
            waiting=WaitingPods(on_change=lambda: self._wake_quotas()),
            recorder=EventRecorder(
                self.kube, instance=self.settings.identity, retry=self.settings.kube_retry()
            ),
            metrics=self.metrics,
            dry_run=self.settings.dry_run,
            evictions_per_minute=self.settings.evictions_per_minute,
            grace_seconds=self.settings.eviction_grace_seconds,
            retry=self.settings.kube_retry(),
        )

    def _rebalancer(self, ledger: QuotaLedger | None) -> tuple[Rebalancer, BoundPods]:
        """Moves pods off nodes that stay overloaded (leader only, ``spec.rebalance``); with
        elastic quotas, only pods whose replacement the pod's quota admits."""
        rules = LoadRules.from_policy(self.policy)
        bound = BoundPods(rules, self.clock)
        nodes = self.nodes

        def node_facts() -> dict[str, NodeFacts]:
            return {
                name: NodeFacts(nodes.annotations.get(name, {}), nodes.sizes[name], fit)
                for name, fit in nodes.capacity.items()
                if name in nodes.sizes
            }

        rebalancer = Rebalancer(
            kube=self.kube,
            policy=self.policy,
            rules=rules,
            node_facts=node_facts,
            bound_pods=bound.on,
            usage=self.prometheus.query_pods,
            recorder=EventRecorder(
                self.kube, instance=self.settings.identity, retry=self.settings.kube_retry()
            ),
            metrics=self.metrics,
            quota_admits=ledger.admit if ledger is not None else None,
            status_namespace=self.settings.lease_namespace,
            dry_run=self.settings.dry_run,
            clock=self.clock,
            retry=self.settings.kube_retry(),
        )
        return rebalancer, bound

    def _quota_watch(self, ledger: QuotaLedger) -> Reflector[QuotaObject]:
        return Reflector[QuotaObject](
            client=self.kube,
            path=ELASTIC_QUOTAS.path(),
            decode=QUOTA_DECODER.decode,
            store=FanOut[QuotaObject](ledger.quota_store, _Nudge(self._wake_quotas)),
            name="elasticquotas",
            retry=self.settings.kube_retry(),
        )

    # -- running --------------------------------------------------------------------------------

    def _wake_quotas(self) -> None:
        if self.quotas is not None:
            self.quotas.wake.set()

    async def _leader_work(self) -> None:
        loops = [self.runner.run()]
        if self.quotas is not None:
            loops.append(self.quotas.run(self.settings.quota_period))
        if self.rebalancer is not None:
            loops.append(self.rebalancer.run())
        await asyncio.gather(*loops)

    def may_write(self) -> bool:
        return self.elector is None or self.elector.is_leader

    def readiness(self) -> tuple[bool, str]:
        if not self.node_reflector.synced.is_set():
            return False, "not ready: node cache has not completed its first list"
        if self.quota_reflector is not None and not (
            self.quota_reflector.synced.is_set() and self.pod_reflector.synced.is_set()
        ):
            return False, "not ready: pods and elasticquotas not listed yet"
        role = "leader" if self.may_write() else "standby"
        return True, f"ready: {role}, {len(self.nodes.names())} nodes"

    async def run_once(self) -> int:
        await self.node_reflector.list_once()
        await self.pod_reflector.list_once()
        report = await self.sync.sync(self.metric_syncs, with_hot=True)
        logger.info("one round: %d queries, %d node writes", report.queries, report.writes)
        return 1 if report.failed_metrics else 0

    async def lead(self) -> None:
        """Run the loops while leading; stop them the moment leadership is lost."""
        while True:
            while not self.may_write():
                await _changed(self.elector)
            work = asyncio.create_task(self._leader_work(), name="annotator-loops")
            while self.may_write() and not work.done():
                await _changed(self.elector)
            work.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await work

    async def run(self, stop: asyncio.Event) -> None:
        tasks = [
            asyncio.create_task(self.node_reflector.run(), name="node-watch"),
            asyncio.create_task(self.pod_reflector.run(), name="pod-watch"),
        ]
        if self.quota_reflector is not None:
            tasks.append(asyncio.create_task(self.quota_reflector.run(), name="quota-watch"))
        server: _Server | None = None
        if self.settings.port:
            config = uvicorn.Config(
                health_app(self.metrics, self.readiness),
                host=self.settings.host,
                port=self.settings.port,
                log_config=None,
                access_log=False,
                lifespan="off",
            )
            server = _Server(config)
            tasks.append(asyncio.create_task(server.serve(), name="health"))
        await self.node_reflector.synced.wait()
        if self.elector is not None:
            tasks.append(asyncio.create_task(self.elector.run(), name="lease"))
        tasks.append(asyncio.create_task(self.lead(), name="lead"))
        await stop.wait()
        logger.info("shutting down")
        for task in reversed(tasks):
            if task.get_name() != "health":
                task.cancel()
        await asyncio.gather(
            *[t for t in tasks if t.get_name() != "health"], return_exceptions=True
        )
        if self.elector is not None:
            await self.elector.release()
        if server is not None:
            server.should_exit = True
        await asyncio.gather(*tasks, return_exceptions=True)


class _Nudge:
    """A store that only says something changed."""

    def __init__(self, wake: Callable[[], None]) -> None:
        self._wake = wake

    def replace(self, items: object) -> None:  # noqa: ARG002 - the Store protocol
        self._wake()

    def apply(self, event: str, item: object) -> None:  # noqa: ARG002
        self._wake()


async def _changed(elector: LeaderElector | None, poll: float = 0.5) -> None:
    """Wait for a leadership change, or ``poll`` seconds (the renew deadline can pass silently)."""
    if elector is None:
        await asyncio.sleep(3600)
        return
    elector.leading_changed.clear()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(elector.leading_changed.wait(), timeout=poll)


def hot_value_windows(policy: DynamicSchedulerPolicy) -> BindingWindows:
    """Bindings per node in one sliding window per ``hotValue`` entry of the policy."""
    return BindingWindows(policy.spec.hot_value)


def policy_of(settings: AnnotatorSettings) -> DynamicSchedulerPolicy:
    """The policy file given, else crane's defaults."""
    return load_policy(settings.policy) if settings.policy else default_policy()


def kube_endpoint(settings: AnnotatorSettings) -> KubeEndpoint:
    """The API server from the kubeconfig given (or in-cluster / the default kubeconfig)."""
    return load_endpoint(
        str(settings.kubeconfig) if settings.kubeconfig else None, context=settings.kube_context
    )


def prometheus_client(
    settings: AnnotatorSettings, transport: httpx.AsyncBaseTransport | None = None
) -> PrometheusClient:
    if settings.prometheus_url is None:  # load_settings guarantees one
        raise ConfigError(flag_and_variable("prometheus_url"), "", "required")
    auth = PrometheusAuth(
        bearer_token_file=settings.prometheus_bearer_token_file,
        username=settings.prometheus_username,
        password_file=settings.prometheus_password_file,
        ca_file=settings.prometheus_ca_file,
        insecure_skip_verify=settings.prometheus_insecure_skip_verify,
    )
    return PrometheusClient(
        settings.prometheus_url,
        auth=auth,
        timeout=settings.prometheus_timeout,
        transport=transport,
    )


def stop_on_signals() -> asyncio.Event:
    """An event set by SIGTERM or SIGINT (the annotator shuts down in its own order)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def serve(
    settings: AnnotatorSettings,
    *,
    endpoint: KubeEndpoint | None = None,
    kube_transport: httpx.AsyncBaseTransport | None = None,
    prometheus_transport: httpx.AsyncBaseTransport | None = None,
) -> int:
    policy = policy_of(settings)
    if endpoint is None:
        endpoint = kube_endpoint(settings)
    prometheus = prometheus_client(settings, prometheus_transport)
    # Writes, the lease, the watches and the quota controller share the client.
    connections = settings.write_concurrency + 6
    async with kube_client(
        endpoint,
        max_connections=connections,
        transport=kube_transport,
        direct=settings.kube_direct,
    ) as kube:
        try:
            annotator = Annotator(settings, policy, kube, prometheus)
            if settings.once:
                return await annotator.run_once()
            await annotator.run(stop_on_signals())
            return 0
        finally:
            await prometheus.aclose()
