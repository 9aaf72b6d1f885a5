"""bench/annotator.py: which floor each round is divided by, and the floor's bodies."""

import json
from datetime import UTC, datetime

from bench.annotator import floor_bodies, floor_ratios


def test_the_floor_is_the_protocol_faster_over_the_run_not_the_faster_in_each_round() -> None:
    walls = [12.0, 11.0, 13.0]
    floors = {"HTTP/1.1": [10.0, 10.0, 11.0], "HTTP/2": [9.0, 12.0, 12.5]}
    protocol, ratios = floor_ratios(walls, floors)
    # HTTP/1.1's median (10.0) is below HTTP/2's (12.0), so every round is judged against
    # HTTP/1.1's floor, even round 1, where HTTP/2 happened to be faster
    assert protocol == "HTTP/1.1"
    assert ratios["HTTP/1.1"] == [12.0 / 10.0, 11.0 / 10.0, 13.0 / 11.0]
    assert ratios["HTTP/2"] == [12.0 / 9.0, 11.0 / 12.0, 13.0 / 12.5]  # printed, not judged


def test_each_round_is_divided_by_the_floor_sent_beside_it() -> None:
    protocol, ratios = floor_ratios([10.0, 20.0], {"HTTP/1.1": [12.0, 8.0], "HTTP/2": [5.0, 20.0]})
    assert protocol == "HTTP/1.1"  # medians 10.0 and 12.5
    assert ratios["HTTP/1.1"] == [10.0 / 12.0, 20.0 / 8.0]


def test_the_floor_sends_the_rounds_bodies_with_their_timestamps_moved() -> None:
    annotations: dict[str, dict[str, str | None]] = {
        "node-1": {"cpu_usage_avg_5m": "0.41000,2026-11-27T01:00:00Z", "gone": None},
        "node-2": {"node_hot_value": "2,2026-11-27T01:00:00Z"},
    }
    lines = floor_bodies(annotations, datetime(2000, 1, 1, 0, 0, 7, tzinfo=UTC)).splitlines()
    assert [line.split("\t")[0] for line in lines] == ["node-1", "node-2"]
    bodies = [json.loads(line.split("\t")[1]) for line in lines]
    assert bodies[0] == {
        "metadata": {
            "annotations": {"cpu_usage_avg_5m": "0.41000,2000-01-01T00:00:07Z", "gone": None}
        }
    }
    assert bodies[1]["metadata"]["annotations"] == {"node_hot_value": "2,2000-01-01T00:00:07Z"}
    # the same length as the annotator's bodies: the server parses and stores as much
    assert len(lines[1].split("\t")[1]) == len(
        json.dumps({"metadata": {"annotations": annotations["node-2"]}}, separators=(",", ":"))
    )
