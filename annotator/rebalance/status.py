"""The rebalancer's status as it publishes it (the ConfigMap ``loadsched-rebalance`` that
``/v1/status?part=rebalance``, the status page and ``kubectl loadsched rebalance`` read): the
last round's nodes and plans, and the last evictions."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from shared.overload_streaks import Observation
from shared.rebalance import NodePlan

LAST_EVICTIONS = 50


@dataclass
class EvictionRecord:
    at: str
    pod: str
    node: str
    target: str
    metric: str
    result: str
    detail: str = ""


@dataclass
class RebalanceStatus:
    round_at: str = ""
    dry_run: bool = False
    nodes: dict[str, int] = field(default_factory=dict)
    observed: list[dict[str, Any]] = field(default_factory=list)
    plans: list[dict[str, Any]] = field(default_factory=list)
    evictions: deque[EvictionRecord] = field(default_factory=lambda: deque(maxlen=LAST_EVICTIONS))

    def as_json(self) -> dict[str, Any]:
        return {
            "roundAt": self.round_at,
            "dryRun": self.dry_run,
            "nodes": self.nodes,
            "overThreshold": self.observed,
            "plans": self.plans,
            "lastEvictions": [e.__dict__ for e in reversed(self.evictions)],
        }


def stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def observed_json(observation: Observation) -> dict[str, Any]:
    return {
        "node": observation.node,
        "state": observation.state,
        "metrics": [
            {
                "metric": m.metric,
                "value": m.value,
                "high": m.high,
                "low": m.low,
                "rounds": m.streak,
            }
            for m in observation.metrics
        ],
    }


def plan_json(plan: NodePlan) -> dict[str, Any]:
    return {
        "node": plan.node,
        "metric": plan.metric,
        "value": round(plan.value, 5),
        "high": plan.high,
        "overshoot": round(plan.overshoot, 6),
        "resource": plan.resource,
        "moves": [
            {
                "pod": m.pod.key,
                "usage": round(m.pod.usage, 6),
                "measured": m.pod.measured,
                "target": m.target,
                "valueAfter": round(m.value_after, 5),
            }
            for m in plan.moves
        ],
        "unplaced": [{"pod": pod, "why": why} for pod, why in plan.unplaced],
    }
