"""The end-to-end tests' ``/metrics`` reader, on an exposition prometheus_client writes itself
(not marked e2e: it runs with the unit tests)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from tests.e2e.scrape import exported_in


def exposition() -> str:
    registry = CollectorRegistry()
    answers = Counter("demo_responses", "answers", ["verb", "code"], registry=registry)
    answers.labels("filter", "200").inc(3)
    answers.labels("filter", "500").inc(1)
    answers.labels("prioritize", "200").inc(5)
    Gauge("demo_cached_pods", "pods", registry=registry).set(7)
    return generate_latest(registry).decode()


def test_a_counter_is_read_by_its_total_sample_and_the_labels_it_carries() -> None:
    text = exposition()
    assert exported_in(text, "demo_responses_total", verb="filter", code="200") == 3
    assert exported_in(text, "demo_responses_total", verb="filter") == 4  # a label subset: summed
    assert exported_in(text, "demo_responses_total") == 9  # not the _created samples
    assert exported_in(text, "demo_responses") == 0  # a counter's samples end in _total


def test_a_gauge_reads_as_it_is_and_what_is_not_there_reads_0() -> None:
    text = exposition()
    assert exported_in(text, "demo_cached_pods") == 7
    assert exported_in(text, "demo_responses_total", verb="bind") == 0
    assert exported_in(text, "absent_total") == 0
