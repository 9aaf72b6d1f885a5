"""The strategies bench/quality.py compares, as loadsched policies on 1-minute metrics.

Every policy syncs the same metrics (1-minute averages and standard deviations every 15 s,
from bench/quality_rules.yaml) and is held to the same limits when the bench counts overload.
A strategy whose policy this loadsched cannot load yet is reported as not run, with the reason.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from sandbox.build import minimal_extender_binary, trimaran_binary
from shared.errors import ConfigError
from shared.policy import parse_policy
from shared.rebalance_policy import LOW_OF_HIGH

RULES = Path(__file__).with_name("quality_rules.yaml")
PERIOD = "15s"
DELAY = "9s"
"""How long before its timestamp each metric's window ends on this bench's pipeline (5 s
scrapes and rules, queries every 15 s): ``bench/sample_delay.py`` measures a median of 8.7 s."""
WINDOW = "1m"
"""The window of the bench's averages and deviations (``quality_rules.yaml``): crane's five
minutes shortened, so that a strategy's run takes minutes."""
CPU_LIMIT = 0.70
MEMORY_LIMIT = 0.70
NODE_CPUS, NODE_MEMORY = 8.0, 32.0 * 2**30
"""Each node's size: cores, and bytes of memory."""
SYNC = [
    {"name": "cpu_usage_avg_1m", "period": PERIOD, "delay": DELAY},
    {"name": "mem_usage_avg_1m", "period": PERIOD, "delay": DELAY},
    {
        "name": "cpu_usage_stddev_1m",
        "period": PERIOD,
        "window": WINDOW,
        "resource": "cpu",
        "delay": DELAY,
    },
    {
        "name": "mem_usage_stddev_1m",
        "period": PERIOD,
        "window": WINDOW,
        "resource": "memory",
        "delay": DELAY,
    },
]
"""What the annotator syncs for every strategy (``window``/``resource``/``delay`` need the
estimation schema; without it only crane's fields of the two averages are kept, and
LoadVariationRiskBalancing cannot run)."""
PREDICATES = [
    {"name": "cpu_usage_avg_1m", "maxLimitPecent": CPU_LIMIT},
    {"name": "mem_usage_avg_1m", "maxLimitPecent": MEMORY_LIMIT},
]
PRIORITIES = [
    {"name": "cpu_usage_avg_1m", "weight": 0.2},
    {"name": "mem_usage_avg_1m", "weight": 0.2},
]
HOT_VALUE = [{"timeRange": "1m", "count": 5}, {"timeRange": "12s", "count": 2}]
"""crane's default hot value (5 per 5m, 2 per 1m) scaled like the metrics' windows (5m → 1m)."""
FACTORS = {"cpu": 0.85, "memory": 0.70}
"""Koordinator's: what estimation assumes a pod uses of its request."""
KOORDINATOR = {"enabled": True, "factors": FACTORS}
TRIMARAN = {"enabled": False}
"""Trimaran's strategies as published: TargetLoadPacking predicts the pods its sample misses by
its own rule (limit, else request × requestsMultiplier 1.5, for pods bound since the sample or
within 60 s before it: applied by loadsched when estimation is off), LoadVariationRiskBalancing
predicts none."""


@dataclass(frozen=True)
class Strategy:
    key: str
    title: str
    spec: dict[str, Any] | None = None
    """The policy's spec; ``None`` for the plain kube-scheduler (no extender)."""
    hot_value: list[dict[str, Any]] = field(default_factory=list)
    """What the annotator keeps as the hot value while this strategy runs."""
    rebalance: dict[str, Any] | None = None
    """The annotator's ``spec.rebalance`` (its rebalancer on), or ``None``."""
    descheduler: bool = False
    """The real descheduler runs beside it (bench/descheduler.py)."""
    trimaran: str | None = None
    """The Trimaran plugin scheduler-plugins' own kube-scheduler runs with, in place of the
    sandbox's (bench/trimaran.py), or ``None``."""
    bind: bool = True
    """Through the extender: kube-scheduler delegates binding to it (``bindVerb``, the chart's
    ``extender.bind: true``), so it counts each pod on its node as it binds it; else
    kube-scheduler binds, and the extender counts the pod once its watch shows the binding
    (the chart's default)."""
    minimal: bool = False
    """kube-scheduler calls the minimal Go extender (``hack/minimal-extender``) instead of
    loadsched's: every node passes with score 0, nothing is bound through it. It places as
    the plain kube-scheduler does, with the extender protocol's cost: a reference for any HTTP
    extender's latency."""

    @property
    def label(self) -> str:
        """The key as a label value and in object names (``+`` is neither)."""
        return self.key.replace("+", "-")

    @property
    def uses_extender(self) -> bool:
        return self.spec is not None

    def policy(self) -> dict[str, Any]:
        return {
            "apiVersion": "scheduler.policy.crane.io/v1alpha1",
            "kind": "DynamicSchedulerPolicy",
            "spec": {"syncPolicy": sync_policy(), **(self.spec or {})},
        }

    def annotator_policy(self) -> dict[str, Any]:
        """With the rebalancer, the extender's whole policy (its thresholds default to the
        predicates' limits; its targets are judged by the same verdicts) and ``rebalance``."""
        spec: dict[str, Any] = {"syncPolicy": sync_policy(), "hotValue": self.hot_value}
        if self.rebalance is not None:
            spec = {**self.policy()["spec"], "rebalance": self.rebalance}
        return {
            "apiVersion": "scheduler.policy.crane.io/v1alpha1",
            "kind": "DynamicSchedulerPolicy",
            "spec": spec,
        }

    def cannot_run(self) -> str | None:
        """Why this strategy cannot run here (a policy this loadsched refuses, the real
        descheduler out of reach, or a Go build it needs), or ``None``."""
        if self.descheduler and (reason := descheduler_unavailable()) is not None:
            return reason
        if self.trimaran and (reason := trimaran_unavailable()) is not None:
            return reason
        if self.minimal and (reason := minimal_unavailable()) is not None:
            return reason
        if self.spec is None:
            return None
        for policy in (self.policy(), self.annotator_policy()):
            try:
                parse_policy(policy, source=self.key)
            except ConfigError as e:
                return f"this loadsched refuses its policy: {e}"
        return None

    def write(self, folder: Path) -> tuple[Path, Path]:
        """The extender's and the annotator's policy files."""
        folder.mkdir(parents=True, exist_ok=True)
        extender, annotator = folder / f"{self.label}.yaml", folder / f"{self.label}-annotator.yaml"
        extender.write_text(yaml.safe_dump(self.policy(), sort_keys=False))
        annotator.write_text(yaml.safe_dump(self.annotator_policy(), sort_keys=False))
        return extender, annotator


