"""bench/extender_cpu.py's windows have the shape of kube-scheduler's (v1.34 at 5,000 nodes and
50 %): the first nodes its parallel filter finished from a start, in the order they finished."""

import random

from bench.extender_cpu import CHUNK, scheduler_window

NAMES = [f"node-{i:04d}" for i in range(5000)]


def positions(window: list[str], start: int) -> list[int]:
    return [(int(name[5:]) - start) % len(NAMES) for name in window]


def test_a_window_is_the_first_nodes_finished_from_its_start() -> None:
    rng = random.Random(3)
    for start in (0, 2500, 4990):
        window = scheduler_window(NAMES, start, 2500, rng)
        assert len(window) == len(set(window)) == 2500
        assert window[0] == NAMES[start]
        offsets = positions(window, start)
        # every node of all but the pieces still being checked, none beyond them
        assert set(range(2500 - 2 * CHUNK)) <= set(offsets)
        assert max(offsets) < 2500 + 2 * CHUNK
        # the pieces checked at once are interleaved, not named one after the other
        assert offsets != sorted(offsets)
        assert offsets[1] == CHUNK  # the second lane takes the next piece at once


def test_windows_differ_from_pod_to_pod() -> None:
    rng = random.Random(5)
    windows = [tuple(scheduler_window(NAMES, 0, 2500, rng)) for _ in range(20)]
    assert len(set(windows)) == 20
    # a few nodes at the edge differ in which ones are named
    assert len({frozenset(w) for w in windows}) > 1


def test_a_window_of_every_node_names_each_once() -> None:
    window = scheduler_window(NAMES[:300], 10, 400, random.Random(1))
    assert sorted(window) == NAMES[:300]
