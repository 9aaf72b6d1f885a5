"""bench/quality_rebalancer.py: what the rebalancer did, read off the annotator's /metrics,
and the movers' logs kept per round."""

from __future__ import annotations

import json
from pathlib import Path

from prometheus_client import generate_latest

from annotator.metrics import AnnotatorMetrics
from bench.quality_outcome import Outcome
from bench.quality_rebalancer import KeptLog, rebalanced, rebalancer_counts
from bench.quality_report import recorded, replayed
from bench.quality_strategies import BY_KEY


def exported(metrics: AnnotatorMetrics) -> str:
    return generate_latest(metrics.registry).decode()


def test_the_counts_are_read_off_the_annotators_metrics_summed_over_other_labels() -> None:
    metrics = AnnotatorMetrics()
    for _ in range(20):
        metrics.rebalance_rounds.inc()
    metrics.rebalance_node_rounds.labels("under").inc(150)
    metrics.rebalance_node_rounds.labels("over").inc(2)
    metrics.rebalance_node_rounds.labels("waiting").inc(8)
    metrics.rebalance_evictions.labels("evicted", "cpu_usage_avg_1m").inc(2)
    metrics.rebalance_evictions.labels("evicted", "mem_usage_avg_1m").inc()
    metrics.rebalance_evictions.labels("blocked", "cpu_usage_avg_1m").inc()
    metrics.rebalance_skipped.labels("cooldown").inc(4)
    metrics.rebalance_usage_errors.labels("cpu").inc()  # not one of the counts
    counts = rebalancer_counts(exported(metrics))
    assert counts == {
        "rounds": 20.0,
        "node-rounds:under": 150.0,
        "node-rounds:over": 2.0,
        "node-rounds:waiting": 8.0,
        "evictions:evicted": 3.0,
        "evictions:blocked": 1.0,
        "skipped:cooldown": 4.0,
    }
    assert rebalanced(counts, 2) == (
        "the rebalancer's 20 rounds: node-rounds 2 over, 8 waiting, 150 under; evictions "
        "1 blocked, 3 evicted; candidates skipped 4 cooldown"
    )
    assert rebalancer_counts(exported(AnnotatorMetrics())) == {"rounds": 0.0}


def test_a_rebalancer_that_evicted_nothing_says_why() -> None:
    never_over = {"rounds": 20.0, "node-rounds:under": 150.0, "node-rounds:waiting": 10.0}
    assert rebalanced(never_over, 2).endswith(
        "candidates skipped none (no node stayed above a high threshold for 2 rounds of fresh "
        "data; 10 node-rounds above it for fewer)"
    )
    assert rebalanced({"rounds": 3.0, "node-rounds:under": 24.0}, 5).endswith(
        "(no node stayed above a high threshold for 5 rounds of fresh data)"
    )
    assert rebalanced({"rounds": 0.0}, 2).endswith("(the rebalancer ran no round)")
    no_target = {"rounds": 20.0, "node-rounds:over": 3.0, "skipped:no-target": 3.0}
    assert rebalanced(no_target, 2).endswith(
        "(nodes were over, but no other node had room for the pods that would bring them under)"
    )
    refused = {**no_target, "evictions:blocked": 2.0, "evictions:throttled": 1.0}
    assert rebalanced(refused, 2).endswith(
        "evictions 2 blocked, 1 throttled; candidates skipped 3 no-target (nodes were over, "
        "but the evictions asked for were refused)"
    )
    none_movable = {"rounds": 20.0, "node-rounds:over": 3.0, "skipped:daemonset": 6.0}
    assert rebalanced(none_movable, 2).endswith(
        "(nodes were over, but none of their pods could move)"
    )
    dry = {"rounds": 20.0, "node-rounds:over": 1.0, "evictions:dry-run": 1.0}
    assert "(" not in rebalanced(dry, 2)


def test_the_counts_are_saved_with_the_round_and_read_back() -> None:
    outcome = Outcome(BY_KEY["rebalance"], rebalancer={"rounds": 20.0, "evictions:evicted": 1.0})
    back = replayed(json.loads(json.dumps(recorded(outcome))))
    assert back.rebalancer == outcome.rebalancer
    saved_before = {k: v for k, v in recorded(outcome).items() if k != "rebalancer"}
    assert replayed(json.loads(json.dumps(saved_before))).rebalancer == {}


def test_a_kept_log_holds_what_was_written_since_it_was_opened(tmp_path: Path) -> None:
    source = tmp_path / "annotator.log"
    source.write_text("the round before\n")
    kept = KeptLog.from_now(source)
    assert kept.keep(tmp_path / "logs" / "round.log") is None  # nothing written since
    with source.open("a") as log:
        log.write("this round\n")
    target = kept.keep(tmp_path / "logs" / "round.log")
    assert target is not None and target.read_text() == "this round\n"
    source.write_text("anew\n")  # shorter than where it was kept from: a new log
    again = kept.keep(tmp_path / "logs" / "again.log")
    assert again is not None and again.read_text() == "anew\n"
    missing = KeptLog.from_now(tmp_path / "descheduler.log")
    assert missing.offset == 0 and missing.keep(tmp_path / "logs" / "d.log") is None
    (tmp_path / "descheduler.log").write_text("started later\n")
    assert missing.keep(tmp_path / "logs" / "d.log") is not None
