"""The nodes as the rebalancer reads them from the node watch (:class:`NodeFacts`), the
marks they carry (:func:`marks_of`, :func:`usages_of`), and the targets a replacement may go to
(:func:`targets_of`), judged with the extender's own verdicts. Pure: the nodes, their bound
pods and the time are passed in."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from annotator.rebalance.pods import BoundPod
from shared.annotation_keys import REBALANCED_FROM_ANNOTATION, REBALANCED_USAGE_ANNOTATION
from shared.estimation import Need, NodeSize
from shared.load_model import NodeLoad, evaluate
from shared.node_fit import FitNode
from shared.overload_streaks import Observation
from shared.rebalance import TargetNode
from shared.rebalance_marks import decode_departures, decode_usages
from shared.rules import LoadRules


@dataclass
class NodeFacts:
    """What the rebalancer reads of a node from the watch."""

    annotations: Mapping[str, str]
    size: NodeSize
    fit: FitNode


def marks_of(node: NodeFacts | None) -> dict[str, datetime]:
    """The node's ``loadsched.io/rebalanced-from`` marks; none for no node."""
    return decode_departures(node.annotations.get(REBALANCED_FROM_ANNOTATION) if node else None)


def usages_of(node: NodeFacts | None) -> dict[str, Need]:
    """The node's ``loadsched.io/rebalanced-usage``: what each moved workload's pod used."""
    return decode_usages(node.annotations.get(REBALANCED_USAGE_ANNOTATION) if node else None)


def targets_of(
    facts: Mapping[str, NodeFacts],
    observations: Mapping[str, Observation],
    bound_pods: Callable[[str], Sequence[BoundPod]],
    rules: LoadRules,
    now: datetime,
) -> list[TargetNode]:
    """Every observed node not ``over``, ``stale`` or ``held``, with the extender's verdict of
    it now, its bound pods, its fresh values and its marks."""
    targets = []
    for name, node in facts.items():
        observation = observations.get(name)
        if observation is None or observation.state in ("over", "stale", "held"):
            continue
        targets.append(_target(name, node, observation, bound_pods(name), rules, now))
    return targets


def _target(
    name: str,
    node: NodeFacts,
    observation: Observation,
    bound: Sequence[BoundPod],
    rules: LoadRules,
    now: datetime,
) -> TargetNode:
    placements = [b.placement for b in bound] if rules.reads_pods else []
    load = NodeLoad.from_annotations(name, node.annotations, rules, node.size)
    verdict = evaluate(load, rules, now, placements)
    values = {m.metric: m.value for m in observation.metrics if m.value is not None}
    return TargetNode(
        name=name,
        verdict=verdict,
        fit=node.fit,
        bound=tuple(bound),
        size=node.size,
        values=values,
        marks=marks_of(node),
        score=verdict.score,
    )
