"""The annotator's Prometheus metrics, on a registry of its own."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fractions import Fraction

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from shared.quota import ElasticQuota

QuotaSeries = dict[str, dict[tuple[str, str], float]]
"""``used``, ``min`` or ``max`` → (namespace, resource) → value."""


class AnnotatorMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.last_success = Gauge(
            "loadsched_annotator_metric_last_success_timestamp_seconds",
            "When each metric was last synced from Prometheus (Unix time).",
            ["metric"],
            registry=r,
        )
        self.query_seconds = Histogram(
            "loadsched_annotator_query_duration_seconds",
            "Prometheus query time per metric.",
            ["metric"],
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=r,
        )
        self.query_errors = Counter(
            "loadsched_annotator_query_errors_total",
            "Failed or empty Prometheus queries; nothing is written for that metric.",
            ["metric", "reason"],
            registry=r,
        )
        self.nodes_matched = Gauge(
            "loadsched_annotator_nodes_matched",
            "Nodes with a series, per metric, last round.",
            ["metric"],
            registry=r,
        )
        self.nodes_unmatched = Gauge(
            "loadsched_annotator_nodes_unmatched",
            "Nodes without a series, per metric, last round.",
            ["metric"],
            registry=r,
        )
        self.series_unmatched = Gauge(
            "loadsched_annotator_series_unmatched",
            "Series whose instance matches no node, per metric, last round.",
            ["metric"],
            registry=r,
        )
        self.patches = Counter(
            "loadsched_annotator_node_patches_total",
            "Node annotation patches written.",
            ["kind"],
            registry=r,
        )
        self.patch_errors = Counter(
            "loadsched_annotator_node_patch_errors_total",
            "Node patches that failed after retries.",
            registry=r,
        )
        self.rounds = Counter(
            "loadsched_annotator_rounds_total",
            "Sync rounds run.",
            ["kind"],
            registry=r,
        )
        self.round_seconds = Histogram(
            "loadsched_annotator_round_duration_seconds",
            "Time of one sync round, its queries and node writes, by kind (metrics: the "
            "metrics due together; hot: hot values) and nodes (all, or some: new nodes, "
            "retries, bindings changed).",
            ["kind", "nodes"],
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
            registry=r,
        )
        self.leader = Gauge(
            "loadsched_annotator_leader", "1 while this replica holds the lease.", registry=r
        )
        self.bindings = Gauge(
            "loadsched_annotator_bindings_tracked",
            "Bindings inside the hot value windows.",
            registry=r,
        )
        self.quota_passes = Counter(
            "loadsched_annotator_quota_passes_total",
            "Passes of the elastic-quota controller (status.used and reclaim).",
            registry=r,
        )
        self.quota_status_writes = Counter(
            "loadsched_annotator_quota_status_writes_total",
            "Writes of ElasticQuota status.used, by result (ok, error).",
            ["result"],
            registry=r,
        )
        self.quota_waiting_pods = Gauge(
            "loadsched_annotator_quota_waiting_pods",
            "Unschedulable pods the elastic-quota controller saw in its last pass.",
            registry=r,
        )
        self.reclaim_evictions = Counter(
            "loadsched_annotator_reclaim_evictions_total",
            "Borrower pods the reclaim controller evicted or tried to, by result "
            "(evicted, gone, blocked by a PodDisruptionBudget, failed, throttled, dry-run).",
            ["result"],
            registry=r,
        )
        self.quota_used = Gauge(
            "loadsched_annotator_quota_used",
            "What a namespace's pods use (status.used) of each resource its ElasticQuota "
            "governs, in the resource's unit (CPU cores, bytes). Leader only.",
            ["namespace", "resource"],
            registry=r,
        )
        self.quota_min = Gauge(
            "loadsched_annotator_quota_min",
            "An ElasticQuota's min of each resource it governs (0 for one only max names). "
            "Leader only.",
            ["namespace", "resource"],
            registry=r,
        )
        self.quota_max = Gauge(
            "loadsched_annotator_quota_max",
            "An ElasticQuota's max of each resource it governs; no series: unlimited. Leader only.",
            ["namespace", "resource"],
            registry=r,
        )
        self.rebalance_rounds = Counter(
            "loadsched_annotator_rebalance_rounds_total",
            "Rounds of the rebalancer (leader only).",
            registry=r,
        )
        self.rebalance_nodes = Gauge(
            "loadsched_annotator_rebalance_nodes",
            "Nodes by the rebalancer's last look at them: over (acted on: above a high "
            "threshold for consecutiveRounds rounds of fresh data), waiting (above it for "
            "fewer rounds), held (pods moved off lately), stale (a value missing or stale: "
            "never acted on), under.",
            ["state"],
            registry=r,
        )
        self.rebalance_node_rounds = Counter(
            "loadsched_annotator_rebalance_node_rounds_total",
            "Each node's rounds by its state in them (the states of "
            "loadsched_annotator_rebalance_nodes): how often a node was over, waiting, held, "
            "stale or under, between two scrapes included.",
            ["state"],
            registry=r,
        )
        self.rebalance_evictions = Counter(
            "loadsched_annotator_rebalance_evictions_total",
            "Pods the rebalancer evicted or tried to, by result (evicted, gone, blocked by a "
            "PodDisruptionBudget, failed, throttled, dry-run) and the metric that was over.",
            ["result", "reason"],
            registry=r,
        )
        self.rebalance_skipped = Counter(
            "loadsched_annotator_rebalance_candidates_skipped_total",
            "Pods on an overloaded node the rebalancer did not move, by reason (no-controller, "
            "daemonset, mirror, priority, opted-out, cooldown, no-target, limit, ...).",
            ["reason"],
            registry=r,
        )
        self.rebalance_usage_errors = Counter(
            "loadsched_annotator_rebalance_usage_errors_total",
            "Failed per-pod usage queries (pods then count at request × the estimation factor).",
            ["resource"],
            registry=r,
        )
        self._quota_exported: QuotaSeries = {}

    def set_quota_use(
        self,
        quotas: Mapping[str, ElasticQuota],
        used: Callable[[str], Mapping[str, Fraction]],
    ) -> None:
        """Export use, min and max of every quota in force (``quotas`` by namespace; ``used``
        gives a namespace's use); the series of quotas or resources gone are removed."""
        series = quota_series(quotas, used)
        for field, gauge in self._quota_gauges().items():
            values = series[field]
            for labels in self._quota_exported.get(field, {}).keys() - values.keys():
                gauge.remove(*labels)
            for labels, value in values.items():
                gauge.labels(*labels).set(value)
        self._quota_exported = series

    def clear_round_gauges(self) -> None:
        """A replica that stops leading exports no last-round figures (nodes matched and
        unmatched, series unmatched): they would go stale beside the new leader's."""
        for gauge in (self.nodes_matched, self.nodes_unmatched, self.series_unmatched):
            gauge.clear()

    def clear_leader_only(self) -> None:
        """A replica that stops leading exports none of the quota controller's values: they
        would go stale while the new leader's move on."""
        for gauge in self._quota_gauges().values():
            gauge.clear()
        self._quota_exported = {}
        self.quota_waiting_pods.set(0)

    def _quota_gauges(self) -> dict[str, Gauge]:
        return {"used": self.quota_used, "min": self.quota_min, "max": self.quota_max}


def quota_series(
    quotas: Mapping[str, ElasticQuota], used: Callable[[str], Mapping[str, Fraction]]
) -> QuotaSeries:
    """The values of the quota gauges (``used``, ``min``, ``max``): per namespace, every
    resource its quota governs (named in ``min`` or ``max``); ``max`` only where there is a
    ceiling."""
    series: QuotaSeries = {"used": {}, "min": {}, "max": {}}
    for namespace, quota in quotas.items():
        mine = used(namespace)
        for resource in {*quota.min, *(quota.max or {})}:
            labels = (namespace, resource)
            series["used"][labels] = float(mine.get(resource, 0))
            series["min"][labels] = float(quota.guaranteed(resource))
            ceiling = quota.ceiling(resource)
            if ceiling is not None:
                series["max"][labels] = float(ceiling)
    return series
