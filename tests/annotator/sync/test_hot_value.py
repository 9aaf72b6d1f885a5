from datetime import datetime, timedelta

from annotator.sync.hot_value import BindingWindows
from shared.crane_policy import HotValuePolicy
from tests.fakes.clock import NOW

ENTRIES = [HotValuePolicy(timeRange="5m", count=5), HotValuePolicy(timeRange="1m", count=2)]


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


def test_each_pod_counts_once() -> None:
    windows = BindingWindows(ENTRIES)
    assert windows.record("n1", "uid-1", ago(10), NOW)
    assert not windows.record("n1", "uid-1", ago(10), NOW)
    assert windows.record("n1", "uid-2", ago(20), NOW)
    assert windows.hot_value("n1", NOW) == 1  # 2 in 1m -> 1; 2 in 5m -> 0
    assert len(windows) == 2


def test_windows_slide_and_prune() -> None:
    windows = BindingWindows(ENTRIES)
    for i, age in enumerate([5, 10, 15, 20, 100, 200, 250]):
        windows.record("n1", f"u{i}", ago(age), NOW)
    # 7 within 5m -> 1; 4 within 1m -> 2
    assert windows.hot_value("n1", NOW) == 3
    later = NOW + timedelta(seconds=60)
    assert windows.hot_value("n1", later) == 1  # 1m window empty; still 7 in 5m
    assert windows.prune(NOW + timedelta(minutes=5)) == {"n1"}
    assert windows.hot_value("n1", NOW + timedelta(minutes=5)) == 0
    assert windows.nodes() == set() and len(windows) == 0
    # a pruned pod may be counted again only if it is inside a window: it is not
    assert not windows.record("n1", "u0", ago(5), NOW + timedelta(minutes=5))


def test_old_bindings_are_ignored_and_order_does_not_matter() -> None:
    windows = BindingWindows(ENTRIES)
    assert not windows.record("n1", "old", ago(301), NOW)
    windows.record("n1", "b", ago(30), NOW)
    windows.record("n1", "a", ago(200), NOW)  # a re-list delivers older bindings late
    windows.prune(NOW + timedelta(seconds=101))
    assert len(windows) == 1


def test_no_cluster_wide_cap() -> None:
    windows = BindingWindows(ENTRIES)
    for i in range(5000):
        windows.record(f"n{i % 100}", f"u{i}", ago(1), NOW)
    assert len(windows) == 5000
    assert windows.hot_value("n1", NOW) == 50 // 5 + 50 // 2
