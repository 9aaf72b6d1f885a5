"""The rebalancer's pure decisions, each case worked by hand."""

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from typing import Any

import pytest
import yaml

from shared.annotations import encode_metric
from shared.errors import ConfigError
from shared.estimation import Need, NodeSize
from shared.load_model import NodeLoad, evaluate
from shared.movable_pods import PodFacts, skip_reason
from shared.node_fit import FitNode, PodNeeds, required_affinity
from shared.overload_streaks import Observation, OverloadTracker, thresholds_of
from shared.policy import DEFAULT_POLICY_YAML, parse_policy
from shared.rebalance import Candidate, TargetNode, fewest_covering, plan_node, target_reason
from shared.rebalance_marks import (
    carried_need,
    decode_departures,
    decode_usages,
    encode_departures,
    encode_usages,
    refused_here,
    workload_key,
)
from shared.rules import LoadRules

T0 = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
CPU = "cpu_usage_avg_5m"
MEM = "mem_usage_avg_5m"


def policy(rebalance: dict[str, object] | None = None, **spec: object):  # type: ignore[no-untyped-def]
    data = yaml.safe_load(DEFAULT_POLICY_YAML)
    data["spec"]["rebalance"] = {"enabled": True, **(rebalance or {})}
    data["spec"].update(spec)
    return parse_policy(data)


def annotations(cpu: float, mem: float, at: datetime) -> dict[str, str]:
    return {CPU: encode_metric(cpu, at), MEM: encode_metric(mem, at)}


# -- the policy ----------------------------------------------------------------------------------


def test_thresholds_default_to_the_predicates_on_averages() -> None:
    # crane's default predicates: cpu/mem 5m averages at 0.65 and 1h maxima at 0.75; a maximum
    # holds a pod for an hour after it left, so only the averages are thresholds
    thresholds = thresholds_of(policy())
    assert [(t.metric, t.resource, t.high, t.low) for t in thresholds] == [
        (CPU, "cpu", 0.65, 0.52),
        (MEM, "memory", 0.65, 0.52),
    ]
    # 3m period + 5m: fresh for 8 minutes; a 5m window and a 43 s delay to show a pod gone
    assert thresholds[0].window == timedelta(minutes=8)
    assert thresholds[0].settle == timedelta(minutes=5, seconds=43)


@pytest.mark.parametrize(
    ("rebalance", "field", "message"),
    [
        ({"thresholds": [{"metric": "nope", "high": 0.7}]}, "thresholds[0].metric", "syncPolicy"),
        ({"thresholds": [{"metric": CPU, "high": 0.7, "low": 0.7}]}, "thresholds[0]", "low"),
        ({"consecutiveRounds": 0}, "consecutiveRounds", "greater than or equal to 1"),
        ({"period": "0s"}, "period", "must be > 0"),
        ({"limits": {"perNode": 0}}, "limits.perNode", "greater than or equal to 1"),
        ({"bogus": 1}, "bogus", "unknown field"),
    ],
)
def test_bad_rebalance_fields_are_named(
    rebalance: dict[str, object], field: str, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        policy(rebalance)
    assert f"spec.rebalance.{field}" in str(caught.value)
    assert message in str(caught.value)


def test_enabled_without_any_threshold_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"spec\.rebalance\.thresholds: no predicate"):
        policy(predicate=[{"name": "cpu_usage_max_avg_1h", "maxLimitPecent": 0.75}])


# -- when a node is acted on -----------------------------------------------------------------------


def test_a_node_acts_after_n_rounds_of_new_samples_above_high() -> None:
    tracker = OverloadTracker(thresholds_of(policy()), rounds=3)
    states = []
    for minute in range(4):
        now = T0 + timedelta(minutes=minute)
        # one new sample a minute, except minute 2, which repeats minute 1's
        sampled = T0 + timedelta(minutes=minute if minute != 2 else 1)
        states.append(tracker.observe("n1", annotations(0.80, 0.30, sampled), UTC, now).state)
    # rounds with a new sample: minutes 0, 1 and 3; the repeated sample counts for nothing
    assert states == ["waiting", "waiting", "waiting", "over"]
    at = T0 + timedelta(minutes=3)
    acting = tracker.observe("n1", annotations(0.80, 0.30, at), UTC, at)
    assert acting.acting is not None and acting.acting.metric == CPU


