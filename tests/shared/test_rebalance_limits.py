"""The rebalancer's limits within a round: perNode, perNamespace, perRound, one per workload."""

import pytest

from shared.estimation import Need
from shared.movable_pods import PodFacts
from shared.node_fit import PodNeeds
from shared.rebalance import Candidate, Move
from shared.rebalance_limits import RoundAllowance, within_limits
from shared.rebalance_policy import RebalanceLimits


def move(name: str, namespace: str = "web", workload: str | None = None) -> Move:
    facts = PodFacts(
        namespace=namespace,
        name=name,
        uid=name,
        owners=(("ReplicaSet", workload or name),),
        annotations={},
        labels={},
        priority=0,
        phase="Running",
        terminating=False,
    )
    pod = Candidate(facts, 1.0, True, False, "", PodNeeds(requests={}), Need(1.0, 0.0))
    return Move(pod, "quiet", 0.5)


LIMITS = RebalanceLimits(perNode=2, perNamespace=2, perRound=5)


@pytest.mark.parametrize(
    ("moves", "allowance", "allowed", "held_back"),
    [
        ([move("a"), move("b"), move("c")], RoundAllowance(5), ["a", "b"], 1),  # perNode
        ([move("a"), move("b")], RoundAllowance(1), ["a"], 1),  # what the round has left
        ([move("a"), move("b")], RoundAllowance(5, {"web": 1}), ["a"], 1),  # perNamespace
        ([move("a", "x"), move("b", "y")], RoundAllowance(5, {"web": 2}), ["a", "b"], 0),
        ([move("a", workload="api"), move("b", workload="api")], RoundAllowance(5), ["a"], 1),
        ([], RoundAllowance(5), [], 0),
    ],
)
def test_the_moves_the_limits_allow(
    moves: list[Move], allowance: RoundAllowance, allowed: list[str], held_back: int
) -> None:
    chosen, held = within_limits(moves, LIMITS, allowance)
    assert ([m.pod.facts.name for m in chosen], held) == (allowed, held_back)


def test_moves_made_are_spent_from_the_round() -> None:
    allowance = RoundAllowance(5, {"web": 1})
    allowance.spend([move("a"), move("b", "x")])
    assert (allowance.round, allowance.per_namespace) == (3, {"web": 2, "x": 1})


def test_moves_not_made_after_all_are_given_back() -> None:
    allowance = RoundAllowance(5, {"web": 1})
    spent = [move("a"), move("b", "x")]
    allowance.spend(spent)
    allowance.give_back(spent[1:])
    assert (allowance.round, allowance.per_namespace) == (4, {"web": 2, "x": 0})
    chosen, _ = within_limits([move("c", "x")], LIMITS, allowance)
    assert [m.pod.facts.name for m in chosen] == ["c"]
