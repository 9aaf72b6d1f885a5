"""What one extender app holds: its decisions, metrics and the optional node watch."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from extender.dispatch.dispatcher import Dispatcher
from extender.scheduling.metrics import ExtenderMetrics
from extender.scheduling.node_view import NodeLoadCache
from extender.scheduling.verbs import LoadAwareExtender
from extender.scheduling.wire import Node
from extender.settings import ExtenderSettings
from shared.kube.watching import Reflector
from shared.policy import DynamicSchedulerPolicy


@dataclass
class ExtenderState:
    settings: ExtenderSettings
    policy: DynamicSchedulerPolicy
    clock: Callable[[], datetime]
    metrics: ExtenderMetrics
    extender: LoadAwareExtender
    node_cache: NodeLoadCache | None = None
    node_reflector: Reflector[Node] | None = None
    watches: list[Reflector[Any]] = field(default_factory=list)
    """Watches besides nodes (pods, quotas, dispatched Jobs), when enabled."""
    dispatcher: Dispatcher | None = None

    def readiness(self) -> tuple[bool, str]:
        """Ready once the node cache has synced, or at once without a cluster."""
        if self.node_reflector is None:
            return True, "ready: no cluster configured, full-node requests only"
        if not self.node_reflector.synced.is_set():
            return False, "not ready: node cache has not completed its first list"
        waiting = [r.name for r in self.watches if not r.synced.is_set()]
        if waiting:
            return False, f"not ready: {' and '.join(waiting)} not listed yet"
        return True, f"ready: node cache holds {len(self.node_cache or ())} nodes"