def test_a_sample_under_high_starts_the_streak_again() -> None:
    tracker = OverloadTracker(thresholds_of(policy()), rounds=2)
    seen = [
        tracker.observe(
            "n1", annotations(value, 0.3, T0 + timedelta(minutes=i)), UTC, T0 + timedelta(minutes=i)
        )
        for i, value in enumerate((0.8, 0.6, 0.8, 0.8))
    ]
    assert [o.state for o in seen] == ["waiting", "under", "waiting", "over"]


def test_a_stale_or_missing_value_never_acts_and_resets() -> None:
    tracker = OverloadTracker(thresholds_of(policy()), rounds=2)
    tracker.observe("n1", annotations(0.8, 0.3, T0), UTC, T0)
    missing = tracker.observe("n1", {CPU: encode_metric(0.9, T0)}, UTC, T0)
    assert missing.state == "stale"
    # 8 minutes after the sample the value is stale
    late = T0 + timedelta(minutes=8)
    assert tracker.observe("n1", annotations(0.9, 0.3, T0), UTC, late).state == "stale"
    # and the streak starts from nothing again
    fresh = tracker.observe("n1", annotations(0.9, 0.3, late), UTC, late)
    assert fresh.state == "waiting"


def test_a_node_pods_were_moved_off_is_held_until_its_metric_can_show_it() -> None:
    tracker = OverloadTracker(thresholds_of(policy()), rounds=1)
    assert tracker.observe("n1", annotations(0.8, 0.3, T0), UTC, T0).state == "over"
    tracker.hold("n1", T0)
    later = T0 + timedelta(minutes=5)
    assert tracker.observe("n1", annotations(0.8, 0.3, later), UTC, later).state == "held"
    # the hold ends 5m43s on; a sample taken before then still shows the pods: not counted
    after = T0 + timedelta(minutes=5, seconds=43)
    assert tracker.observe("n1", annotations(0.8, 0.3, T0), UTC, after).state == "waiting"
    newer = after + timedelta(minutes=1)
    assert tracker.observe("n1", annotations(0.8, 0.3, newer), UTC, newer).state == "over"


# -- which pods may move ---------------------------------------------------------------------------


def facts(**changes: object) -> PodFacts:
    base: dict[str, Any] = {
        "namespace": "web",
        "name": "api-7d9-x",
        "uid": "u1",
        "owners": (("ReplicaSet", "api-7d9"),),
        "annotations": {},
        "labels": {"app": "api"},
        "priority": 0,
        "phase": "Running",
        "terminating": False,
    }
    base.update(changes)
    return PodFacts(**base)


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({}, None),
        ({"owners": ()}, "no-controller"),
        ({"owners": (("DaemonSet", "agent"),)}, "daemonset"),
        ({"owners": (("Node", "n1"),)}, "mirror"),
        ({"annotations": {"kubernetes.io/config.mirror": "x"}}, "mirror"),
        ({"terminating": True}, "terminating"),
        ({"phase": "Pending"}, "not-running"),
        ({"priority": 1_000_000}, "priority"),
        ({"priority": 2_000_000_000}, "priority"),
        ({"namespace": "kube-system"}, "namespace"),
        ({"labels": {}}, "selector"),
        ({"annotations": {"loadsched.io/evict": "False"}}, "opted-out"),
        ({"annotations": {"loadsched.io/evict": "true"}}, None),
        ({"owners": (("StatefulSet", "db"),)}, None),
        ({"owners": (("Job", "batch-1"),)}, None),
    ],
)
def test_which_pods_may_move(changes: dict[str, object], reason: str | None) -> None:
    settings = policy({"podSelector": {"app": "api"}}).spec.rebalance
    assert skip_reason(facts(**changes), settings, {}, T0) == reason


def test_a_workload_moved_lately_is_not_moved_again() -> None:
    settings = policy().spec.rebalance
    moved = {"web/ReplicaSet/api-7d9": T0 + timedelta(minutes=15)}
    assert skip_reason(facts(), settings, moved, T0) == "cooldown"
    assert skip_reason(facts(), settings, moved, T0 + timedelta(minutes=15)) is None


