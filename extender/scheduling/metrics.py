"""The extender's Prometheus metrics, on a registry of its own (one per app)."""

from __future__ import annotations

from collections import Counter as Tally

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
OVERTAKEN_BUCKETS = (0, 1, 2, 3, 4, 6, 8, 12, 16, 32, 64)


class ExtenderMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.request_seconds = Histogram(
            "loadsched_extender_request_duration_seconds",
            "Time to answer a scheduler call, from first body byte to encoded answer.",
            ["verb"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.responses = Counter(
            "loadsched_extender_responses_total",
            "Answers by verb and HTTP status code.",
            ["verb", "code"],
            registry=self.registry,
        )
        self.decode_errors = Counter(
            "loadsched_extender_decode_errors_total",
            "Request bodies rejected as malformed (HTTP 400/413).",
            ["verb"],
            registry=self.registry,
        )
        self.nodes_filtered = Counter(
            "loadsched_extender_nodes_filtered_total",
            "Nodes rejected by filter, by metric and reason (overloaded; overloaded-with-pod, "
            "with estimation, when only the pod's own estimate takes the node past the limit; "
            "or why the value was unknown when failClosed).",
            ["metric", "reason"],
            registry=self.registry,
        )
        self.placed_without_room = Counter(
            "loadsched_extender_placed_without_room_total",
            "Filter answers (estimation, whenNoNodeHasRoom: place) for a pod no node asked "
            "about had room for, which passed the nodes under their limits on their own; with "
            "whenNoNodeHasRoom: wait such a pod waits instead. A pod asked about again counts "
            "again.",
            registry=self.registry,
        )
        self.unknown_annotations = Counter(
            "loadsched_extender_unknown_annotations_total",
            "Node metric values filter read as unknown, by metric and reason "
            "(missing, malformed, negative, not-finite, stale, future).",
            ["metric", "reason"],
            registry=self.registry,
        )
        self.uncached_nodes = Counter(
            "loadsched_extender_uncached_nodes_total",
            "Names-only requests naming a node the node cache does not (yet) hold.",
            registry=self.registry,
        )
        self.answers_kept = Counter(
            "loadsched_extender_answers_kept_total",
            "Names-only filter and prioritize answers served as kept for the same node names, "
            "none of whose nodes changed since (kube-scheduler asks about the same windows of "
            "nodes pod after pod; filter prepares the prioritize answer for the nodes it "
            "passes); the rest were computed.",
            ["verb"],
            registry=self.registry,
        )
        self._answered: dict[tuple[str, int], tuple[Histogram, Counter]] = {}
        """Per (verb, status), the children :meth:`answered` counts in, labelled once."""
        self.filter_kept = self.answers_kept.labels("filter")
        self.prioritize_kept = self.answers_kept.labels("prioritize")
        self.cached_nodes = Gauge(
            "loadsched_extender_node_cache_nodes",
            "Nodes in the watch-fed node cache.",
            registry=self.registry,
        )
        self.cache_synced = Gauge(
            "loadsched_extender_node_cache_synced",
            "1 once the node cache has completed its first list.",
            registry=self.registry,
        )
        self.filters_before_binding = Histogram(
            "loadsched_extender_filters_before_binding",
            "Per pod bound through the bind verb while verdicts read the pods bound to a node "
            "(estimation): filter answers for other pods between its own filter and its "
            "binding. kube-scheduler binds in the background and decides the next pods "
            "meanwhile; those were placed without this one counted on its node, "
            "so in a burst a node can take up to this many pods more than its room.",
            buckets=OVERTAKEN_BUCKETS,
            registry=self.registry,
        )

        self.quota_rejections = Counter(
            "loadsched_extender_quota_rejections_total",
            "Pods refused by their namespace's elastic quota at filter, by whether a "
            "preemption may help (preemptible: FailedNodes) or not (unresolvable).",
            ["outcome"],
            registry=self.registry,
        )
        self.quota_preemptions = Counter(
            "loadsched_extender_quota_preemptions_total",
            "Candidate nodes at preempt under an elastic quota: the scheduler's victims kept, "
            "replaced by legal ones, or the node dropped (no legal set); and repeated: calls "
            "for a pod whose victims named before are still going, answered with the same "
            "node and victims, no others.",
            ["outcome"],
            registry=self.registry,
        )
        self.quota_pods = Gauge(
            "loadsched_extender_quota_cached_pods",
            "Pods counted against elastic quotas (bound or nominated, not terminal).",
            registry=self.registry,
        )
        self.quota_assumed = Gauge(
            "loadsched_extender_quota_assumed_pods",
            "Pods admitted by filter that the pod watch has not yet shown bound (or gone).",
            registry=self.registry,
        )
        self.quotas = Gauge(
            "loadsched_extender_elastic_quotas",
            "ElasticQuota objects by state (active, or invalid and ignored).",
            ["state"],
            registry=self.registry,
        )

        self.requeue_transitions = Counter(
            "loadsched_extender_requeue_transitions_total",
            "Refusals that no longer hold, by cause: a refused node now passes (load, "
            "hot-value, stale, node-added) or a refused pod's quota now admits it (quota).",
            ["cause"],
            registry=self.registry,
        )
        self.requeue_writes = Counter(
            "loadsched_extender_requeue_writes_total",
            "Requeue annotation writes on Nodes (each makes kube-scheduler retry the pods it "
            "holds as refused by the extender), by result (written, error).",
            ["result"],
            registry=self.registry,
        )
        self.requeue_tracked = Gauge(
            "loadsched_extender_requeue_tracked",
            "Refusals remembered for requeue: nodes of pods left with no node, and pods "
            "refused by their elastic quota.",
            ["kind"],
            registry=self.registry,
        )

    def answered(self, verb: str, status: int, seconds: float) -> None:
        """One answer made: its time and its status code."""
        children = self._answered.get((verb, status))
        if children is None:
            children = self._answered[verb, status] = (
                self.request_seconds.labels(verb),
                self.responses.labels(verb, str(status)),
            )
        children[0].observe(seconds)
        children[1].inc()

    def count_filtered(self, tally: Tally[tuple[str, str]]) -> None:
        for (metric, reason), n in tally.items():
            self.nodes_filtered.labels(metric, reason).inc(n)

    def count_unknown(self, tally: Tally[tuple[str, str]]) -> None:
        for (metric, reason), n in tally.items():
            self.unknown_annotations.labels(metric, reason).inc(n)