def sync_policy() -> list[dict[str, Any]]:
    """Every entry, or only crane's fields of the two averages where the estimation schema is
    not there yet."""
    try:
        parse_policy({"spec": {"syncPolicy": SYNC}})
    except ConfigError:
        return [{"name": s["name"], "period": s["period"]} for s in SYNC[:2]]
    return list(SYNC)


ESTIMATION = {
    "predicate": PREDICATES,
    "priority": PRIORITIES,
    "hotValue": HOT_VALUE,
    "estimation": KOORDINATOR,
}
"""loadsched's recommended policy: estimation + hot value."""
REBALANCE_PERIOD = PERIOD
"""The rebalancer's round and the descheduler's interval: the metrics' sync period."""
EVICTIONS_PER_NODE = 2
"""Per node and round: the rebalancer's ``limits.perNode``, the descheduler's
``evictionLimits.node``."""
REBALANCE_ROUNDS = 2
"""The rebalancer's ``consecutiveRounds``: a node is acted on after two rounds over ``high``."""
REBALANCE = {
    "enabled": True,
    "period": REBALANCE_PERIOD,
    "consecutiveRounds": REBALANCE_ROUNDS,
    "cooldown": "10m",
    "limits": {"perNode": EVICTIONS_PER_NODE, "perNamespace": 20, "perRound": 20, "perMinute": 60},
}
"""The rebalancer on the bench's 1-minute metrics: thresholds from the predicates (high = the
limit, low = 0.8 × it), two rounds of fresh data over ``high`` (30 s), at most two pods per node
per round as the descheduler's ``evictionLimits.node``; the cooldown outlasts the trace."""


def descheduler_thresholds(high: float) -> tuple[float, float]:
    """The descheduler's ``low`` and ``high`` at the rebalance high ``high``: the rebalancer's
    own (``low`` 0.8 × ``high``)."""
    return round(LOW_OF_HIGH * high, 6), high


def with_rebalance_high(strategy: Strategy, high: float) -> Strategy:
    """``strategy`` with its rebalancer's ``high`` on both 1-minute averages at ``high``
    (``low`` 0.8 × it, as by default) rather than at the limits: the rebalancer keeps
    headroom under them. Unchanged without a rebalancer or at the limit."""
    if strategy.rebalance is None or high == CPU_LIMIT == MEMORY_LIMIT:
        return strategy
    thresholds = [
        {"metric": "cpu_usage_avg_1m", "high": high},
        {"metric": "mem_usage_avg_1m", "high": high},
    ]
    return replace(strategy, rebalance={**strategy.rebalance, "thresholds": thresholds})