def test_only_the_included_namespaces() -> None:
    settings = policy({"namespaces": {"include": ["batch"]}}).spec.rebalance
    assert skip_reason(facts(), settings, {}, T0) == "namespace"
    assert skip_reason(facts(namespace="batch"), settings, {}, T0) is None


# -- which first -----------------------------------------------------------------------------------


def candidate(
    name: str,
    usage: float,
    *,
    priority: int = 0,
    created: str = "2026-11-27T10:00:00Z",
    online: bool = False,
    requests: dict[str, Fraction] | None = None,
) -> Candidate:
    return Candidate(
        facts=facts(name=name, uid=name, owners=(("ReplicaSet", name),), priority=priority),
        usage=usage,
        measured=True,
        online=online,
        created=created,
        needs=PodNeeds(requests=requests or {"cpu": Fraction(1)}),
        need=Need(usage, 2**30),
    )


def test_the_fewest_pods_then_lowest_priority_then_newest() -> None:
    # overshoot 3.5 cores: no single pod covers it, the two largest do (3 + 2), so two pods.
    # By preference d (priority 0, newest), b (0, newer), c (0, older), a (10): d is taken (1
    # plus the largest other, 3, covers 3.5); then 2.5 is left with one place: b and c (2)
    # do not cover it, a (3) does.
    a = candidate("a", 3.0, priority=10)
    b = candidate("b", 2.0, created="2026-11-27T10:02:00Z")
    c = candidate("c", 2.0, created="2026-11-27T10:01:00Z")
    d = candidate("d", 1.0, created="2026-11-27T10:03:00Z")
    assert [p.facts.name for p in fewest_covering([a, b, c, d], 3.5)] == ["d", "a"]
    # 1.5 is covered by any one of a, b or c: the newest of the lowest priority, b
    assert [p.facts.name for p in fewest_covering([a, b, c, d], 1.5)] == ["b"]


def test_online_services_go_last() -> None:
    online = candidate("web", 2.0, online=True, created="2026-11-27T10:09:00Z")
    batch = candidate("batch", 2.0, priority=100)
    assert [p.facts.name for p in fewest_covering([online, batch], 1.0)] == ["batch"]


def test_all_of_them_when_together_they_fall_short() -> None:
    pods = [candidate("a", 0.5), candidate("b", 0.25)]
    assert {p.facts.name for p in fewest_covering(pods, 2.0)} == {"a", "b"}
    assert fewest_covering(pods, 0.0) == []


# -- only moves that help --------------------------------------------------------------------------

SIZE = NodeSize(8.0, 32 * 2**30, 8.0, 32 * 2**30)


def target(
    name: str, cpu: float, mem: float = 0.30, marks: dict[str, datetime] | None = None
) -> TargetNode:
    chosen = policy()
    rules = LoadRules.from_policy(chosen)
    load = NodeLoad.from_annotations(name, annotations(cpu, mem, T0), rules, SIZE)
    verdict = evaluate(load, rules, T0)
    return TargetNode(
        name=name,
        verdict=verdict,
        fit=FitNode(name, {"cpu": "8", "memory": "32Gi", "pods": "110"}),
        bound=(),
        size=SIZE,
        values={CPU: cpu, MEM: mem},
        marks=marks or {},
        score=verdict.score,
    )


def acting_node(cpu: float) -> Observation:
    tracker = OverloadTracker(thresholds_of(policy()), rounds=1)
    return tracker.observe("hot", annotations(cpu, 0.30, T0), UTC, T0)


def test_each_pod_goes_to_the_best_node_that_stays_under_high() -> None:
    thresholds = thresholds_of(policy())
    # hot: 0.80 of 8 cores, 0.15 over 0.65: 1.2 cores to move; one pod of 1.5 covers it
    pods = [candidate("big", 1.5), candidate("small", 0.5)]
    # busy passes the filter (0.60 < 0.65) but 0.60 + 1.5/8 = 0.7875 is above high; quiet
    # takes it at 0.20 + 0.1875 = 0.3875; loaded is refused by the filter itself
    targets = [target("busy", 0.60), target("quiet", 0.20), target("loaded", 0.70)]
    plan = plan_node(acting_node(0.80), thresholds[0], SIZE, pods, targets, thresholds, T0)
    assert plan is not None
    assert plan.overshoot == pytest.approx(1.2)
    assert [(m.pod.facts.name, m.target) for m in plan.moves] == [("big", "quiet")]
    assert plan.moves[0].value_after == pytest.approx(0.3875)


