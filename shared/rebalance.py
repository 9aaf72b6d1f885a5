"""The rebalancer's decisions, pure: which pods may move, the fewest that cover the overshoot,
and where each would go; which nodes have stayed overloaded is :mod:`shared.overload_streaks`'s
to say, the mark a move leaves :mod:`shared.rebalance_marks`'s.

- **When a node is acted on** (:mod:`shared.overload_streaks`): a round counts for a node's
  metric only with a *new* fresh sample (a timestamp later than the last counted); above
  ``high`` it adds one to the metric's streak, under it resets the streak. A missing, stale or
  future value resets it and marks the node ``stale``: nothing on it is moved. A node acts once
  a streak reaches ``consecutiveRounds``; after pods were moved off it, it is held until the
  metric can show them gone (the metric's window and delay), and its streaks start again.
- **Which pods may move** (:func:`shared.movable_pods.skip_reason`): pods a controller
  recreates (ReplicaSet, StatefulSet, Job, ReplicationController: never bare, DaemonSet or
  mirror pods), running, not terminating, at or below ``maxPriority`` (system-critical never),
  in a namespace and with labels the policy selects, not opted out (annotation
  ``loadsched.io/evict: "false"``), without local storage (``emptyDir``, ``hostPath``: lost on
  a move) unless opted in (``loadsched.io/evict: "true"``), nor with what the target check
  below does not judge (required pod affinity or anti-affinity, a ``DoNotSchedule`` topology
  spread, host ports, persistent volumes: the replacement could find no node but the one it
  left) unless opted in, and whose workload was not moved within ``cooldown``; with elastic
  quotas, whose replacement its namespace's quota admits (the controller asks the quota
  ledger).
- **Which first** (:func:`fewest_covering`): one pod per workload at most (the one using the
  most, :func:`one_per_workload`), and of those the fewest whose usage covers the overshoot
  (the node's value above ``high``, in cores or bytes); among sets of that size, online
  services (``preemptionPolicy: Never``) last, then lowest priority, then newest. A pod's
  usage is its measured one, else its request × the estimation factor.
- **Only moves that help** (:func:`plan_node`): each pod is moved only if a node passes
  loadsched's own filter for it (the same verdicts as the extender's, estimation included,
  with the pods already planned there counted) and node fit (selector, required node
  affinity, taints, requests), and
  stays under every ``high`` with the pod's usage added; the best-scored such node is its
  target. If a pod of the set has none, the fewest of the pods that have one are taken
  instead: they cover the overshoot, or, falling short, still lower the node (each onto a
  node that stays under every ``high``); the node is acted on again once its hold ends.
- **No loops**: the node a workload's pod left carries ``loadsched.io/rebalanced-from``
  (:mod:`shared.rebalance_marks`): the extender refuses that workload's pods there until the
  mark's time (``cooldown``), which the rebalancer ends early once the node is under ``low``.
  Beside it, ``loadsched.io/rebalanced-usage`` carries the pod's usage: while the mark holds,
  the replacement is placed only where that usage fits, so it does not land where its target
  check would not have sent it and overload another node.

Time is passed in; nothing here does I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from shared.estimation import Need, NodeSize
from shared.load_model import Verdict, refusal_for
from shared.movable_pods import PodFacts
from shared.node_fit import FitNode, Holding, PodNeeds, unfit_reason
from shared.overload_streaks import Observation, Threshold
from shared.policy_fields import Resource
from shared.quantity import ResourceList
from shared.rebalance_marks import refused_here

# -- which first --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Candidate:
    """A pod that may move, with what moving it takes off its node."""

    facts: PodFacts
    usage: float
    """Of the acting resource (cores or bytes): measured, else estimated."""
    measured: bool
    online: bool
    """``preemptionPolicy: Never``: an online service, moved last."""
    created: str
    needs: PodNeeds
    """For node fit on a target."""
    need: Need
    """Cores and bytes it takes on a target: measured where known, else estimated."""
    estimate: Need | None = None
    """What the extender's estimation takes it to use, when it differs from :attr:`need`: the
    filter asks the replacement for room for this raised to :attr:`need` (the usage the node's
    ``loadsched.io/rebalanced-usage`` carries), and so does a target here."""

    @property
    def key(self) -> str:
        return f"{self.facts.namespace}/{self.facts.name}"

    @property
    def request(self) -> ResourceList:
        """What it holds of a node's allocatable (a :class:`shared.node_fit.Holding`)."""
        return self.needs.requests


