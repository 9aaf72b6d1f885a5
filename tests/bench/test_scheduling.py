"""bench/scheduling.py: each kind goes first as often as last; the interval it prints for the
median of the rounds; the sandbox benches' ``--lease-seconds``."""

import argparse

import pytest

from bench.lease_option import add_lease_option, lease_seconds, renewals
from bench.scheduling import KINDS, PROCESS, TITLES, VARIANT, round_order
from bench.stats import median_interval
from sandbox import kwok


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


def test_the_interval_for_the_median_is_the_widest_order_statistics_the_sign_test_allows() -> None:
    # 8 rounds: the 2nd smallest and 2nd largest hold the median with 1 - 2 * 9/256
    low, high, cover = median_interval([1.0, 0.8, 1.1, 0.9, 0.95, 1.05, 0.85, 1.2])
    assert (low, high) == (0.85, 1.1) and cover == 1 - 18 / 256
    # asked for more confidence, the whole range
    assert median_interval([3.0, 1.0, 2.0, 4.0, 5.0, 6.0, 7.0, 8.0], least=0.95)[:2] == (1.0, 8.0)
    # 2 rounds: their range, held with chance 1/2
    assert median_interval([1.2, 0.9]) == (0.9, 1.2, 0.5)
    # 20 rounds: the 6th from each end (P(Bin(20, 1/2) <= 5) = 0.0207)
    values = [float(v) for v in range(20)]
    low, high, cover = median_interval(values)
    assert (low, high) == (5.0, 14.0) and abs(cover - 0.9586) < 1e-4


def test_lease_seconds_are_whole_and_long_enough_for_kwok() -> None:
    parser = argparse.ArgumentParser()
    add_lease_option(parser)
    assert parser.parse_args([]).lease_seconds == kwok.LEASE_SECONDS
    assert parser.parse_args(["--lease-seconds", "240"]).lease_seconds == 240
    for bad in ("9", "x", "2.5"):
        with pytest.raises(argparse.ArgumentTypeError, match=bad):
            lease_seconds(bad)
    assert renewals(5000, 240) == "kwok renews 5000 node Leases every 60 s (83 updates/s)"