def test_a_pod_no_node_takes_moves_nothing() -> None:
    thresholds = thresholds_of(policy())
    plan = plan_node(
        acting_node(0.80),
        thresholds[0],
        SIZE,
        [candidate("big", 1.5)],
        [target("busy", 0.60)],
        thresholds,
        T0,
    )
    assert plan is not None and plan.moves == ()
    assert plan.unplaced == (("web/big", "no node takes it (1 would-overload)"),)


def test_when_no_node_takes_the_covering_pod_the_fewest_a_node_takes_move_instead() -> None:
    thresholds = thresholds_of(policy())
    # hot 0.80: 1.2 cores over 0.65. big alone covers it, but 0.50 + 1.5/8 = 0.6875 is over
    # high on both targets; a (0.7) and b (0.6) cover it too, one on each (a then b on calm
    # would take it to 0.50 + 1.3/8 = 0.6625); c is not needed
    pods = [candidate("big", 1.5), candidate("a", 0.7), candidate("b", 0.6), candidate("c", 0.3)]
    planned: dict[str, Need] = {}
    plan = plan_node(
        acting_node(0.80),
        thresholds[0],
        SIZE,
        pods,
        [target("quiet", 0.50), target("calm", 0.50)],
        thresholds,
        T0,
        planned,
    )
    assert plan is not None
    assert [(m.pod.facts.name, m.target) for m in plan.moves] == [("a", "calm"), ("b", "quiet")]
    assert plan.unplaced == (("web/big", "no node takes it (2 would-overload)"),)
    # only the moves made are planned: big's, tried first, was undone
    assert planned["calm"].cpu == pytest.approx(0.7)
    assert planned["quiet"].cpu == pytest.approx(0.6)


def test_pods_that_fall_short_of_the_overshoot_still_move_when_nothing_covers_it() -> None:
    thresholds = thresholds_of(policy())
    plan = plan_node(
        acting_node(0.80),
        thresholds[0],
        SIZE,
        [candidate("big", 1.5), candidate("a", 0.7)],
        [target("quiet", 0.50)],
        thresholds,
        T0,
    )
    assert plan is not None
    # a lowers hot by 0.7 of the 1.2 cores over: better than leaving it at 0.80
    assert [(m.pod.facts.name, m.target) for m in plan.moves] == [("a", "quiet")]
    assert plan.moves[0].value_after == pytest.approx(0.50 + 0.7 / 8)
    assert [pod for pod, _ in plan.unplaced] == ["web/big"]


def test_a_node_the_workload_left_lately_is_no_target() -> None:
    thresholds = thresholds_of(policy())
    marks = {"web/ReplicaSet/big": T0 + timedelta(minutes=5)}
    plan = plan_node(
        acting_node(0.80),
        thresholds[0],
        SIZE,
        [candidate("big", 1.5)],
        [target("quiet", 0.20, marks=marks), target("calm", 0.30)],
        thresholds,
        T0,
    )
    assert plan is not None and [m.target for m in plan.moves] == ["calm"]


def test_moves_planned_in_a_round_add_up_on_their_target() -> None:
    thresholds = thresholds_of(policy())
    planned: dict[str, Need] = {}
    one = target("quiet", 0.40)
    # each hot node sends 1.2 cores (0.15 of 8); quiet goes 0.40 -> 0.55, then 0.70 >= 0.65
    first = plan_node(
        acting_node(0.80),
        thresholds[0],
        SIZE,
        [candidate("a", 1.2)],
        [one],
        thresholds,
        T0,
        planned,
    )
    second = plan_node(
        acting_node(0.80),
        thresholds[0],
        SIZE,
        [candidate("b", 1.2)],
        [one],
        thresholds,
        T0,
        planned,
    )
    assert first is not None and [m.target for m in first.moves] == ["quiet"]
    assert second is not None and second.moves == ()


# -- no loops --------------------------------------------------------------------------------------