def _preference(candidate: Candidate) -> tuple[bool, int, str]:
    # online services last, then lowest priority, then newest (ISO timestamps sort by time)
    return (candidate.online, candidate.facts.priority, _descending(candidate.created))


def _descending(text: str) -> str:
    return "".join(chr(0x10FFFF - ord(c)) for c in text)


def fewest_covering(candidates: Sequence[Candidate], overshoot: float) -> list[Candidate]:
    """The fewest candidates whose usage adds up to ``overshoot`` (all of them if together
    they fall short), preferring, among sets of that size, online services last, then lowest
    priority, then newest.

    The size is the shortest prefix of the candidates by usage, largest first (no set of that
    many covers more). Then, in order of preference, a pod is taken when the pods left can
    still cover the rest with the places left: the chosen set has that size and is the most
    preferred one this greedy finds."""
    candidates = [c for c in candidates if c.usage > 0]  # moving them takes nothing off
    if overshoot <= 0 or not candidates:
        return []
    # float sums of usages: a set within a billionth of the overshoot covers it
    overshoot -= 1e-9 * max(overshoot, 1.0)
    by_usage = sorted(candidates, key=lambda c: c.usage, reverse=True)
    size, total = 0, 0.0
    for candidate in by_usage:
        size += 1
        total += candidate.usage
        if total >= overshoot:
            break
    if total < overshoot:
        return sorted(by_usage, key=_preference)
    chosen: list[Candidate] = []
    rest = overshoot
    remaining = sorted(candidates, key=_preference)
    for index, candidate in enumerate(remaining):
        places = size - len(chosen) - 1
        if places < 0:
            break
        others = sorted((c.usage for c in remaining[index + 1 :]), reverse=True)[:places]
        if candidate.usage + math.fsum(others) >= rest:
            chosen.append(candidate)
            rest -= candidate.usage
            if rest <= 0:
                break
    if math.fsum(c.usage for c in chosen) < overshoot:  # rounding left it short
        return by_usage[:size]
    return chosen


def one_per_workload(candidates: Sequence[Candidate]) -> list[Candidate]:
    """A workload loses at most one pod a round (never more than any ``maxUnavailable`` of at
    least 1 allows): of its pods, the one using the most."""
    best: dict[str, Candidate] = {}
    for candidate in candidates:
        key = candidate.facts.workload or candidate.facts.uid
        kept = best.get(key)
        if kept is None or candidate.usage > kept.usage:
            best[key] = candidate
    return list(best.values())


# -- only moves that help -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TargetNode:
    """Another node, as a move onto it is judged."""

    name: str
    verdict: Verdict
    """The extender's verdict of the node now (estimation included)."""
    fit: FitNode
    bound: tuple[Holding, ...]
    """The pods holding room on it (for requests)."""
    size: NodeSize
    values: Mapping[str, float]
    """The fresh value of each threshold's metric; a metric missing here is unknown."""
    marks: Mapping[str, datetime] = field(default_factory=dict)
    score: int = 0
    """The extender's 0..100 score of the node for the pod class (crane's or the strategy's)."""


@dataclass(frozen=True, slots=True)
class Move:
    pod: Candidate
    target: str
    value_after: float
    """The target's value of the acting metric with the pod's usage added."""


@dataclass(frozen=True, slots=True)
class NodePlan:
    node: str
    metric: str
    resource: Resource
    value: float
    high: float
    overshoot: float
    """Cores or bytes above ``high``."""
    moves: tuple[Move, ...]
    unplaced: tuple[tuple[str, str], ...] = ()
    """(pod, why) of a chosen pod no node takes: then nothing moves."""


def target_reason(
    pod: Candidate,
    target: TargetNode,
    thresholds: Sequence[Threshold],
    added: Need,
    now: datetime,
    holding: Sequence[Holding] = (),
) -> str | None:
    """Why ``target`` would not take ``pod`` (with ``added`` already planned there), or
    ``None``: the extender's filter, node fit, the workload's mark, every ``high``."""
    if target.verdict.overload is not None:
        return "overloaded"
    if refused_here(pod.facts.workload, target.marks, now):
        return "moved-off-lately"
    total = Need(added.cpu + pod.need.cpu, added.memory + pod.need.memory)
    # the filter asks the replacement for its estimate raised to the usage the mark carries
    asked = pod.estimate.at_least(pod.need) if pod.estimate is not None else pod.need
    if (
        refusal_for(
            target.verdict, Need(added.cpu + asked.cpu, added.memory + asked.memory), target.name
        )
        is not None
    ):
        return "no-headroom"
    if unfit_reason(pod.needs, target.fit, (*target.bound, *holding)) is not None:
        return "does-not-fit"
    for threshold in thresholds:
        value = target.values.get(threshold.metric)
        size = target.size.capacity(threshold.resource)
        if value is None or not size:
            return "unknown-load"
        if value + total.of(threshold.resource) / size >= threshold.high:
            return "would-overload"
    return None


