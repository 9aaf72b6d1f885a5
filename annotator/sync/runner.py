"""The annotator's loops, run only while this replica leads:

- each metric on its own period (first round at once); metrics due together share one patch;
- nodes that appear between ticks get every metric at once, from one query per metric;
- hot values soon after bindings change them (debounced), and every minute while non-zero.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from annotator.sync.rounds import AnnotationSync, MetricSync, RoundReport

logger = logging.getLogger(__name__)

HOT_DEBOUNCE = 1.0
HOT_REFRESH = 60.0
DUE_SLACK = 0.5
"""Metrics due within this many seconds of each other are synced in the same round."""
FAILED_RETRY = 30.0
"""A metric whose query failed is tried again after this long, not a whole period later."""


class Runner:
    def __init__(
        self,
        sync: AnnotationSync,
        metric_syncs: list[MetricSync],
        *,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        hot_debounce: float = HOT_DEBOUNCE,
        hot_refresh: float = HOT_REFRESH,
    ) -> None:
        self._hot_debounce = hot_debounce
        self._hot_refresh = hot_refresh
        self.sync = sync
        self.metric_syncs = metric_syncs
        self._monotonic = monotonic
        self._sleep = sleep
        self._new_nodes: set[str] = set()
        self._hot_nodes: set[str] = set()
        self._wake_new = asyncio.Event()
        self._wake_hot = asyncio.Event()

    # Called from the watch stores.
    def nodes_added(self, names: set[str]) -> None:
        self._new_nodes |= names
        self._wake_new.set()

    def bindings_changed(self, nodes: set[str]) -> None:
        self._hot_nodes |= nodes
        self._wake_hot.set()

    async def metric_loop(self) -> None:
        """Every metric on its period. A metric whose query failed, or that left nodes
        without a value, is tried again after ``FAILED_RETRY`` (for those nodes only), not a
        whole period later."""
        due = dict.fromkeys((metric.name for metric in self.metric_syncs), self._monotonic())
        retry: dict[str, tuple[float, set[str] | None]] = {}
        by_name = {metric.name: metric for metric in self.metric_syncs}
        while True:
            now = self._monotonic()
            ready = [by_name[name] for name, at in due.items() if at <= now + DUE_SLACK]
            if ready:
                report = await self.sync.sync(ready, with_hot=True)
                self._log(ready, report)
                finished = self._monotonic()
                for metric in ready:
                    due[metric.name] = max(
                        due[metric.name] + metric.period.total_seconds(), finished
                    )
                    self._plan_retry(retry, metric, report, finished)
                continue
            retries = [
                (name, nodes) for name, (at, nodes) in retry.items() if at <= now + DUE_SLACK
            ]
            if retries:
                for name, nodes in retries:
                    metric = by_name[name]
                    report = await self.sync.sync([metric], only=nodes)
                    self._log([metric], report, nodes)
                    self._plan_retry(retry, metric, report, self._monotonic())
                continue
            wake = min([*due.values(), *(at for at, _ in retry.values())])
            await self._sleep(wake - now)

    def _plan_retry(
        self,
        retry: dict[str, tuple[float, set[str] | None]],
        metric: MetricSync,
        report: RoundReport,
        now: float,
    ) -> None:
        delay = min(metric.period.total_seconds(), FAILED_RETRY)
        if metric.name in report.failed_metrics:
            retry[metric.name] = (now + delay, None)
        elif report.missing.get(metric.name):
            retry[metric.name] = (now + delay, set(report.missing[metric.name]))
        else:
            retry.pop(metric.name, None)

    @staticmethod
    def _log(
        metric_syncs: list[MetricSync], report: RoundReport, only: set[str] | None = None
    ) -> None:
        failed = f"; failed: {', '.join(report.failed_metrics)}" if report.failed_metrics else ""
        scope = (
            f" (retry for {len(only)} node(s))"
            if only
            else (" (retry)" if only is not None else "")
        )
        logger.info(
            "synced %s%s: %d queries, %d node writes%s",
            ", ".join(j.name for j in metric_syncs),
            scope,
            report.queries,
            report.writes,
            failed,
        )

    async def new_node_loop(self) -> None:
        while True:
            await self._wake_new.wait()
            self._wake_new.clear()
            nodes, self._new_nodes = self._new_nodes, set()
            if nodes:
                report = await self.sync.sync(self.metric_syncs, with_hot=True, only=nodes)
                logger.info(
                    "new node(s) %s: %d node writes", ", ".join(sorted(nodes)[:10]), report.writes
                )

    async def hot_loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake_hot.wait(), timeout=self._hot_refresh)
            if self._wake_hot.is_set():
                await asyncio.sleep(self._hot_debounce)  # let a burst of bindings gather
                self._wake_hot.clear()
                nodes, self._hot_nodes = self._hot_nodes, set()
                await self.sync.sync_hot_values(nodes)
            else:
                await self.sync.sync_hot_values()  # the periodic refresh of non-zero values

    async def run(self) -> None:
        """All loops until cancelled (leadership lost); a failing loop is logged and
        restarted, never dropped. Once cancelled, the last round's figures are not exported."""
        try:
            async with asyncio.TaskGroup() as group:
                for factory in (self.metric_loop, self.new_node_loop, self.hot_loop):
                    group.create_task(_forever(factory), name=factory.__name__)
        finally:
            self.sync.stopped_leading()


async def _forever(factory: Callable[[], Coroutine[Any, Any, None]]) -> None:
    attempt = 0
    while True:
        try:
            await factory()
        except asyncio.CancelledError:
            raise
        except Exception:
            attempt += 1
            logger.exception("%s: attempt #%d failed; will retry", factory.__name__, attempt)
            await asyncio.sleep(min(30.0, 2.0**attempt))