STRATEGIES = (
    Strategy("plain", "plain kube-scheduler"),
    Strategy(
        "hot-only",
        "crane: hot value, no estimation",
        {"predicate": PREDICATES, "priority": PRIORITIES, "hotValue": HOT_VALUE},
        HOT_VALUE,
    ),
    Strategy("estimation", "loadsched: estimation + hot value", ESTIMATION, HOT_VALUE),
    Strategy(
        "rebalance",
        "loadsched: estimation + hot value + rebalancer",
        ESTIMATION,
        HOT_VALUE,
        rebalance=REBALANCE,
    ),
    Strategy(
        "descheduler",
        "plain kube-scheduler + the real descheduler",
        descheduler=True,
    ),
    Strategy(
        "loadsched+descheduler",
        "loadsched: estimation + hot value, the real descheduler",
        ESTIMATION,
        HOT_VALUE,
        descheduler=True,
    ),
    Strategy(
        "estimation-watch",
        "loadsched: estimation + hot value, kube-scheduler binds (the chart's default)",
        ESTIMATION,
        HOT_VALUE,
        bind=False,
    ),
    Strategy(
        "minimal-extender",
        "plain kube-scheduler + an HTTP extender that decides nothing (Go, names only)",
        bind=False,
        minimal=True,
    ),
    Strategy(
        "estimation-wait",
        "loadsched: estimation + hot value, a pod no node has room for waits (Koordinator)",
        {
            "predicate": PREDICATES,
            "priority": PRIORITIES,
            "hotValue": HOT_VALUE,
            "estimation": {**KOORDINATOR, "whenNoNodeHasRoom": "wait"},
        },
        HOT_VALUE,
    ),
    Strategy(
        "estimation-keep",
        "loadsched: estimation + hot value, pods gone not subtracted (Koordinator)",
        {
            "predicate": PREDICATES,
            "priority": PRIORITIES,
            "hotValue": HOT_VALUE,
            "estimation": {**KOORDINATOR, "subtractDeparted": False},
        },
        HOT_VALUE,
    ),
    Strategy(
        "estimation-minmax",
        "loadsched: estimation + hot value, scores spread over 0..10",
        {
            "predicate": PREDICATES,
            "priority": PRIORITIES,
            "hotValue": HOT_VALUE,
            "estimation": KOORDINATOR,
            "scoring": {"normalize": "minMax"},
        },
        HOT_VALUE,
    ),
    Strategy(
        "estimation-alone",
        "loadsched: estimation, no hot value, scores spread over 0..10",
        {
            "predicate": PREDICATES,
            "priority": PRIORITIES,
            "estimation": KOORDINATOR,
            "scoring": {"normalize": "minMax"},
        },
    ),
    Strategy(
        "trimaran-tlp",
        "Trimaran TargetLoadPacking (40 %): scheduler-plugins' own",
        trimaran="TargetLoadPacking",
    ),
    Strategy(
        "trimaran-lvrb",
        "Trimaran LoadVariationRiskBalancing: scheduler-plugins' own",
        trimaran="LoadVariationRiskBalancing",
    ),
    Strategy(
        "tlp",
        "loadsched's TargetLoadPacking (40 %)",
        {
            "estimation": TRIMARAN,
            "scoring": {
                "targetLoadPacking": {"targetUtilization": 40, "metric": "cpu_usage_avg_1m"}
            },
        },
    ),
    Strategy(
        "lvrb",
        "loadsched's LoadVariationRiskBalancing",
        {
            "estimation": TRIMARAN,
            "scoring": {
                "loadVariationRiskBalancing": {
                    "margin": 1,
                    "sensitivity": 1,
                    "cpu": {"average": "cpu_usage_avg_1m", "stddev": "cpu_usage_stddev_1m"},
                    "memory": {"average": "mem_usage_avg_1m", "stddev": "mem_usage_stddev_1m"},
                }
            },
        },
    ),
)
BY_KEY = {s.key: s for s in STRATEGIES}
EVICTING = ("rebalance", "descheduler", "loadsched+descheduler")
"""The strategies that move pods once bound (the moves table and its targets)."""


def descheduler_unavailable() -> str | None:
    """Why the real descheduler cannot run on this machine, or ``None``: out of a cluster it
    reads the service-account CA from a fixed path, which the bench mounts in a private mount
    namespace (root and ``unshare`` needed)."""
    if os.geteuid() != 0:
        return "the descheduler needs root here (its CA file is mounted in a private namespace)"
    if shutil.which("unshare") is None:
        return "the descheduler needs unshare (util-linux) to mount its CA file"
    return None


def minimal_unavailable() -> str | None:
    """Why the minimal Go extender cannot run here, or ``None``: built the first time, it
    needs Go."""
    if not minimal_extender_binary().is_file() and shutil.which("go") is None:
        return "the minimal extender is not built and Go is not on PATH to build it"
    return None


def trimaran_unavailable() -> str | None:
    """Why scheduler-plugins' kube-scheduler cannot run here, or ``None``: built the first
    time, it needs Go."""
    if not trimaran_binary().is_file() and shutil.which("go") is None:
        return "Trimaran's scheduler is not built and Go is not on PATH to build it"
    return None


DEFAULT = (
    "plain",
    "hot-only",
    "estimation",
    "trimaran-tlp",
    "trimaran-lvrb",
    "tlp",
    "lvrb",
)
"""What a run compares unless told otherwise: the plain kube-scheduler, crane's model,
loadsched's recommended policy, the real Trimaran's two plugins and loadsched's own policies
of them (``estimation-watch``, ``minimal-extender``, ``estimation-wait``, ``estimation-keep``,
``estimation-minmax``, ``estimation-alone`` and the evicting strategies on request)."""
