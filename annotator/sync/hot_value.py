"""Hot value bookkeeping: bindings per node in sliding windows, one per ``hotValue`` entry.

Each binding is kept once (by pod UID) for as long as the widest window, then pruned. There is
no cluster-wide cap (crane keeps at most 1,024 records for the whole cluster).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from datetime import datetime, timedelta

from shared.crane_policy import HotValuePolicy
from shared.load_model import hot_value


class BindingWindows:
    def __init__(self, entries: Sequence[HotValuePolicy]) -> None:
        self.entries = tuple(entries)
        self.horizon = max((e.time_range for e in self.entries), default=timedelta(0))
        self._bindings: dict[str, deque[tuple[datetime, str]]] = {}
        self._seen: dict[str, datetime] = {}

    def record(self, node: str, pod_uid: str, at: datetime, now: datetime) -> bool:
        """Count one binding of ``pod_uid`` to ``node`` at ``at``; False if already counted or
        older than every window."""
        if pod_uid in self._seen or at <= now - self.horizon:
            return False
        self._seen[pod_uid] = at
        times = self._bindings.setdefault(node, deque())
        if not times or times[-1][0] <= at:
            times.append((at, pod_uid))
        else:  # out of order (a re-list): keep the deque sorted
            ordered = sorted([*times, (at, pod_uid)])
            times.clear()
            times.extend(ordered)
        return True

    def prune(self, now: datetime) -> set[str]:
        """Drop bindings older than the widest window; the nodes that lost some."""
        cutoff = now - self.horizon
        changed: set[str] = set()
        for node, times in list(self._bindings.items()):
            while times and times[0][0] <= cutoff:
                _, uid = times.popleft()
                self._seen.pop(uid, None)
                changed.add(node)
            if not times:
                del self._bindings[node]
        return changed

    def hot_value(self, node: str, now: datetime) -> int:
        return hot_value((t for t, _ in self._bindings.get(node, ())), self.entries, now)

    def nodes(self) -> set[str]:
        return set(self._bindings)

    def __len__(self) -> int:
        return sum(len(t) for t in self._bindings.values())