def plan_node(
    observation: Observation,
    threshold: Threshold,
    size: NodeSize,
    candidates: Sequence[Candidate],
    targets: Sequence[TargetNode],
    thresholds: Sequence[Threshold],
    now: datetime,
    planned: dict[str, Need] | None = None,
) -> NodePlan | None:
    """The moves that bring ``observation``'s node back under ``threshold.high``, or a plan
    with none and why (``unplaced``); ``None`` when nothing is over. ``planned`` (target →
    what moves planned this round add) is updated with the moves made.

    When a pod of the fewest covering the overshoot has no target, the fewest of the pods that
    have one are taken instead: they cover it, or, falling short, they still lower the node
    (each onto a node that stays under every ``high``); the pods no node takes are in
    ``unplaced``."""
    acting = observation.acting
    capacity = size.capacity(threshold.resource)
    if acting is None or acting.value is None or not capacity:
        return None
    overshoot = (acting.value - threshold.high) * capacity
    pool = one_per_workload(candidates)
    planned = planned if planned is not None else {}
    judged = _Placing(observation.node, threshold, targets, thresholds, now, planned)
    moves, unplaced = judged.place(fewest_covering(pool, overshoot))
    if unplaced:
        # a set that does not all move may not bring the node under: take the fewest of the
        # pods a node takes instead (the planning of the first set undone)
        judged.undo(moves)
        refused = {pod for pod, _ in unplaced}
        placeable = [c for c in pool if c.key not in refused]
        moves, more = judged.place(fewest_covering(placeable, overshoot))
        unplaced += more
    return NodePlan(
        observation.node,
        threshold.metric,
        threshold.resource,
        acting.value,
        threshold.high,
        overshoot,
        tuple(moves),
        tuple(unplaced),
    )


@dataclass(frozen=True, slots=True)
class _Placing:
    """Targets for the pods moved off ``source``, the moves planned this round counted."""

    source: str
    threshold: Threshold
    targets: Sequence[TargetNode]
    thresholds: Sequence[Threshold]
    now: datetime
    planned: dict[str, Need]
    """Target → what the moves planned this round add (updated)."""

    def place(self, chosen: Sequence[Candidate]) -> tuple[list[Move], list[tuple[str, str]]]:
        """Each of ``chosen`` onto the best-scored node that takes it, in turn; the moves, and
        the pods no node takes with why."""
        holdings: dict[str, list[Holding]] = {}
        moves: list[Move] = []
        unplaced: list[tuple[str, str]] = []
        for pod in chosen:
            passing: list[TargetNode] = []
            reasons: dict[str, int] = {}
            for target in self.targets:
                if target.name == self.source:
                    continue
                added = self.planned.get(target.name, Need(0.0, 0.0))
                why = target_reason(
                    pod, target, self.thresholds, added, self.now, holdings.get(target.name, ())
                )
                if why is None:
                    passing.append(target)
                else:
                    reasons[why] = reasons.get(why, 0) + 1
            if not passing:
                summary = ", ".join(f"{n} {why}" for why, n in sorted(reasons.items()))
                unplaced.append((pod.key, f"no node takes it ({summary or 'no other node'})"))
                continue
            target = min(passing, key=lambda t: (-t.score, t.name))  # the best, then by name
            name = target.name
            added = self.planned.get(name, Need(0.0, 0.0))
            self.planned[name] = Need(added.cpu + pod.need.cpu, added.memory + pod.need.memory)
            holdings.setdefault(name, []).append(pod)
            target_size = target.size.capacity(self.threshold.resource) or math.inf
            after = (
                target.values.get(self.threshold.metric, 0.0)
                + self.planned[name].of(self.threshold.resource) / target_size
            )
            moves.append(Move(pod, name, after))
        return moves, unplaced

    def undo(self, moves: Sequence[Move]) -> None:
        """Take ``moves`` out of what is planned."""
        for move in moves:
            added = self.planned[move.target]
            self.planned[move.target] = Need(
                added.cpu - move.pod.need.cpu, added.memory - move.pod.need.memory
            )
