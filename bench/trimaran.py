"""The real Trimaran beside the sandbox, for bench/quality.py: scheduler-plugins' own
kube-scheduler (``sigs.k8s.io/scheduler-plugins``, built from ``hack/trimaran``) with
``TargetLoadPacking`` or ``LoadVariationRiskBalancing``, reading the same Prometheus through
its load-watcher, as its v0.34 code reads it:

- load-watcher runs in the scheduler's process (library mode: ``metricProvider``, no
  ``watcherAddress``). For every node it asks Prometheus for ``avg_over_time`` and
  ``stddev_over_time`` of ``instance:node_cpu:ratio`` and
  ``instance:node_memory_utilisation:ratio`` over 15 minutes (then 10 and 5), keyed by the
  ``instance`` label, which must be the Node's name; the values are fractions (0..1);
- it asks again once a minute, and the plugin copies its latest answer every 30 s;
- one load-watcher per process: a second Trimaran plugin in the same scheduler registers the
  same HTTP handler and panics, so each strategy runs one plugin in a scheduler of its own;
- it serves its latest answer on ``:2020/watcher`` even in library mode. One query of its 34
  that fails drops a whole fetch, and a node without metrics gets the minimum score from both
  plugins, silently: :func:`start` returns once that answer has every node's CPU average.

The two series come from :func:`rule_group`, the bench's instantaneous usage renamed to each
Node's name (what a node-exporter scrape relabelled with the node name gives a real cluster).
A fresh strategy forgets them first (:func:`forget`): a 15-minute window would otherwise
carry the last strategy's load into this one's start, where every strategy starts from the
nodes at their background load.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any

from bench.descheduler import node_query
from sandbox.build import ensure_trimaran
from sandbox.cluster import Sandbox
from sandbox.metrics_stack import MetricsStack
from sandbox.processes import wait_for
from sandbox.specs import NodeSpec, SchedulerHandle

CPU_SERIES = "instance:node_cpu:ratio"
MEMORY_SERIES = "instance:node_memory_utilisation:ratio"
SERIES = (CPU_SERIES, MEMORY_SERIES)
"""What load-watcher's Prometheus provider reads for CPU and memory."""
TARGET_LOAD_PACKING = "TargetLoadPacking"
LOAD_VARIATION_RISK_BALANCING = "LoadVariationRiskBalancing"
WATCHER_URL = "http://127.0.0.1:2020/watcher"
"""load-watcher's latest answer (a fixed port: one Trimaran scheduler at a time)."""


def rule_group(stack: MetricsStack, nodes: Sequence[NodeSpec], *, interval: str) -> dict[str, Any]:
    """Recording rules for load-watcher's two series, from the bench's ``cpu_usage_active``
    and ``mem_usage_active`` (percent), as fractions labelled ``instance`` = the Node's name:
    renamed as the descheduler's query is (:func:`bench.descheduler.node_query`)."""
    return {
        "name": "load-watcher",
        "interval": interval,
        "rules": [
            {"record": CPU_SERIES, "expr": node_query(stack, nodes, "cpu_usage_active")},
            {"record": MEMORY_SERIES, "expr": node_query(stack, nodes, "mem_usage_active")},
        ],
    }


def plugin_args(plugin: str, prometheus_url: str) -> dict[str, Any]:
    """The plugin's arguments at its API defaults (``apis/config/v1/defaults.go``), spelled
    out, on ``prometheus_url``. The READMEs' examples show other values (TargetLoadPacking 70 %
    with 2 CPUs × 2, risk balancing's sensitivity 2); the defaults are what a user gets, and
    TargetLoadPacking's 40 % is the target loadsched's own ``tlp`` policy runs."""
    provider = {"metricProvider": {"type": "Prometheus", "address": prometheus_url}}
    if plugin == TARGET_LOAD_PACKING:
        return {
            **provider,
            "targetUtilization": 40,
            "defaultRequests": {"cpu": "1000m"},
            "defaultRequestsMultiplier": "1.5",
        }
    if plugin == LOAD_VARIATION_RISK_BALANCING:
        return {**provider, "safeVarianceMargin": 1.0, "safeVarianceSensitivity": 1.0}
    raise ValueError(f"{plugin!r} is not a Trimaran plugin this bench runs")


def profile(plugin: str, scheduler_name: str, prometheus_url: str) -> dict[str, Any]:
    """One profile, with the plugins the plugin's own README enables: TargetLoadPacking takes
    the place of the allocation-based scores (``NodeResourcesBalancedAllocation`` and
    ``NodeResourcesFit``'s least-allocated score, ``NodeResourcesLeastAllocated`` before
    v1); LoadVariationRiskBalancing is added to the default scores."""
    score: dict[str, Any] = {"enabled": [{"name": plugin}]}
    if plugin == TARGET_LOAD_PACKING:
        score["disabled"] = [
            {"name": "NodeResourcesBalancedAllocation"},
            {"name": "NodeResourcesFit"},
        ]
    return {
        "schedulerName": scheduler_name,
        "plugins": {"score": score},
        "pluginConfig": [{"name": plugin, "args": plugin_args(plugin, prometheus_url)}],
    }


def forget(stack: MetricsStack) -> None:
    """Drop the history of load-watcher's series (recorded again from the next evaluation)."""
    for series in SERIES:
        stack.prometheus.delete_series(series)


def watched(document: dict[str, Any]) -> set[str]:
    """The nodes that load-watcher's answer (its ``/watcher`` JSON) gives a CPU average."""
    nodes = document.get("data", {}).get("NodeMetricsMap", {}) or {}
    return {
        node
        for node, held in nodes.items()
        if any(
            m.get("type") == "CPU" and m.get("operator") == "AVG"
            for m in held.get("metrics", []) or []
        )
    }


def _watched_now() -> set[str]:
    try:
        with urllib.request.urlopen(WATCHER_URL, timeout=5) as response:
            return watched(json.load(response))
    except (OSError, ValueError):
        return set()


def start(
    box: Sandbox,
    name: str,
    plugin: str,
    *,
    scheduler_name: str,
    stack: MetricsStack,
    nodes: Sequence[NodeSpec],
    say: Callable[[str], None],
) -> SchedulerHandle:
    """scheduler-plugins' kube-scheduler with ``plugin`` (built the first time, minutes),
    once its load-watcher holds every node's CPU average."""
    binary = ensure_trimaran(say)
    handle = box.start_scheduler(
        name,
        scheduler_name=scheduler_name,
        extra={"profiles": [profile(plugin, scheduler_name, stack.prometheus.url)]},
        binary=binary,
    )
    wanted = {node.name for node in nodes}
    wait_for(
        lambda: _watched_now() >= wanted,
        timeout=60,
        what=f"{plugin}'s load-watcher to hold every node's CPU average",
        interval=1,
        guard=box.supervisor,
    )
    return handle