def test_departures_round_trip_and_refuse_until_their_time() -> None:
    marks = {"web/ReplicaSet/api-7d9": T0 + timedelta(minutes=15)}
    raw = encode_departures(marks)
    assert raw == '{"web/ReplicaSet/api-7d9":"2026-11-27T12:15:00Z"}'
    assert decode_departures(raw) == marks
    workload = workload_key("web", [("ReplicaSet", "api-7d9")])
    assert refused_here(workload, marks, T0)
    assert not refused_here(workload, marks, T0 + timedelta(minutes=15))
    assert not refused_here("web/ReplicaSet/other", marks, T0)
    assert not refused_here(None, marks, T0)


@pytest.mark.parametrize("raw", [None, "", "{", "[1]", '{"a": 5}', '{"a": "soon"}'])
def test_a_malformed_mark_refuses_nothing(raw: str | None) -> None:
    assert decode_departures(raw) == {}


def test_pods_using_nothing_never_move_and_rounding_never_leaves_the_set_short() -> None:
    idle = candidate("idle", 0.0, created="2026-11-27T10:09:00Z")
    a, b = candidate("a", 0.1), candidate("b", 0.2)
    assert [p.facts.name for p in fewest_covering([idle, a], 5.0)] == ["a"]
    # 0.1 + 0.2 is 0.30000000000000004 in floats: both are needed, and both are taken
    assert {p.facts.name for p in fewest_covering([a, b], 0.1 + 0.2)} == {"a", "b"}


def test_an_infinite_value_is_not_a_sample() -> None:
    tracker = OverloadTracker(thresholds_of(policy()), rounds=1)
    seen = tracker.observe("n1", annotations(float("inf"), 0.3, T0), UTC, T0)
    assert seen.state == "stale" and seen.metrics[0].reason == "not-finite"


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"local_storage": True}, "local-storage"),
        ({"local_storage": True, "annotations": {"loadsched.io/evict": "true"}}, None),
        ({"unjudged": "hostPort"}, "unjudged-constraint"),
        ({"unjudged": "hostPort", "annotations": {"loadsched.io/evict": "true"}}, None),
    ],
)
def test_local_storage_and_unjudged_constraints_stay_unless_opted_in(
    changes: dict[str, Any], reason: str | None
) -> None:
    assert skip_reason(facts(**changes), policy().spec.rebalance, {}, T0) == reason


def test_a_target_outside_the_required_node_affinity_is_no_target() -> None:
    thresholds = thresholds_of(policy())
    pinned = Candidate(
        facts=facts(name="pinned", owners=(("ReplicaSet", "pinned"),)),
        usage=1.5,
        measured=True,
        online=False,
        created="2026-11-27T10:00:00Z",
        needs=PodNeeds(
            requests={"cpu": Fraction(1)},
            required=required_affinity(
                {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchFields": [
                                        {
                                            "key": "metadata.name",
                                            "operator": "In",
                                            "values": ["calm"],
                                        }
                                    ]
                                }
                            ]
                        }
                    }
                }
            ),
        ),
        need=Need(1.5, 2**30),
    )
    plan = plan_node(
        acting_node(0.80),
        thresholds[0],
        SIZE,
        [pinned],
        [target("quiet", 0.10), target("calm", 0.30)],
        thresholds,
        T0,
    )
    assert plan is not None and [m.target for m in plan.moves] == ["calm"]  # quiet scores better


def test_a_value_missing_during_a_hold_does_not_let_an_older_sample_count_after_it() -> None:
    tracker = OverloadTracker(thresholds_of(policy()), rounds=1)
    tracker.observe("n1", annotations(0.8, 0.3, T0), UTC, T0)
    tracker.hold("n1", T0)
    later = T0 + timedelta(minutes=1)
    assert tracker.observe("n1", {}, UTC, later).state == "stale"
    # after the hold, a sample taken before it ended still shows the pods moved
    after = T0 + timedelta(minutes=6)
    old = T0 + timedelta(minutes=5)
    assert tracker.observe("n1", annotations(0.8, 0.3, old), UTC, after).state == "waiting"


