"""The rebalancer's limits within a round, pure: of a node's planned moves, those that
``perNode``, ``perNamespace``, ``perRound`` and one pod per workload allow
(:func:`within_limits`), and what the round may still evict (:class:`RoundAllowance`). The
rate over time (``perMinute``) is :class:`annotator.rebalance.moving.Mover`'s token bucket."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from shared.rebalance import Move
from shared.rebalance_policy import RebalanceLimits


@dataclass
class RoundAllowance:
    """What a round may still evict: in all, and per namespace so far."""

    round: int
    per_namespace: dict[str, int] = field(default_factory=dict)

    def spend(self, moves: Sequence[Move]) -> None:
        """Counts ``moves`` as made."""
        self._count(moves, 1)

    def give_back(self, moves: Sequence[Move]) -> None:
        """Counts ``moves``, spent before, as not made after all (their evictions did not
        happen)."""
        self._count(moves, -1)

    def _count(self, moves: Sequence[Move], sign: int) -> None:
        self.round -= sign * len(moves)
        for move in moves:
            namespace = move.pod.facts.namespace
            self.per_namespace[namespace] = self.per_namespace.get(namespace, 0) + sign


def within_limits(
    moves: Sequence[Move], limits: RebalanceLimits, allowance: RoundAllowance
) -> tuple[list[Move], int]:
    """Of ``moves``, in order, those the limits allow: at most ``perNode``, what the round has
    left in all and in each namespace, one pod per workload; and how many were held back."""
    allowed: list[Move] = []
    workloads: set[str] = set()
    counted: dict[str, int] = {}
    held_back = 0
    for move in moves:
        facts = move.pod.facts
        workload = facts.workload or ""
        namespace_count = allowance.per_namespace.get(facts.namespace, 0) + counted.get(
            facts.namespace, 0
        )
        if (
            len(allowed) >= limits.per_node
            or allowance.round <= len(allowed)
            or namespace_count >= limits.per_namespace
            or workload in workloads
        ):
            held_back += 1
            continue
        workloads.add(workload)
        counted[facts.namespace] = counted.get(facts.namespace, 0) + 1
        allowed.append(move)
    return allowed, held_back
