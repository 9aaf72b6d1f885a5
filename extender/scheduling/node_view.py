"""Every cached node's verdict, indexed for names-only requests and kept up to date node by
node (:class:`NodeView`), with the log of the nodes changed (:class:`ChangeLog`) that kept
answers are checked against."""

from __future__ import annotations

from collections import Counter

from extender.scheduling.wire import ENCODER, HostPriority
from extender.scheduling.wording import PER_NODE, Wording
from shared.load_model import Verdict

Standing = tuple[()] | tuple[str, tuple[str, str]]
"""A node's filter outcome in a :class:`NodeView`: (rejection message, (metric, reason)), or
:data:`PASSES`."""

PASSES: Standing = ()
"""A passing node's standing: empty, so false, and one object, so counted by identity."""

CHANGES_KEPT = 4096
"""How many node changes a :class:`ChangeLog` names back (:meth:`ChangeLog.since`)."""


class ChangeLog:
    """The nodes changed, one version per change: :meth:`since` names those changed after a
    version, the last :data:`CHANGES_KEPT` changes back."""

    __slots__ = ("_base", "_names", "version")

    def __init__(self) -> None:
        self.version = 0
        self._names: list[str] = []
        self._base = 0
        """The version of the first change in ``_names``."""

    def note(self, name: str) -> None:
        self.version += 1
        names = self._names
        names.append(name)
        if len(names) > CHANGES_KEPT:
            half = len(names) // 2
            del names[:half]
            self._base += half

    def since(self, version: int) -> list[str] | None:
        """The nodes changed after ``version`` (in order, repeats kept); ``None`` when that is
        further back than the changes kept."""
        if version < self._base:
            return None
        return self._names[version - self._base :]


def _filter_facts(view: NodeView, name: str) -> tuple[object, ...]:
    """What a names-only filter answer reads of node ``name`` in ``view``: its standing (``None``
    when the view lacks it), its unknown values and its rooms. Equal facts, equal answers."""
    verdict = view.verdicts.get(name)
    return (
        view.standing.get(name),
        view.unknowns.get(name),
        verdict.headrooms if verdict is not None else None,
    )


