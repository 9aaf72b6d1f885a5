"""What one extender process holds: the rooms it serves, their decisions and metrics, and the
watches each room's readiness waits for."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from extender.dispatch.dispatcher import Dispatcher
from extender.scheduling.explain_routes import ExplainService
from extender.scheduling.metrics import ExtenderMetrics
from extender.scheduling.node_cache import NodeLoadCache
from extender.scheduling.verbs import LoadAwareExtender
from extender.scheduling.wire import Node
from extender.settings import ExtenderSettings
from shared.kube.watching import Reflector
from shared.policy import DynamicSchedulerPolicy

Room = Literal["scheduling", "dispatch"]
ROOMS: tuple[Room, ...] = ("scheduling", "dispatch")


@dataclass
class ExtenderState:
    settings: ExtenderSettings
    policy: DynamicSchedulerPolicy
    clock: Callable[[], datetime]
    metrics: ExtenderMetrics
    extender: LoadAwareExtender
    rooms: frozenset[Room] = frozenset({"scheduling"})
    """What this process serves: the scheduler verbs, job dispatch, or both."""
    node_cache: NodeLoadCache | None = None
    node_reflector: Reflector[Node] | None = None
    watches: dict[Room, list[Reflector[Any]]] = field(default_factory=dict)
    """Per room, the watches besides nodes it needs listed before it is ready (pods and
    quotas for scheduling with elastic quotas; pods, Jobs and CronJobs for dispatch)."""
    dispatcher: Dispatcher | None = None
    explain: ExplainService | None = None
    """``/v1/explain``: with the scheduling room and a node cache."""

    def readiness(self, room: Room | None = None) -> tuple[bool, str]:
        """Whether ``room`` (every room served, when ``None``) can answer now: once the node
        cache and the room's own watches have completed their first list; at once without a
        cluster."""
        if room is not None and room not in self.rooms:
            return False, f"not ready: this process does not serve {room}"
        if self.node_reflector is None:
            return True, "ready: no cluster configured, full-node requests only"
        if not self.node_reflector.synced.is_set():
            return False, "not ready: node cache has not completed its first list"
        rooms = sorted(self.rooms) if room is None else [room]
        waiting = list(
            dict.fromkeys(
                r.name
                for name in rooms
                for r in self.watches.get(name, ())
                if not r.synced.is_set()
            )
        )
        if waiting:
            return False, f"not ready: {' and '.join(waiting)} not listed yet"
        served = " and ".join(rooms)
        return True, f"ready ({served}): node cache holds {len(self.node_cache or ())} nodes"
