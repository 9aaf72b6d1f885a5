"""bench/scheduling.py's rounds: each kind goes first as often as last."""

from bench.scheduling import KINDS, PROCESS, TITLES, VARIANT, round_order


def test_rounds_take_the_kinds_in_turn_then_in_reverse() -> None:
    assert round_order(0) == KINDS == ("plain", "minimal", "loadsched")
    assert round_order(1) == ("loadsched", "minimal", "plain")
    assert round_order(2) == KINDS
    # over two rounds every kind's mean place is the same: a steady drift favours none
    places = {kind: sum(round_order(i).index(kind) for i in range(2)) for kind in KINDS}
    assert set(places.values()) == {2}


def test_a_variant_runs_as_a_fourth_kind_in_turn_with_the_others() -> None:
    kinds = (*KINDS, VARIANT)
    assert round_order(1, kinds) == (VARIANT, "loadsched", "minimal", "plain")
    places = {kind: sum(round_order(i, kinds).index(kind) for i in range(2)) for kind in kinds}
    assert set(places.values()) == {3}
    assert set(PROCESS) == {"minimal", "loadsched", VARIANT} and set(TITLES) == set(kinds)
