"""Filter and prioritize answers, encoded: names-only ones joined from the view's per-node
entries and patched node by node, and the protocol's 0..10 scores."""

from __future__ import annotations

from itertools import repeat
from operator import add
from typing import NamedTuple

import msgspec

from extender.scheduling.node_view import NodeView
from extender.scheduling.tally import Tally
from extender.scheduling.wire import ENCODER, FilterResult, HostPriority
from shared.load_model import (
    MAX_NODE_SCORE,
    LoadRules,
    Verdict,
    normalized_table,
    spread_table,
    to_extender_score,
)
from shared.strategies import PodDemand, pod_score

EXTENDER_SCORES = [to_extender_score(score) for score in range(MAX_NODE_SCORE + 1)]
"""crane's 0..10 for each 0..100 score."""


class Filtered(NamedTuple):
    """A names-only filter answer, encoded, with its tally (whose :attr:`Tally.facts`, when
    it has them, let the answer be patched: :func:`patch_filter`)."""

    answer: msgspec.Raw
    tally: Tally
    passes: bool
    passing: list[str]
    """The nodes passed, in order: the names of the prioritize call that follows."""


def node_score(verdict: Verdict | None, demand: PodDemand | None, rules: LoadRules) -> int | None:
    """A node's 0..100 score: ``None`` for one the cache lacks; the verdict's own score, or
    with a strategy (``demand`` given) the pod's (:func:`pod_score`)."""
    if verdict is None:
        return None
    if demand is None:
        return verdict.score
    return pod_score(verdict.strategy, verdict.score, verdict.hot, rules, demand)


def scaled(raw: list[int | None], *, normalize: bool) -> list[int]:
    """The protocol's 0..10 for each 0..100 score of the nodes asked about (``None``, a node
    the cache lacks, scores 0): crane's mapping, or spread over these nodes with
    ``normalize: minMax``."""
    table = normalized_table(raw) if normalize else EXTENDER_SCORES
    return [0 if score is None else table[score] for score in raw]


def patch_filter(
    filtered: Filtered, names: list[str], at: list[int], view: NodeView
) -> Filtered | None:
    """``filtered`` with the nodes at positions ``at`` of ``names`` as the view has them now
    (:meth:`Tally.patched`), encoded again; ``None`` for an answer without the facts to patch
    (a DaemonSet pod's, or one made with the pod's estimate): it is computed again."""
    if filtered.tally.facts is None:
        return None
    return answered(*filtered.tally.patched(names, at, view))


def answered(tally: Tally, passing: list[str]) -> Filtered:
    """The names-only filter answer that passes ``passing`` and rejects as ``tally`` says."""
    result = FilterResult(NodeNames=passing, FailedAndUnresolvableNodes=tally.listed(bool(passing)))
    return Filtered(msgspec.Raw(ENCODER.encode(result)), tally, bool(passing), passing)


def join_normalized(names: list[str], view: NodeView) -> msgspec.Raw:
    """The prioritize answer for ``names`` with ``normalize: minMax``: each node's entry up to
    its score, joined with its score spread over these nodes; a node the view lacks scores 0."""
    raw = list(map(view.raw_scores.get, names, repeat(-1)))
    low = min(raw, default=0)
    if low < 0:  # a name the view lacks
        known = [None if score < 0 else score for score in raw]
        scores = scaled(known, normalize=True)
        return msgspec.Raw(ENCODER.encode(list(map(HostPriority, names, scores))))
    ends = [b"%d}" % score for score in spread_table(low, max(raw, default=0))]
    prefixes = map(view.score_prefixes.__getitem__, names)
    entries = map(add, prefixes, map(ends.__getitem__, raw))
    return msgspec.Raw(b"".join((b"[", b",".join(entries), b"]")))


class Scores(NamedTuple):
    """A prioritize answer, and each node's entry in it, in order, when it is made of them
    (not with ``normalize: minMax``, whose scores depend on every node asked about)."""

    answer: msgspec.Raw
    entries: list[bytes] | None


def _entry(name: str, view: NodeView) -> bytes:
    """A node's prioritize entry; a node the view lacks scores 0."""
    return view.encoded_scores.get(name) or ENCODER.encode(HostPriority(name, 0))


def _joined(entries: list[bytes]) -> msgspec.Raw:
    return msgspec.Raw(b"".join((b"[", b",".join(entries), b"]")))


def join_scores(names: list[str], view: NodeView) -> Scores:
    """The prioritize answer for ``names``, joined from each node's encoded entry."""
    entries: list[bytes | None] = list(map(view.encoded_scores.get, names))
    try:
        answer = _joined(entries)  # type: ignore[arg-type]
    except TypeError:  # a None among them: a name the view lacks
        entries = [e or _entry(n, view) for n, e in zip(names, entries, strict=True)]
        answer = _joined(entries)  # type: ignore[arg-type]
    return Scores(answer, entries)  # type: ignore[arg-type]


def patch_scores(scores: Scores, names: list[str], at: list[int], view: NodeView) -> Scores | None:
    """``scores`` with the entries of the nodes at positions ``at`` of ``names`` as the view
    has them now: joined again, not computed again."""
    entries = scores.entries
    if entries is None:
        return None
    for i in at:
        entries[i] = _entry(names[i], view)
    return Scores(_joined(entries), entries)
