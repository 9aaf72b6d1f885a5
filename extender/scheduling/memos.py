"""Names-only answers kept between requests: by the view version (:class:`AnswerMemo`) or by
the window of nodes asked about while none of them changes (:class:`WindowMemo`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from extender.scheduling.node_view import ChangeLog, NodeView

K = TypeVar("K", bound=Hashable)
A = TypeVar("A")


class AnswerMemo(Generic[K, A]):
    """Names-only answers computed from one :class:`NodeView` version, by the node names asked
    about: for scores that depend on the pod (a strategy's), which the view cannot keep per
    node. Filter and pod-independent scores need none: they are joined from the view's
    per-node indexes on every request."""

    def __init__(self, size: int = 4) -> None:
        self._size = size
        self._version = -1
        self._answers: dict[K, A] = {}

    def get(self, version: int, key: K) -> A | None:
        if version != self._version:
            self._answers.clear()
            self._version = version
            return None
        return self._answers.get(key)

    def put(self, key: K, answer: A) -> None:
        """Keep ``answer``, dropping the oldest one kept when full."""
        if len(self._answers) >= self._size:
            del self._answers[next(iter(self._answers))]
        self._answers[key] = answer


class _Window(Generic[A]):
    __slots__ = ("answer", "names", "nodes", "positions", "version")

    def __init__(self, version: int, names: list[str], answer: A) -> None:
        self.version = version
        self.names = names
        self.nodes: frozenset[str] | None = None
        self.positions: dict[str, int] | None = None
        self.answer = answer


NAMES_KEPT = 200_000
"""How many names asked about the windows of a :class:`WindowMemo` hold, all told: at 5,000
nodes, every window of a lap of kube-scheduler's at any ``percentageOfNodesToScore`` (10 at
its adaptive 10 %, 2 at 50 %) many times over, and 40 windows of the whole cluster. The
filter and prioritize memos together hold about 250 bytes per name (the names, their
positions, the answers): about 50 MB when full."""

Patch = Callable[[A, list[str], list[int], NodeView], "A | None"]
"""Brings an answer about ``names`` up to date with the view where the nodes at the positions
given changed; ``None`` when it cannot (the answer is then computed again)."""


def run_now(call: Callable[[], None]) -> None:
    call()


class WindowMemo(Generic[A]):
    """Names-only answers by the node names asked about, exactly as sent (the bytes of
    ``NodeNames``), kept while the node view changes none of those nodes.

    kube-scheduler asks about a window of nodes at a time and moves it along the cluster pod
    after pod, so the same windows come back again and again; meanwhile the annotator rewrites
    a few nodes a second (at 5,000 nodes and crane's 3-minute period, 28 a second), so a
    view version rarely lasts from one pod to the next. An answer kept here is checked against
    the nodes changed since it was computed (``changes``: the :class:`ChangeLog` of the view
    that names every change the answer can see), in proportion to those changes, not to the
    nodes asked about; the first check makes the window's set of names, and is not made when
    the changes have most likely touched the window (a window of every node, or many changes).
    Windows are kept up to ``names_kept`` names asked about, all told (:data:`NAMES_KEPT`); the
    least recently used goes first.

    With ``patch``, an answer whose nodes did change is brought up to date node by node
    instead (prioritize: each node's entry is its own), so a change costs its own nodes, not
    the window's."""

    def __init__(
        self,
        changes: Callable[[NodeView], ChangeLog],
        names_kept: int = NAMES_KEPT,
        patch: Patch[A] | None = None,
        release: Callable[[Callable[[], None]], object] = run_now,
    ) -> None:
        self._changes = changes
        self._release = release
        """Runs the freeing of the windows :meth:`put` drops (their names and answers, a few
        thousand objects each): at once by default; the served extender's once the answer
        that dropped them is written."""
        self._budget = names_kept
        self._kept = 0
        """The names asked about in the windows kept, all told."""
        self._patch = patch
        self._windows: dict[Hashable, _Window[A]] = {}

    def get(self, view: NodeView, key: Hashable) -> A | None:
        windows = self._windows
        window = windows.pop(key, None)
        if window is None:
            return None
        if not self._holds(window, view):
            self._kept -= len(window.names)
            return None
        windows[key] = window
        return window.answer

    def _holds(self, window: _Window[A], view: NodeView) -> bool:
        """Whether ``window``'s answer holds for the view as it is now (patched if need be)."""
        log = self._changes(view)
        if window.version == log.version:
            return True
        changed = log.since(window.version)
        if changed is None:
            return False
        if self._patch is not None:
            return self._patched(window, changed, view)
        if _likely_touched(len(window.names), len(changed), view):
            return False
        if window.nodes is None:
            window.nodes = frozenset(window.names)
        if not window.nodes.isdisjoint(changed):
            return False
        window.version = log.version
        return True

    def _patched(self, window: _Window[A], changed: list[str], view: NodeView) -> bool:
        assert self._patch is not None
        positions = window.positions
        if positions is None:
            names = window.names
            positions = window.positions = dict(zip(names, range(len(names)), strict=True))
        if len(positions) != len(window.names):
            return False  # a name asked about twice: one position each is not enough
        at = sorted({positions[n] for n in changed if n in positions})
        if at:
            answer = self._patch(window.answer, window.names, at, view)
            if answer is None:
                return False
            window.answer = answer
        window.version = self._changes(view).version
        return True

    def put(self, view: NodeView, key: Hashable, names: list[str], answer: A) -> None:
        """Keep ``answer``, computed from ``view`` as it is now for ``names``: the least
        recently used windows go first while the names kept would be over the budget."""
        windows = self._windows
        replaced = windows.pop(key, None)
        if replaced is not None:
            self._kept -= len(replaced.names)
        dropped: list[_Window[A]] = []
        while windows and self._kept + len(names) > self._budget:
            dropped.append(windows.pop(next(iter(windows))))
            self._kept -= len(dropped[-1].names)
        windows[key] = _Window(self._changes(view).version, names, answer)
        self._kept += len(names)
        if dropped:
            self._release(dropped.clear)


def every_change(view: NodeView) -> ChangeLog:
    """What a prioritize answer can see: any change (:attr:`NodeView.changes`)."""
    return view.changes


def filter_changes(view: NodeView) -> ChangeLog:
    """What a filter answer can see (:attr:`NodeView.filter_changes`)."""
    return view.filter_changes


def _likely_touched(asked: int, changes: int, view: NodeView) -> bool:
    """Whether ``changes`` node changes, spread over the view, have most likely touched a
    window of ``asked`` nodes (below a one-in-ten chance of none): checking would cost a set
    of the window's names for an answer most likely to be computed anyway."""
    cluster = len(view.verdicts)
    if asked >= cluster:
        return True
    return changes * math.log1p(-asked / cluster) < _UNTOUCHED_AT_LEAST


_UNTOUCHED_AT_LEAST = math.log(0.1)
