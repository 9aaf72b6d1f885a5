"""One sync round: one PromQL query per metric for all nodes, then at most one merge patch
per node carrying every value due (and the hot value when due)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from annotator.matching import match_series
from annotator.metrics import AnnotatorMetrics
from annotator.objects import NodeStore
from annotator.patching import NodePatcher
from annotator.sync.hot_value import BindingWindows
from annotator.sync.prometheus import PrometheusClient, PrometheusError
from shared.annotations import format_timestamp, stamped_hot_value, stamped_metric
from shared.errors import APIError, APIUnreachableError
from shared.policy import HOT_VALUE_KEY, DynamicSchedulerPolicy

logger = logging.getLogger(__name__)

DEFAULT_SCALE = 100.0
"""Recording rules give percentages."""


@dataclass(frozen=True)
class MetricSync:
    name: str
    promql: str
    scale: float
    period: timedelta

    @classmethod
    def all_from(cls, policy: DynamicSchedulerPolicy) -> list[MetricSync]:
        return [
            cls(s.name, s.promql or s.name, s.scale or DEFAULT_SCALE, s.period)
            for s in policy.spec.sync_policy
        ]


@dataclass
class RoundReport:
    queries: int = 0
    writes: int = 0
    failed_metrics: list[str] = field(default_factory=list)
    missing: dict[str, list[str]] = field(default_factory=dict)
    """Metric → the target nodes it had no series for."""
    annotations: dict[str, dict[str, str | None]] = field(default_factory=dict)


class AnnotationSync:
    def __init__(
        self,
        *,
        policy: DynamicSchedulerPolicy,
        prometheus: PrometheusClient,
        nodes: NodeStore,
        patcher: NodePatcher,
        windows: BindingWindows,
        metrics: AnnotatorMetrics,
        clock: Callable[[], datetime],
        may_write: Callable[[], bool],
        concurrency: int = 16,
        dry_run: bool = False,
        timer: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._zone = policy.zone
        self._timer = timer
        self._prometheus = prometheus
        self._nodes = nodes
        self._patcher = patcher
        self.windows = windows
        self._metrics = metrics
        self._clock = clock
        self._may_write = may_write
        self._concurrency = concurrency
        self._patches = metrics.patches.labels("annotations")
        self._dry_run = dry_run
        self._hot_written: dict[str, int] = {}

    async def _query(self, metric: MetricSync) -> list[tuple[str, float]] | None:
        started = self._timer()
        try:
            series = await self._prometheus.query(metric.promql)
        except PrometheusError as e:
            self._metrics.query_errors.labels(metric.name, "error").inc()
            logger.warning("metric/%s: %s; nothing written, retrying next period", metric.name, e)
            return None
        finally:
            self._metrics.query_seconds.labels(metric.name).observe(self._timer() - started)
        if not series:
            self._metrics.query_errors.labels(metric.name, "empty").inc()
            logger.warning(
                "metric/%s: query %r returned no series; nothing written",
                metric.name,
                metric.promql,
            )
            return None
        return series

    async def sync(
        self,
        metric_syncs: Sequence[MetricSync],
        *,
        with_hot: bool = False,
        only: Collection[str] | None = None,
    ) -> RoundReport:
        """Query every metric once, then write each node's due values in one patch."""
        started, now = self._timer(), self._clock()
        report = RoundReport(queries=len(metric_syncs))
        results = await asyncio.gather(*(self._query(metric) for metric in metric_syncs))
        index, names = self._nodes.index(), self._nodes.names()
        targets = set(only) if only is not None else set(names)
        writes: dict[str, dict[str, str | None]] = {}
        stamp = format_timestamp(now, self._zone)  # every value of the round is stamped now
        for metric, series in zip(metric_syncs, results, strict=True):
            if series is None:
                report.failed_metrics.append(metric.name)
                continue
            matched = match_series(series, index, scale=metric.scale)
            missing = [n for n in names if n not in matched.values]
            if absent := [n for n in missing if n in targets]:
                report.missing[metric.name] = absent
            self._metrics.nodes_matched.labels(metric.name).set(len(matched.values))
            self._metrics.nodes_unmatched.labels(metric.name).set(len(missing))
            self._metrics.series_unmatched.labels(metric.name).set(len(matched.unmatched))
            if missing:
                logger.warning(
                    "metric/%s: %d node(s) have no series: %s",
                    metric.name,
                    len(missing),
                    ", ".join(missing[:10]),
                )
            for node, value in matched.values.items():
                if node in targets:
                    writes.setdefault(node, {})[metric.name] = stamped_metric(value, stamp)
            self._metrics.last_success.labels(metric.name).set(now.timestamp())
        if with_hot:
            for node, encoded in self.hot_values(targets, now).items():
                writes.setdefault(node, {})[HOT_VALUE_KEY] = encoded
        report.annotations = writes
        report.writes = await self.write(writes)
        self._round_done("metrics", started, every_node=only is None)
        return report

    def stopped_leading(self) -> None:
        """The loops stopped (leadership lost): export no last-round figures."""
        self._metrics.clear_round_gauges()

    def hot_values(self, nodes: Collection[str], now: datetime) -> dict[str, str]:
        """Encoded hot values for ``nodes`` that have bindings or were last written non-zero."""
        out: dict[str, str] = {}
        stamp = format_timestamp(now, self._zone)
        for node in nodes:
            value = self.windows.hot_value(node, now)
            if value or self._hot_written.get(node):
                out[node] = stamped_hot_value(value, stamp)
        return out

    async def sync_hot_values(self, nodes: Collection[str] | None = None) -> int:
        """Recompute and write hot values (for ``nodes``, or every node that needs one)."""
        started, now = self._timer(), self._clock()
        self.windows.prune(now)
        candidates = (
            set(nodes) if nodes is not None else self.windows.nodes() | set(self._hot_written)
        )
        writes: dict[str, dict[str, str | None]] = {
            node: {HOT_VALUE_KEY: value} for node, value in self.hot_values(candidates, now).items()
        }
        self._metrics.bindings.set(len(self.windows))
        written = await self.write(writes)
        self._round_done("hot", started, every_node=nodes is None)
        return written

    def _round_done(self, kind: str, started: float, *, every_node: bool) -> None:
        self._metrics.rounds.labels(kind).inc()
        scope = "all" if every_node else "some"
        self._metrics.round_seconds.labels(kind, scope).observe(self._timer() - started)

    async def write(self, writes: dict[str, dict[str, str | None]]) -> int:
        """One patch per node from a fixed pool of writers, only while this replica may write."""
        pending = iter(writes.items())
        written = 0

        async def writer() -> None:
            nonlocal written
            for node, values in pending:
                if not self._may_write():
                    return
                # awaited first: ``written += await ...`` would read the count before the
                # write and drop what the other writers added meanwhile
                done = await self._write_one(node, values)
                written += done

        await asyncio.gather(*(writer() for _ in range(min(self._concurrency, len(writes)))))
        return written

    async def _write_one(self, node: str, annotations: dict[str, str | None]) -> int:
        if self._dry_run:
            logger.info("node/%s: dry run, would write %s", node, annotations)
            return 0
        try:
            written = await self._patcher.patch_annotations(node, annotations)
        except (APIError, APIUnreachableError) as e:
            self._metrics.patch_errors.inc()
            logger.error("node/%s: patch failed: %s", node, e)
            return 0
        if written:
            self._patches.inc()
            if HOT_VALUE_KEY in annotations:
                text = annotations[HOT_VALUE_KEY] or "0,"
                self._hot_written[node] = int(text.split(",", 1)[0])
        return int(written)
