"""One filter call's verdicts: which nodes it rejects and why, counted by reason, brought up
to date node by node when the view changes (:class:`Tally`)."""

from __future__ import annotations

import math
from collections import Counter
from copy import copy
from itertools import chain, compress, filterfalse, repeat
from operator import and_, ge, itemgetter, not_
from typing import NamedTuple

from extender.scheduling.metrics import ExtenderMetrics
from extender.scheduling.node_view import PASSES, NodeView, Standing
from extender.scheduling.wording import PER_NODE, Wording
from shared.load_model import WITH_POD, Need, Verdict

NOT_CACHED = ("*", "not-cached")
"""The (metric, reason) of a node refused, under failClosed, because the cache lacks it."""
ANY_HEADROOM = math.inf
"""The room of a node without one: any pod fits."""


def refusal(
    name: str,
    verdict: Verdict | None,
    *,
    fail_closed: bool,
    check: bool,
    need: Need | None = None,
    wording: Wording = PER_NODE,
) -> tuple[str, tuple[str, str]] | None:
    """Why filter rejects node ``name`` (its message, worded as ``wording`` says, and (metric,
    reason)), or ``None`` when it passes: ``verdict`` is ``None`` for a node the cache lacks;
    ``check`` is false for a DaemonSet pod, which load never keeps off a node; ``need`` is the
    pod's estimate, with estimation (:func:`shared.load_model.refusal_for`)."""
    if not check:
        return None
    if verdict is None:
        return not_cached(name, wording) if fail_closed else None
    message = wording.overload(verdict)
    if message is not None:
        return message, verdict.overload_reason or ("*", "overloaded")
    if need is not None and verdict.headrooms:
        return wording.with_pod(verdict, need, name)
    return None


Refusal = tuple[str, tuple[str, str]]
"""A refused node's :data:`Standing`: its message, and (metric, reason)."""


