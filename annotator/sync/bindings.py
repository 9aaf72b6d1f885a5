"""The pods bound lately, from a watch of pods with ``spec.nodeName`` set: recorded as
bindings per node (:class:`annotator.sync.hot_value.BindingWindows`) for the hot value."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from annotator.sync.hot_value import BindingWindows
from shared.pods import POD_DECODER, Pod

__all__ = ["POD_DECODER", "BindingStore", "Pod", "scheduled_at"]


def scheduled_at(pod: Pod) -> datetime | None:
    """When the scheduler bound the pod (its PodScheduled condition), if recorded."""
    for condition in pod.status.conditions or ():
        if (
            condition.type == "PodScheduled"
            and condition.status == "True"
            and condition.lastTransitionTime
        ):
            try:
                return datetime.strptime(
                    condition.lastTransitionTime, "%Y-%m-%dT%H:%M:%SZ"
                ).replace(tzinfo=UTC)
            except ValueError:
                return None
    return None


class BindingStore:
    """Bound pods from a watch (``spec.nodeName`` set), recorded as bindings per node."""

    def __init__(
        self,
        windows: BindingWindows,
        *,
        clock: Callable[[], datetime],
        on_change: Callable[[set[str]], None],
    ) -> None:
        self.windows = windows
        self._clock = clock
        self._on_change = on_change

    def _record(self, pods: Sequence[Pod]) -> None:
        now = self._clock()
        changed = {
            pod.spec.nodeName
            for pod in pods
            if pod.spec.nodeName
            and self.windows.record(
                pod.spec.nodeName, pod.metadata.uid, scheduled_at(pod) or now, now
            )
        }
        if changed:
            self._on_change(changed)

    def replace(self, items: Sequence[Pod]) -> None:
        self._record(items)

    def apply(self, event: str, item: Pod) -> None:
        if event != "DELETED":
            self._record([item])
