"""How the annotator-kill fault tells a node split between rounds from nodes merely on
different rounds, or a metric retried alone."""

from __future__ import annotations

from datetime import datetime, timedelta

from sandbox.faults_cluster import PERIOD_GROUPS, rounds_mixed, split_nodes

T0 = datetime(2026, 11, 22, 10, 0, 0)
T1 = T0 + timedelta(seconds=5)
T2 = T1 + timedelta(seconds=1)
CPU, MEM = "cpu_usage_avg_5m", "mem_usage_avg_5m"


def test_the_policy_groups_metrics_by_period() -> None:
    assert (CPU, MEM) in PERIOD_GROUPS


def test_nodes_on_different_whole_rounds_are_not_split() -> None:
    assert split_nodes({"n1": {CPU: T1, MEM: T1}, "n2": {CPU: T0, MEM: T0}}) == set()


def test_a_metric_written_alone_later_is_not_a_split() -> None:
    # MEM's query failed in round T1 and was retried alone at T2, written on n1 so far
    assert split_nodes({"n1": {CPU: T1, MEM: T2}, "n2": {CPU: T1, MEM: T1}}) == set()


def test_part_of_a_round_on_a_node_is_a_split() -> None:
    stamps = {"n1": {CPU: T1, MEM: T1}, "n2": {CPU: T1, MEM: T0}, "n3": {CPU: T1}}
    assert split_nodes(stamps) == {"n2", "n3"}


def test_rounds_mixed_across_nodes() -> None:
    nodes = [f"node-{i}" for i in range(1, 9)]
    assert not rounds_mixed(dict.fromkeys(nodes, T1))
    assert rounds_mixed({**dict.fromkeys(nodes, T1), "node-1": T0})
    assert rounds_mixed(dict.fromkeys(nodes[:7], T1))  # a node without a value