class Tally:
    """One filter call's rejections and counts."""

    __slots__ = (
        "_pending",
        "_reasons",
        "_rejected",
        "check",
        "facts",
        "fail_closed",
        "list_always",
        "need",
        "place",
        "placed_without_room",
        "tight",
        "uncached",
        "unknown",
        "wording",
    )

    def __init__(
        self,
        fail_closed: bool,
        *,
        check: bool,
        need: Need | None = None,
        place: bool = False,
        wording: Wording = PER_NODE,
        list_always: bool = False,
    ) -> None:
        self.fail_closed = fail_closed
        self.wording = wording
        self.list_always = list_always
        """The answer lists the nodes refused even when it passes some (:meth:`listed`)."""
        self.check = check
        self.need = need
        """The pod's estimate (estimation): a node without room for it refuses it."""
        self.place = place
        """When no node has room for the pod, the nodes that refused only for want of room
        pass it (``whenNoNodeHasRoom: place``)."""
        self.placed_without_room = False
        self._rejected: dict[str, str] = {}
        self._reasons: Counter[tuple[str, str]] = Counter()
        self._pending: tuple[list[str], list[Standing | None], list[Refusal]] | None = None
        """What :meth:`judge_all` found refused and has not yet put in :attr:`rejected` and
        :attr:`reasons` (the names asked about, their standings, the refusals among them):
        put in when either is first read, which an answer that passes some node does not
        do, so it is done once the answer is written (:meth:`report`)."""
        self.unknown: Counter[tuple[str, str]] = Counter()
        self.uncached = 0
        self.tight: dict[str, tuple[str, str]] = {}
        """The nodes that refused only for want of room for this pod, and why."""
        self.facts: Facts | None = None
        """What :meth:`judge_all` read of each node asked about, when the answer can be
        brought up to date from it (:meth:`patched`): not for a DaemonSet pod, nor with the
        pod's estimate (:meth:`fit_all`: whether any node has room depends on every one)."""

    @property
    def rejected(self) -> dict[str, str]:
        """The nodes refused, and each one's message."""
        if self._pending is not None:
            self._settle()
        return self._rejected

    @rejected.setter
    def rejected(self, rejected: dict[str, str]) -> None:
        if self._pending is not None:
            self._settle()
        self._rejected = rejected

    @property
    def reasons(self) -> Counter[tuple[str, str]]:
        """The nodes refused, counted by (metric, reason)."""
        if self._pending is not None:
            self._settle()
        return self._reasons

    @reasons.setter
    def reasons(self, reasons: Counter[tuple[str, str]]) -> None:
        if self._pending is not None:
            self._settle()
        self._reasons = reasons

    def _settle(self) -> None:
        assert self._pending is not None
        names, standing, refused = self._pending
        self._pending = None
        messages = map(itemgetter(0), refused)
        self._rejected.update(zip(compress(names, standing), messages, strict=True))
        self._reasons.update(map(itemgetter(1), refused))

    def judge(self, name: str, verdict: Verdict | None) -> bool:
        """True if the node passes; records why not, and what was unknown."""
        if verdict is None:
            self.uncached += 1
        elif verdict.unknown:
            self.unknown.update(verdict.unknown)
        refused = refusal(
            name,
            verdict,
            fail_closed=self.fail_closed,
            check=self.check,
            need=self.need,
            wording=self.wording,
        )
        if refused is None:
            return True
        self.rejected[name], reason = refused
        self.reasons[reason] += 1
        if reason[1] == WITH_POD:
            self.tight[name] = reason
        return False

    def fit_all(self, names: list[str], view: NodeView) -> list[str]:
        """Of ``names`` (nodes that pass on their own), those with room for the pod's
        estimate; records why the others refuse it. The rooms are compared in C."""
        need = self.need
        if need is None:
            return names
        fits: list[bool] | None = None
        for headrooms, brings in (
            (view.cpu_headrooms, need.cpu),
            (view.memory_headrooms, need.memory),
        ):
            if headrooms:
                found = list(
                    map(ge, map(headrooms.get, names, repeat(ANY_HEADROOM)), repeat(brings))
                )
                fits = found if fits is None else list(map(and_, fits, found))
        if fits is None or all(fits):
            return names
        if self.place and not any(fits):
            self.placed_without_room = True
            return names
        self.rejected = dict(self.rejected)  # it may be the view's own, taken whole
        self.reasons = Counter(self.reasons)
        verdicts = view.verdicts
        for name in compress(names, map(not_, fits)):
            refused = self.wording.with_pod(verdicts[name], need, name)
            if refused is not None:
                self.rejected[name], reason = refused
                self.reasons[reason] += 1
                self.tight[name] = reason
        return list(compress(names, fits))

    def judge_all(self, names: list[str], view: NodeView) -> list[str]:
        """:meth:`judge` for many names at once, from the view's indexes (names-only mode);
        the names that pass, in order. One lookup per name, then passes in C over the
        results: a node's standing is ``()`` when it passes, (message, reason) when it does
        not and ``None`` when the view lacks it. What was read is kept as :attr:`facts`.

        When the names include every node the view rejects (as kube-scheduler's do: it asks
        about every node it has not ruled out itself), the rejections and their count by
        reason are the view's own, taken whole rather than rebuilt name by name (a copy is
        made before anything is added to them)."""
        standing = list(map(view.standing.get, names))
        refused: list[Refusal] = list(filter(None, standing))  # type: ignore[arg-type]
        missing = (
            [n for n, s in zip(names, standing, strict=True) if s is None]
            if len(names) - standing.count(PASSES) - len(refused)
            else []
        )
        self.uncached += len(missing)
        unknowns: dict[str, tuple[tuple[str, str], ...]] = {}
        if view.unknowns:
            pairs = zip(names, map(view.unknowns.get, names), strict=True)
            found: list[tuple[str, tuple[tuple[str, str], ...]]] = list(
                filter(itemgetter(1), pairs)  # type: ignore[arg-type]  # None filtered out
            )
            self.unknown.update(chain.from_iterable(map(itemgetter(1), found)))  # each time asked
            unknowns = dict(found)
        if not self.check:
            return names
        # with the pod's estimate, whether a node fits depends on every one (fit_all), even
        # when none passes on its own
        patchable = self.need is None
        if patchable:
            self.facts = Facts(standing, unknowns)
        if refused:
            # every rejected node, each asked about once (names may repeat)
            if len(refused) == len(view.refusals) == len(set(compress(names, standing))):
                self.rejected = view.frozen_refusals()
                self.reasons = Counter(view.reason_counts)  # kept with the answer: a copy
            else:
                # put in :attr:`rejected` and :attr:`reasons` when first read (:attr:`_pending`)
                self._pending = (names, standing, refused)
        if self.fail_closed and missing:
            self.rejected = dict(self.rejected)
            self.rejected.update((n, self.wording.not_cached(n)) for n in missing)
            self.reasons = Counter(self.reasons)
            self.reasons[NOT_CACHED] += len(missing)
            # each node the view lacks stands refused, as it is answered
            if patchable:
                standing = [
                    not_cached(n, self.wording) if s is None else s
                    for n, s in zip(names, standing, strict=True)
                ]
                self.facts = Facts(standing, unknowns)
            return list(filterfalse(self.rejected.__contains__, names))
        return list(compress(names, map(not_, standing))) if refused else names

    def patched(self, names: list[str], at: list[int], view: NodeView) -> tuple[Tally, list[str]]:
        """This tally brought up to date with the view for the nodes at positions ``at`` of
        ``names`` (asked about once each), in a new tally; with the names that pass now. Only
        with :attr:`facts`: each changed node's old standing and unknown values are taken out
        of the counts and its new ones put in, so the cost is the changes', plus passes in C
        over ``names`` for the nodes passed."""
        facts = self.facts
        assert facts is not None
        rejected, reasons = dict(self.rejected), Counter(self.reasons)  # settled before the copy
        tally = copy(self)
        tally.rejected, tally.reasons = rejected, reasons
        unknown = tally.unknown = Counter(self.unknown)
        standing = facts.standing.copy()
        unknowns = facts.unknowns.copy()
        fail_closed = self.fail_closed
        for i in at:
            name = names[i]
            before, now = standing[i], view.standing.get(name)
            tally.uncached += (now is None) - (before is None or before[1:] == (NOT_CACHED,))
            if now is None and fail_closed:
                now = not_cached(name, self.wording)
            if before:
                del rejected[name]
                reasons[before[1]] -= 1
            if now:
                rejected[name] = now[0]
                reasons[now[1]] += 1
            standing[i] = now
            gone = unknowns.pop(name, None)
            if gone:
                unknown.subtract(gone)
            found = view.unknowns.get(name)
            if found:
                unknowns[name] = found
                unknown.update(found)
        tally.reasons, tally.unknown = +reasons, +unknown
        tally.facts = Facts(standing, unknowns)
        return tally, list(compress(names, map(not_, standing))) if rejected else names

    def listed(self, passes: bool) -> dict[str, str]:
        """The refusals the answer lists: all of them when it passes no node, the only answer
        kube-scheduler reads them from (``--filter-rejections``); else none, unless
        :attr:`list_always`. A node left out of an answer that passes others is refused all
        the same, and as unresolvable, as every load refusal is."""
        return self.rejected if self.list_always or not passes else {}

    def place_anyway(self) -> dict[str, tuple[str, str]]:
        """With ``place``, once no node passed: the nodes that refused only for want of room
        for the pod (:attr:`tight`), their refusals forgotten; they pass it."""
        placed = self.tight
        if not (self.place and placed):
            return {}
        self.rejected = {n: m for n, m in self.rejected.items() if n not in placed}
        self.reasons = Counter(self.reasons)
        self.reasons.subtract(placed.values())
        self.reasons = +self.reasons
        self.tight = {}
        self.placed_without_room = True
        return placed

    def report(self, metrics: ExtenderMetrics) -> None:
        metrics.count_filtered(self.reasons)
        if self.placed_without_room:
            metrics.placed_without_room.inc()
        metrics.count_unknown(self.unknown)
        if self.uncached:
            metrics.uncached_nodes.inc(self.uncached)


class Facts(NamedTuple):
    """What a names-only filter answer read of each node asked about (:meth:`Tally.judge_all`)."""

    standing: list[Standing | None]
    """Per position: the node's standing, as answered (a node the view lacks is ``None``, or
    its not-cached refusal under failClosed)."""
    unknowns: dict[str, tuple[tuple[str, str], ...]]
    """The unknown values of the nodes asked about that have some."""


def not_cached(name: str, wording: Wording) -> tuple[str, tuple[str, str]]:
    return wording.not_cached(name), NOT_CACHED