class NodeView:
    """Every cached node's verdict, indexed for names-only requests and kept up to date node by
    node (:meth:`put`, :meth:`drop`), so that a change costs in proportion to the nodes changed
    and a request one dictionary lookup per name asked about, in C (no per-name Python):

    - ``standing``: every cached node's (rejection message, (metric, reason)), ``()`` when it
      passes (:data:`PASSES`);
    - ``encoded_scores``: its prioritize entry, already JSON (joined into the answer as is);
      ``raw_scores`` its 0..100 score and ``score_prefixes`` its entry up to the score, for
      answers that spread the scores over the nodes asked about (``normalize: minMax``);
    - ``unknowns``: its unknown values, for nodes that have some;
    - ``cpu_headrooms`` and ``memory_headrooms``: with estimation, the headroom a passing node
      leaves the pod being placed (cores, bytes; :class:`shared.load_model.Headroom`), for
      nodes that have one;
    - ``reasons``: the (metric, reason) of each rejected node, and ``reason_counts`` how many
      rejected nodes have each: a request that asks about every rejected node (kube-scheduler
      asks about every node it has not ruled out itself) takes these and ``refusals`` whole.

    ``clean`` (passing with every value known), ``scores`` and ``refusals`` are the same facts
    for other readers. ``version`` changes with every change, so answers computed from one
    version can be kept until the next (:class:`extender.scheduling.memos.AnswerMemo`).
    ``changes`` names the nodes changed since a version, so an answer about nodes none of which
    changed can be kept longer (:class:`extender.scheduling.memos.WindowMemo`);
    ``filter_changes`` names only the changes a filter answer can see (a node's standing,
    unknown values or rooms; :func:`_filter_facts`): a passing node whose new values still pass
    changes its score, not the filter answers about it."""

    __slots__ = (
        "_frozen",
        "_frozen_version",
        "clean",
        "changes",
        "cpu_headrooms",
        "encoded_scores",
        "filter_changes",
        "raw_scores",
        "memory_headrooms",
        "reason_counts",
        "reasons",
        "refusals",
        "score_prefixes",
        "scores",
        "standing",
        "unknowns",
        "verdicts",
        "wording",
    )

    def __init__(self, wording: Wording = PER_NODE) -> None:
        self.wording = wording
        self.changes = ChangeLog()
        self.filter_changes = ChangeLog()
        self.verdicts: dict[str, Verdict] = {}
        self.clean: set[str] = set()
        self.scores: dict[str, HostPriority] = {}
        self.encoded_scores: dict[str, bytes] = {}
        self.raw_scores: dict[str, int] = {}
        self.score_prefixes: dict[str, bytes] = {}
        self.standing: dict[str, Standing] = {}
        self.refusals: dict[str, str] = {}
        self.reasons: dict[str, tuple[str, str]] = {}
        self.reason_counts: Counter[tuple[str, str]] = Counter()
        self.unknowns: dict[str, tuple[tuple[str, str], ...]] = {}
        self.cpu_headrooms: dict[str, float] = {}
        self.memory_headrooms: dict[str, float] = {}
        self._frozen: dict[str, str] = {}
        self._frozen_version = 0

    @property
    def version(self) -> int:
        """Changes with every change to any node."""
        return self.changes.version

    def frozen_refusals(self) -> dict[str, str]:
        """``refusals`` as of this version: a copy made once per version, so that what a
        caller keeps does not change under it, and the same object until the next change
        (callers read it, never change it)."""
        if self._frozen_version != self.version:
            self._frozen = dict(self.refusals)
            self._frozen_version = self.version
        return self._frozen

    def put(self, name: str, verdict: Verdict) -> None:
        if self.verdicts.get(name) is verdict:
            return  # re-evaluated to the very same verdict: nothing to change
        before = _filter_facts(self, name)
        self._forget(name)
        self.verdicts[name] = verdict
        score = self.scores[name] = HostPriority(name, verdict.extender_score)
        self.encoded_scores[name] = encoded = ENCODER.encode(score)
        self.raw_scores[name] = verdict.score
        self.score_prefixes[name] = encoded[: encoded.rindex(b":") + 1]
        message = self.wording.overload(verdict)
        if message is None:
            self.standing[name] = PASSES
        else:
            reason = verdict.overload_reason or ("*", "overloaded")
            self.standing[name] = (message, reason)
            self.refusals[name] = message
            self.reasons[name] = reason
            self.reason_counts[reason] += 1
        if verdict.unknown:
            self.unknowns[name] = verdict.unknown
        for headroom in verdict.headrooms:
            headrooms = self.cpu_headrooms if headroom.resource == "cpu" else self.memory_headrooms
            headrooms[name] = headroom.left
        if verdict.overload is None and not verdict.unknown:
            self.clean.add(name)
        self.changes.note(name)
        if _filter_facts(self, name) != before:
            self.filter_changes.note(name)

    def drop(self, name: str) -> None:
        """The node is gone from the view."""
        self._forget(name)
        self.changes.note(name)
        self.filter_changes.note(name)

    def _forget(self, name: str) -> None:
        reason = self.reasons.get(name)
        if reason is not None:
            left = self.reason_counts[reason] - 1
            if left:
                self.reason_counts[reason] = left
            else:
                del self.reason_counts[reason]
        for index in (
            self.verdicts,
            self.scores,
            self.encoded_scores,
            self.raw_scores,
            self.score_prefixes,
            self.standing,
            self.refusals,
            self.reasons,
            self.unknowns,
            self.cpu_headrooms,
            self.memory_headrooms,
        ):
            index.pop(name, None)
        self.clean.discard(name)
