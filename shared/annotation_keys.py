"""Every annotation and label loadsched reads or writes on Kubernetes objects: the key as a
constant, and in :data:`KEYS` who writes it, who reads it and what it means. The reference
page ``docs/reference/annotations.md`` is generated from :data:`KEYS` (``make reference``), and
``tests/test_reference.py`` fails when the product's source spells a ``loadsched.io/`` key, or
crane's default policy names a metric, that is not listed here. Pure; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

HOT_VALUE_KEY = "node_hot_value"
"""Node annotation (crane's): ``"<integer>,<timestamp>"``, pods bound to the node lately."""
CRANE_METRIC_KEYS = (
    "cpu_usage_avg_5m",
    "cpu_usage_max_avg_1h",
    "cpu_usage_max_avg_1d",
    "mem_usage_avg_5m",
    "mem_usage_max_avg_1h",
    "mem_usage_max_avg_1d",
)
"""The Node annotations of crane's default policy (one per ``syncPolicy`` metric, no prefix):
``"<fraction, 5 decimals>,<timestamp>"``. A policy's own metric names are keys the same way."""
NODE_LIMITS_KEY = "loadsched.io/predicate-limits"
"""A Node annotation overriding predicate limits for that node: a JSON object of metric name
to fraction, e.g. ``{"cpu_usage_avg_5m": 0.8}`` (0 turns the predicate off on that node)."""
REQUEUE_ANNOTATION = "loadsched.io/requeue"
"""Written on a Node when pods refused earlier would now be admitted: ``<cause>,<timestamp>``
(spelled again in :mod:`extender.scheduling.requeue`)."""
ADMITTED_ANNOTATION = "loadsched.io/admitted"
"""On an ElasticQuota: the pods extender replicas admitted and may not have seen bound yet,
and the pods the reclaim controller freed room for (``{"<uid>": [<until>, {...}]}``, a
promise with its pod's priority as a third element)."""
REBALANCED_FROM_ANNOTATION = "loadsched.io/rebalanced-from"
"""On a Node the rebalancer moved pods off: ``{"<namespace>/<Kind>/<name>": "<until>"}``, the
workloads whose replacements filter refuses there until then."""
REBALANCED_USAGE_ANNOTATION = "loadsched.io/rebalanced-usage"
"""On a Node the rebalancer moved pods off, beside its marks: ``{"<namespace>/<Kind>/<name>":
{"cpu": <cores>, "memory": <bytes>}}``, what the moved pod used; while the workload's mark
holds, filter asks its replacement for room for at least that much on every node."""
EVICT_ANNOTATION = "loadsched.io/evict"
"""On a Pod: ``"false"`` keeps the rebalancer from moving it; ``"true"`` lets it move a pod
with local storage, or with what its target check does not judge (required pod affinity,
host ports, persistent volumes, ...)."""
REBALANCE_STATUS_KEY = "status.json"
"""The key of the rebalancer's status in its ConfigMap (``loadsched-rebalance``)."""
TEMPLATE_LABEL = "loadsched.io/template"
"""On dispatched Jobs, CronJobs, their pods and the admission records: the job template."""
KEY_HASH_LABEL = "loadsched.io/key-hash"
"""On dispatched Jobs and CronJobs: 16 hex digits of the template and idempotency key."""
KEY_ANNOTATION = "loadsched.io/key"
"""On dispatched Jobs and CronJobs: the caller's idempotency key."""
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
"""The well-known label; dispatch sets it to ``loadsched`` on its admission records."""
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
"""The Job controller's label on a Job's pods."""

Kind = Literal["annotation", "label"]


@dataclass(frozen=True)
class KeyUse:
    """One key: what it is on, who writes and who reads it, and what its value means."""

    key: str
    kind: Kind
    on: str
    written_by: str
    read_by: str
    meaning: str
    crane: bool = False
    """Also written or read by crane-scheduler, in the same format."""


def _metric(name: str) -> KeyUse:
    return KeyUse(
        name,
        "annotation",
        "Node",
        "annotator (each sync period of the metric)",
        "extender (filter, prioritize, explain, status)",
        "the node's usage of the metric, from Prometheus: `<fraction, 5 decimals>,<timestamp>`",
        crane=True,
    )


KEYS: tuple[KeyUse, ...] = (
    *(_metric(name) for name in CRANE_METRIC_KEYS),
    KeyUse(
        HOT_VALUE_KEY,
        "annotation",
        "Node",
        "annotator (hot value loop)",
        "extender (score penalty; `hotValueLimit`)",
        "pods bound to the node lately, per the policy's `hotValue`: `<integer>,<timestamp>`",
        crane=True,
    ),
    KeyUse(
        NODE_LIMITS_KEY,
        "annotation",
        "Node",
        "you (cluster operators)",
        "extender (filter, explain)",
        "the node's own predicate limits, a JSON object of metric to fraction "
        '(`{"cpu_usage_avg_5m": 0.8}`); 0 turns a predicate off on the node',
    ),
    KeyUse(
        REQUEUE_ANNOTATION,
        "annotation",
        "Node",
        "extender (requeue, `--requeue`)",
        "kube-scheduler (as a Node update event; the value is not read)",
        "`<cause>,<timestamp>`: pods refused earlier would now be admitted, so kube-scheduler "
        "retries them",
    ),
    KeyUse(
        ADMITTED_ANNOTATION,
        "annotation",
        "ElasticQuota",
        "extender (filter, `--elastic-quota`); annotator (reclaim promises)",
        "extender replicas; annotator (reclaim)",
        'admissions and promises not yet seen bound: `{"<pod uid>": [<until>, {<resources>}], '
        "...}`, with the pod's priority as a third element for a promise",
    ),
    KeyUse(
        REBALANCED_FROM_ANNOTATION,
        "annotation",
        "Node",
        "annotator (rebalancer, `spec.rebalance`)",
        "extender (filter); annotator (rebalancer: targets, clearing)",
        "the workloads whose pods the rebalancer moved off the node, each until when its "
        'replacement is refused there: `{"<namespace>/<Kind>/<name>": "<timestamp>"}`; '
        "cleared once the node is under every low threshold",
    ),
    KeyUse(
        REBALANCED_USAGE_ANNOTATION,
        "annotation",
        "Node",
        "annotator (rebalancer, `spec.rebalance`), with `loadsched.io/rebalanced-from`",
        "extender (filter, explain)",
        "what each moved workload's pod used when it was moved off the node: "
        '`{"<namespace>/<Kind>/<name>": {"cpu": <cores>, "memory": <bytes>}}`; while the '
        "workload's mark holds, its replacement needs room for at least that much on any node",
    ),
    KeyUse(
        EVICT_ANNOTATION,
        "annotation",
        "Pod",
        "you (workload owners)",
        "annotator (rebalancer)",
        '`"false"`: the rebalancer never moves this pod; `"true"`: it may move it although '
        "it has an `emptyDir` or `hostPath` volume, or asks of its node what the rebalancer's "
        "target check does not judge (required pod affinity or anti-affinity, a "
        "`DoNotSchedule` topology spread, a host port, a persistent volume)",
    ),
    KeyUse(
        TEMPLATE_LABEL,
        "label",
        "Job, CronJob, their pods; dispatch admission ConfigMaps",
        "extender (dispatch)",
        "extender (dispatch watches select on it; pending pods per template)",
        "the job template the object was dispatched from",
    ),
    KeyUse(
        KEY_HASH_LABEL,
        "label",
        "Job, CronJob",
        "extender (dispatch)",
        "nobody in loadsched (for selecting one task's Job with kubectl)",
        "16 hex digits of the template and idempotency key (the Job's name ends with them)",
    ),
    KeyUse(
        KEY_ANNOTATION,
        "annotation",
        "Job, CronJob",
        "extender (dispatch)",
        "extender (dispatch: a key's Job, after restarts and across replicas)",
        "the caller's idempotency key",
    ),
    KeyUse(
        MANAGED_BY_LABEL,
        "label",
        "dispatch admission ConfigMaps",
        "extender (dispatch)",
        "nobody in loadsched",
        "`loadsched`",
    ),
    KeyUse(
        JOB_NAME_LABEL,
        "label",
        "pods of dispatched Jobs",
        "Kubernetes (the Job controller)",
        "extender (dispatch: pods per Job)",
        "the Job the pod belongs to",
    ),
)
"""Every key loadsched reads or writes, metric keys first."""
