"""The annotator's Prometheus metrics, on a registry of its own."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


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
