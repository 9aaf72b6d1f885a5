"""What job dispatch asks of the cluster's nodes, behind one narrow interface.

Dispatch refuses a new Job while no node could take one of its pods. It needs, for the
moment of the request, the nodes a pod may be placed on (those the load model does not
refuse) and what the pods bound to each hold: :class:`Capacity`. The extender implements it
over the scheduler's node view and pod index (:mod:`extender.capacity`); dispatch sees only
this protocol and :mod:`shared.node_fit`. Pure; no I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import datetime
from typing import Protocol

from shared.node_fit import FitNode, Holding, PodNeeds, unfit_reason

MAX_REASONS = 3
"""How many distinct reasons :func:`nowhere_fits` names before counting the rest."""


class Capacity(Protocol):
    def fit_nodes(self, now: datetime) -> Iterable[tuple[FitNode, Iterable[Holding]]]:
        """Every node the load model does not refuse at ``now`` (cordoned ones included:
        :mod:`shared.node_fit` decides on those), each with the pods holding room on it."""
        ...


def nowhere_fits(pod: PodNeeds, nodes: Iterable[tuple[FitNode, Iterable[Holding]]]) -> str | None:
    """``None`` as soon as one of ``nodes`` fits ``pod``; else why none does, as
    kube-scheduler says it: ``0/3 nodes fit: nodeSelector disktype=ssd does not match
    (2 nodes), node is cordoned (1 node)``, the commonest reasons first."""
    reasons: Counter[str] = Counter()
    for node, bound in nodes:
        reason = unfit_reason(pod, node, bound)
        if reason is None:
            return None
        reasons[reason] += 1
    total = sum(reasons.values())
    if not total:
        return "0 nodes fit: every node is overloaded, or none is known"
    ranked = sorted(reasons.items(), key=lambda item: (-item[1], item[0]))
    named = [f"{reason} ({count} node{'s' if count > 1 else ''})" for reason, count in ranked]
    if len(named) > MAX_REASONS:
        rest = sum(count for _, count in ranked[MAX_REASONS:])
        named = [*named[:MAX_REASONS], f"other reasons ({rest} node{'s' if rest > 1 else ''})"]
    return f"0/{total} nodes fit: {', '.join(named)}"