def test_usages_round_trip_up_to_the_millicore_and_the_byte() -> None:
    usages = {"web/ReplicaSet/b": Need(3.49, 2**30), "web/ReplicaSet/a": Need(0.0001, 10.2)}
    raw = encode_usages(usages)
    # 3.49 stays 3.49 (not 3.491 from float noise); a tenth of a millicore asks for a whole one
    assert raw == (
        '{"web/ReplicaSet/a":{"cpu":0.001,"memory":11},'
        '"web/ReplicaSet/b":{"cpu":3.49,"memory":1073741824}}'
    )
    assert decode_usages(raw) == {
        "web/ReplicaSet/a": Need(0.001, 11.0),
        "web/ReplicaSet/b": Need(3.49, 2.0**30),
    }
    assert decode_usages('{"a": {"cpu": 2}}') == {"a": Need(2.0, 0.0)}  # missing: 0


@pytest.mark.parametrize(
    "raw",
    [
        None,
        "",
        "{",
        "[1]",
        '{"a": 5}',
        '{"a": {"cpu": true}}',
        '{"a": {"cpu": -1}}',
        '{"a": {"cpu": "2"}}',
        '{"a": {"cpu": 1e400}}',
        '{"a": {"memory": 1' + "0" * 30 + "}}",
        '{"a": {"memory": 1' + "0" * 400 + "}}",
    ],
)
def test_a_malformed_usage_asks_for_nothing(raw: str | None) -> None:
    assert decode_usages(raw) == {}


def test_the_carried_need_is_the_most_any_live_mark_carries_per_resource() -> None:
    w = "web/ReplicaSet/api"
    live, gone = T0 + timedelta(minutes=5), T0
    marks = {"n1": {w: live}, "n2": {w: live}, "n3": {w: gone}, "n4": {"web/Job/x": live}}
    usages = {
        "n1": {w: Need(3.0, 1.0)},
        "n2": {w: Need(1.0, 5.0)},
        "n3": {w: Need(9.0, 9.0)},  # its mark ended: asks for nothing
        "n4": {w: Need(7.0, 7.0)},  # no mark of the workload there
    }
    assert carried_need(w, marks, usages, T0) == Need(3.0, 5.0)
    assert carried_need("web/ReplicaSet/other", marks, usages, T0) is None
    assert carried_need(None, marks, usages, T0) is None
    assert Need(0.5, 8.0).at_least(Need(3.0, 5.0)) == Need(3.0, 8.0)


def test_a_target_needs_room_for_the_usage_the_replacement_will_be_asked_for() -> None:
    """Estimation on, the rebalancer's cpu ``high`` at 0.9 over the predicate's 0.65: a pod
    requesting 0.25 cores that uses 1.5. The filter asks its replacement for 1.5 cores (the
    usage its mark carries), not its estimate of 0.2125 (0.25 × 0.85): at 0.60 of 8 cores,
    0.60 + 1.5 / 8 = 0.7875 is above the 0.65 limit, though under the 0.9 high."""
    chosen = policy(
        {"thresholds": [{"metric": CPU, "high": 0.9}]},
        estimation={"enabled": True, "factors": {"cpu": 0.85, "memory": 0.7}},
    )
    rules = LoadRules.from_policy(chosen)
    load = NodeLoad.from_annotations("calm", annotations(0.60, 0.30, T0), rules, SIZE)
    node = TargetNode(
        name="calm",
        verdict=evaluate(load, rules, T0),
        fit=FitNode("calm", {"cpu": "8", "memory": "32Gi", "pods": "110"}),
        bound=(),
        size=SIZE,
        values={CPU: 0.60, MEM: 0.30},
    )
    hungry = Candidate(
        facts=facts(name="hungry", uid="hungry", owners=(("ReplicaSet", "hungry"),)),
        usage=1.5,
        measured=True,
        online=False,
        created="2026-11-27T10:00:00Z",
        needs=PodNeeds(requests={"cpu": Fraction(1, 4)}),
        need=Need(1.5, 2**20),
        estimate=Need(0.2125, 0.7 * 2**28),
    )
    thresholds = thresholds_of(chosen)
    assert target_reason(hungry, node, thresholds, Need(0.0, 0.0), T0) == "no-headroom"
    modest = replace(hungry, usage=0.2, need=Need(0.2, 2**20))
    assert target_reason(modest, node, thresholds, Need(0.0, 0.0), T0) is None
