"""The status report behind ``GET /v1/status`` and the ``/ui`` page: every node's verdict with
each metric's value, age, freshness, limit and estimate; the elastic quotas; the dispatch
templates. Read from what the rooms already hold (the node view's verdicts, the quota ledger,
the dispatcher's watch caches); nothing here decides anything or does I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction

from extender.dispatch.dispatcher import Dispatcher
from extender.scheduling.node_cache import NodeLoadCache
from extender.status.models import (
    STATUS_PARTS,
    InvalidQuota,
    MetricCell,
    MetricColumn,
    NodeRow,
    Nodes,
    QuotaResource,
    QuotaRow,
    Quotas,
    Status,
    StatusPart,
    TemplateRow,
    Templates,
)
from extender.status.rebalance import RebalanceStatusReader
from shared.annotations import Sample
from shared.load_model import LoadRules, MetricTerm, Verdict
from shared.policy import HOT_VALUE_KEY
from shared.quantity import ResourceList, format_quantity
from shared.quota_ledger import QuotaLedger

Clock = Callable[[], datetime]


def _age(now: datetime, at: datetime | None) -> float | None:
    return None if at is None else round((now - at).total_seconds(), 1)


def metric_cells(
    terms: Iterable[MetricTerm], readings: Mapping[str, object], now: datetime
) -> dict[str, MetricCell]:
    """One cell per metric name: a metric that is both a predicate and a priority shows its
    limit and its weight; a value that is not fresh is still shown from the annotation."""
    cells: dict[str, MetricCell] = {}
    for term in terms:
        cell = cells.get(term.metric)
        if cell is None:
            raw = readings.get(term.metric)
            sample = raw if isinstance(raw, Sample) else None
            measured = term.measured if term.measured is not None else None
            if measured is None and sample is not None:
                measured = sample.value
            sampled = term.sampled_at or (sample.timestamp if sample else None)
            cell = MetricCell(
                state=term.state,
                value=measured,
                age_seconds=_age(now, sampled),
                estimated=term.estimated,
                limit=None,
                limit_from=None,
                weight=None,
                points=0.0,
                decided=False,
                usage=None,
            )
            cells[term.metric] = cell
        if term.role == "predicate" and term.threshold:
            cell.limit, cell.limit_from = term.threshold, term.limit_from
        elif term.role == "priority":
            cell.weight, cell.points = term.threshold, round(term.points, 3)
        cell.decided = cell.decided or term.decided
    for cell in cells.values():
        if cell.value is not None and cell.state == "fresh":
            total = cell.value + cell.estimated
            cell.usage = round(total / cell.limit if cell.limit else total, 4)
    return cells


def node_row(name: str, verdict: Verdict, readings: Mapping[str, object], now: datetime) -> NodeRow:
    hot = readings.get(HOT_VALUE_KEY)
    return NodeRow(
        name=name,
        passes=verdict.overload is None,
        rejection=verdict.overload,
        decided_by=verdict.overload_metric,
        reason=verdict.overload_reason[1] if verdict.overload_reason else None,
        score=verdict.score,
        extender_score=verdict.extender_score,
        hot=verdict.hot,
        hot_age_seconds=_age(now, hot.timestamp) if isinstance(hot, Sample) else None,
        placed=verdict.placed,
        limits_error=verdict.limits_error,
        metrics=metric_cells(verdict.terms, readings, now),
    )


def badness(row: NodeRow) -> tuple[int, float, str]:
    """Worst first: rejected nodes, then by the highest usage against a limit."""
    worst = max((c.usage for c in row.metrics.values() if c.usage is not None), default=0.0)
    return (0 if not row.passes else 1, -worst, row.name)


def node_report(cache: NodeLoadCache | None, rules: LoadRules, now: datetime) -> Nodes:
    columns = [
        MetricColumn(
            name=name,
            limit=next((r.threshold for r in rules.predicates if r.name == name), None) or None,
            weight=next((r.threshold for r in rules.priorities if r.name == name), None),
            fresh_seconds=next(
                r.window.total_seconds()
                for r in (*rules.predicates, *rules.priorities, *rules.strategy_metrics)
                if r.name == name
            ),
        )
        for name in dict.fromkeys(
            r.name for r in (*rules.predicates, *rules.priorities, *rules.strategy_metrics)
        )
    ]
    if cache is None:
        return Nodes(
            available=False,
            total=0,
            rejected=0,
            stale=0,
            columns=columns,
            hot_limit=rules.hot_limit,
            items=[],
        )
    view = cache.view(now)
    rows = []
    for name, verdict in view.verdicts.items():
        entry = cache.get(name)
        readings = entry.load.readings if entry is not None else {}
        rows.append(node_row(name, verdict, readings, now))
    rows.sort(key=badness)
    return Nodes(
        available=True,
        total=len(rows),
        rejected=sum(1 for r in rows if not r.passes),
        stale=sum(1 for r in rows if any(c.state != "fresh" for c in r.metrics.values())),
        columns=columns,
        hot_limit=rules.hot_limit,
        items=rows,
    )


def _show(resource: str, value: Fraction) -> str:
    return format_quantity(resource, value) if value else "0"


def quota_report(ledger: QuotaLedger | None) -> Quotas:
    if ledger is None:
        return Quotas(enabled=False, items=[], pool={}, invalid=[])
    state = ledger.state()
    borrowed: dict[str, dict[str, Fraction]] = {}
    for namespace, quota in state.quotas.items():
        used = state.use_of(namespace)
        borrowed[namespace] = {
            r: max(used.get(r, Fraction(0)) - quota.guaranteed(r), Fraction(0))
            for r in quota.governed(used)
        }
    rows = []
    for namespace in sorted(state.quotas):
        quota, used = state.quotas[namespace], state.use_of(namespace)
        names = sorted({*quota.min, *(quota.max or {}), *quota.governed(used)})
        resources = {}
        for r in names:
            idle = max(quota.guaranteed(r) - used.get(r, Fraction(0)), Fraction(0))
            others = sum(
                (b.get(r, Fraction(0)) for ns, b in borrowed.items() if ns != namespace),
                Fraction(0),
            )
            ceiling = quota.ceiling(r)
            resources[r] = QuotaResource(
                min=_show(r, quota.guaranteed(r)),
                max=None if ceiling is None else _show(r, ceiling),
                used=_show(r, used.get(r, Fraction(0))),
                borrowed=_show(r, borrowed[namespace].get(r, Fraction(0))),
                lent=_show(r, min(idle, others)),
            )
        rows.append(
            QuotaRow(
                namespace=namespace, borrower=state.is_borrower(namespace), resources=resources
            )
        )
    pool = {
        r: {"min": _show(r, state.totals.min.get(r, Fraction(0))), "used": _show(r, v)}
        for r, v in sorted(_pool_used(state.totals.min, state.totals.used).items())
    }
    invalid = [
        InvalidQuota(namespace=ns, name=name, reason=reason)
        for (ns, name), reason in sorted(ledger.invalid.items())
    ]
    return Quotas(enabled=True, items=rows, pool=pool, invalid=invalid)


def _pool_used(minimum: Mapping[str, Fraction], used: Mapping[str, Fraction]) -> ResourceList:
    return {r: used.get(r, Fraction(0)) for r in {*minimum, *used}}


def template_report(dispatcher: Dispatcher | None) -> Templates:
    if dispatcher is None:
        return Templates(enabled=False, items=[])
    rows = []
    for name in sorted(dispatcher.templates):
        template = dispatcher.templates[name]
        active, pending = dispatcher.jobs.active(name), dispatcher.pods.pending(name)
        rows.append(
            TemplateRow(
                name=name,
                namespace=template.namespace,
                active=active,
                pending=pending,
                max_active=template.max_active,
                max_pending=template.max_pending,
                refusing=dispatcher.pressure(template, (active, pending)),
            )
        )
    return Templates(enabled=True, items=rows)


@dataclass
class StatusSources:
    """What the report reads: set by the composition root (:mod:`extender.app`)."""

    rules: LoadRules
    clock: Clock
    node_cache: NodeLoadCache | None
    ledger: QuotaLedger | None
    """``None`` unless elastic quotas are enabled."""
    dispatcher: Callable[[], Dispatcher | None]
    """The dispatcher once started (it is built when the cluster is reached)."""
    readiness: Callable[[], tuple[bool, str]]
    rebalance: RebalanceStatusReader | None = None
    """Where the rebalancer's status is read (with a cluster)."""

    async def full_report(self, parts: Collection[StatusPart] = STATUS_PARTS) -> Status:
        """:meth:`report`, with the rebalancer's status read when asked for."""
        status = self.report(parts)
        if "rebalance" in parts:
            if self.rebalance is None:
                status.rebalance = {"published": False, "reason": "no cluster configured"}
            else:
                status.rebalance = await self.rebalance.read()
        return status

    def report(self, parts: Collection[StatusPart] = STATUS_PARTS) -> Status:
        """The report, with only ``parts`` (the others ``None``: a client that wants the
        quotas of a 5,000-node cluster is not sent every node)."""
        now = self.clock()
        ready, message = self.readiness()
        return Status(
            generated_at=now,
            ready=ready,
            readiness=message,
            nodes=node_report(self.node_cache, self.rules, now) if "nodes" in parts else None,
            quotas=quota_report(self.ledger) if "quotas" in parts else None,
            templates=template_report(self.dispatcher()) if "templates" in parts else None,
        )
