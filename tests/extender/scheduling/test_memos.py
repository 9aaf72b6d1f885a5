"""Names-only answers follow the node view: the same nodes in any order get the same answer,
every change and the passing of time are seen by the next request; pod-dependent scores are
kept per view version (:class:`AnswerMemo`), and only while it lasts."""

import json
from datetime import datetime, timedelta
from typing import Any

import msgspec

from extender.scheduling.memos import AnswerMemo, WindowMemo, every_change
from extender.scheduling.metrics import ExtenderMetrics
from extender.scheduling.node_cache import NodeLoadCache
from extender.scheduling.tally import Tally
from extender.scheduling.verbs import LoadAwareExtender
from extender.scheduling.wire import ARGS_DECODER, Node, NodeMeta
from shared.annotations import encode_metric
from shared.load_model import LoadRules
from tests import payloads
from tests.fakes.clock import NOW, Clock
from tests.fakes.extender_calls import ask, counted, grown, loaded_node


def extender(rules: LoadRules, nodes: list[Node]) -> tuple[LoadAwareExtender, NodeLoadCache, Clock]:
    cache = NodeLoadCache(rules)
    cache.replace(nodes)
    clock = Clock()
    decide = LoadAwareExtender(
        rules=rules,
        clock=clock,
        metrics=ExtenderMetrics(),
        node_cache=cache,
        rejections="always",
    )
    return decide, cache, clock


def filtered_total(decide: LoadAwareExtender) -> float:
    value = decide._metrics.registry.get_sample_value(
        "loadsched_extender_nodes_filtered_total",
        {"metric": "cpu_usage_avg_5m", "reason": "overloaded"},
    )
    return value or 0.0


def test_same_nodes_in_another_order_get_the_same_answer(rules: LoadRules) -> None:
    decide, _, _ = extender(
        rules, [loaded_node("a", 0.2), loaded_node("b", 0.9), loaded_node("c", 0.4)]
    )
    first = ask(decide, "filter", ["a", "b", "c"])
    again = ask(decide, "filter", ["c", "b", "a"])
    assert set(first["NodeNames"]) == set(again["NodeNames"]) == {"a", "c"}
    assert first["FailedAndUnresolvableNodes"] == again["FailedAndUnresolvableNodes"]
    assert set(again["FailedAndUnresolvableNodes"]) == {"b"}
    # every request is counted, reused answer or not
    assert filtered_total(decide) == 2
    scores = sorted(ask(decide, "prioritize", ["a", "c"]), key=lambda s: s["Host"])
    assert sorted(ask(decide, "prioritize", ["c", "a"]), key=lambda s: s["Host"]) == scores
    assert [s["Host"] for s in scores] == ["a", "c"]


def test_another_node_set_is_answered_for_itself(rules: LoadRules) -> None:
    decide, _, _ = extender(
        rules, [loaded_node("a", 0.2), loaded_node("b", 0.9), loaded_node("c", 0.4)]
    )
    ask(decide, "filter", ["a", "b", "c"])
    assert sorted(ask(decide, "filter", ["a", "c"])["NodeNames"]) == ["a", "c"]
    assert ask(decide, "filter", ["b"])["NodeNames"] == []
    assert [s["Host"] for s in ask(decide, "prioritize", ["c"])] == ["c"]


def test_daemonset_pods_do_not_share_answers_with_other_pods(rules: LoadRules) -> None:
    decide, _, _ = extender(rules, [loaded_node("a", 0.2), loaded_node("b", 0.9)])
    assert ask(decide, "filter", ["a", "b"])["NodeNames"] == ["a"]
    assert sorted(ask(decide, "filter", ["a", "b"], daemonset=True)["NodeNames"]) == ["a", "b"]
    assert ask(decide, "filter", ["b", "a"])["NodeNames"] == ["a"]


def test_a_node_change_is_seen_by_the_next_request(rules: LoadRules) -> None:
    decide, cache, _ = extender(rules, [loaded_node("a", 0.2), loaded_node("b", 0.3)])
    assert sorted(ask(decide, "filter", ["a", "b"])["NodeNames"]) == ["a", "b"]
    before = {s["Host"]: s["Score"] for s in ask(decide, "prioritize", ["a", "b"])}
    cache.apply("MODIFIED", loaded_node("a", 0.95))
    assert ask(decide, "filter", ["a", "b"])["NodeNames"] == ["b"]
    cache.apply("MODIFIED", loaded_node("b", 0.3, hot=3))
    after = {s["Host"]: s["Score"] for s in ask(decide, "prioritize", ["a", "b"])}
    assert after["b"] < before["b"]
    cache.apply("DELETED", loaded_node("a", 0.95))
    assert sorted(ask(decide, "filter", ["a", "b"])["NodeNames"]) == [
        "a",
        "b",
    ]  # uncached: fail-open


def test_time_alone_changes_the_answer_when_a_value_goes_stale(rules: LoadRules) -> None:
    decide, _, clock = extender(rules, [loaded_node("a", 0.9), loaded_node("b", 0.3)])
    assert ask(decide, "filter", ["a", "b"])["NodeNames"] == ["b"]
    clock.now = NOW + timedelta(minutes=9)  # past the 5m metrics' period + tolerance
    assert sorted(ask(decide, "filter", ["a", "b"])["NodeNames"]) == ["a", "b"]


def test_memo_keeps_one_view_version_and_a_bounded_number_of_sets() -> None:
    memo = AnswerMemo[str, int](size=2)
    assert memo.get(1, "x") is None
    memo.put("x", 1)
    memo.put("y", 2)
    assert (memo.get(1, "x"), memo.get(1, "y")) == (1, 2)
    memo.put("z", 3)  # full: the oldest goes
    assert (memo.get(1, "x"), memo.get(1, "y"), memo.get(1, "z")) == (None, 2, 3)
    assert memo.get(2, "z") is None  # another version of the view


def per_name(decide: LoadAwareExtender, names: list[str]) -> tuple[dict[str, str], dict[Any, int]]:
    """The rejections and their count by reason, judged one name at a time (the full-node
    path's way), from the same view."""

    view = decide.view(NOW)
    tally = Tally(fail_closed=False, check=True)
    for name in names:
        tally.judge(name, view.verdicts.get(name))
    return tally.rejected, dict(tally.reasons)


def test_rejections_taken_whole_from_the_view_equal_those_judged_name_by_name(
    rules: LoadRules,
) -> None:
    """Asked about every node (the view's rejections taken whole) or about a subset (built
    name by name), the answer and the counts by reason are those of judging each name; after
    nodes change, pass, are deleted and come back, and the answer kept by a caller stays as
    it was handed out."""
    nodes = [loaded_node(f"n{i}", 0.9 if i % 3 == 0 else 0.3) for i in range(12)]
    decide, cache, _ = extender(rules, nodes)
    names = [n.metadata.name for n in nodes]
    kept = ask(decide, "filter", names)["FailedAndUnresolvableNodes"]
    handed = decide.view(NOW).frozen_refusals()
    changes = [
        ("MODIFIED", loaded_node("n1", 0.95)),
        ("MODIFIED", loaded_node("n0", 0.2)),
        ("DELETED", loaded_node("n3", 0.9)),
        ("ADDED", loaded_node("n3", 0.92)),
        ("MODIFIED", loaded_node("n6", 0.2)),
    ]
    for event, item in changes:
        before = filtered_total(decide)
        cache.apply(event, item)
        for asked in (names, names[::-1], names[2:], ["n1", "n4"]):
            rejected, reasons = per_name(decide, asked)
            answer = ask(decide, "filter", asked)
            assert answer["FailedAndUnresolvableNodes"] == rejected
            assert set(answer["NodeNames"]) == set(asked) - set(rejected)
            assert filtered_total(decide) - before == sum(reasons.values())
            before = filtered_total(decide)
        assert dict(decide.view(NOW).reason_counts) == per_name(decide, names)[1]
    assert kept == {f"n{i}": handed[f"n{i}"] for i in (0, 3, 6, 9)}
    assert handed.keys() == {"n0", "n3", "n6", "n9"}, "what was handed out did not change"


def raw_filter(decide: LoadAwareExtender, names: list[str]) -> bytes:
    args = ARGS_DECODER.decode(payloads.encode(payloads.names_args(names)))
    assert args.Pod is not None
    answer = decide.filter(args.Pod, args)
    assert isinstance(answer, msgspec.Raw)
    return bytes(answer)


def test_an_answer_is_kept_while_no_node_asked_about_changes(rules: LoadRules) -> None:
    """kube-scheduler's windows of nodes: the answer for a window is the same object while
    only other nodes change, a new one once a node in it changes or goes stale, and the
    counts by reason are reported for every request."""
    nodes = [loaded_node(f"n{i}", 0.9 if i % 4 == 0 else 0.3) for i in range(20)]
    decide, cache, clock = extender(rules, nodes)
    window, other = [f"n{i}" for i in range(10)], [f"n{i}" for i in range(10, 20)]
    first = raw_filter(decide, window)
    scored = ask(decide, "prioritize", window)
    kept = decide._filtered.get(decide.view(NOW), (payloads.encode(window), True, None))
    assert kept is not None
    before = filtered_total(decide)
    for i in range(10, 20):
        cache.apply("MODIFIED", loaded_node(f"n{i}", 0.95))
        assert decide._filtered.get(decide.view(NOW), (payloads.encode(window), True, None)) is kept
        assert raw_filter(decide, window) == first
        assert ask(decide, "prioritize", window) == scored
    assert filtered_total(decide) - before == 10 * 3  # n0, n4, n8 rejected, every request
    registry = decide._metrics.registry
    for verb in ("filter", "prioritize"):
        kept_total = registry.get_sample_value(
            "loadsched_extender_answers_kept_total", {"verb": verb}
        )
        assert kept_total == 10
    assert ask(decide, "filter", other)["NodeNames"] == []
    cache.apply("MODIFIED", loaded_node("n1", 0.95))
    assert "n1" in json.loads(raw_filter(decide, window))["FailedAndUnresolvableNodes"]
    assert ask(decide, "prioritize", window) != scored
    clock.now = NOW + timedelta(minutes=9)  # every value stale: each node re-evaluated
    assert sorted(json.loads(raw_filter(decide, window))["NodeNames"]) == sorted(window)


def test_a_kept_answer_older_than_the_changes_named_is_computed_again(rules: LoadRules) -> None:
    from extender.scheduling.node_view import CHANGES_KEPT

    decide, cache, _ = extender(rules, [loaded_node("a", 0.3), loaded_node("b", 0.3)])
    assert ask(decide, "filter", ["a"])["NodeNames"] == ["a"]
    for i in range(CHANGES_KEPT + 1):  # b alone changes, more often than the view names back
        cache.apply("MODIFIED", loaded_node("b", 0.3 + (i % 2) * 0.6))  # passing, then not
        decide.view(NOW)
    view = decide.view(NOW)
    assert view.changes.since(0) is None
    assert view.filter_changes.since(0) is None
    assert decide._filtered.get(view, (payloads.encode(["a"]), True, None)) is None
    cache.apply("MODIFIED", loaded_node("a", 0.95))
    assert ask(decide, "filter", ["a"])["NodeNames"] == []


def test_window_memo_drops_the_least_recently_used_window() -> None:
    from extender.scheduling.node_view import NodeView

    view = NodeView()
    view.verdicts.update(dict.fromkeys("abcdefghijklmnopqrstuvwxyz"))  # type: ignore[arg-type]
    memo = WindowMemo[int](every_change, names_kept=2)
    memo.put(view, "x", ["a"], 1)
    memo.put(view, "y", ["b"], 2)
    assert memo.get(view, "x") == 1  # x used last
    memo.put(view, "z", ["c"], 3)
    assert (memo.get(view, "x"), memo.get(view, "y"), memo.get(view, "z")) == (1, None, 3)
    view.drop("c")
    assert (memo.get(view, "x"), memo.get(view, "z")) == (1, None)


def test_window_memo_keeps_windows_up_to_a_budget_of_names() -> None:
    """Windows are kept up to a number of names asked about, all told, whatever their sizes:
    many small windows or a few large ones; one dropped or replaced gives its names back."""
    from extender.scheduling.node_view import NodeView

    view = NodeView()
    view.verdicts.update({f"n{i}": None for i in range(20)})  # type: ignore[misc]
    memo = WindowMemo[int](every_change, names_kept=10)
    names = [f"n{i}" for i in range(20)]
    memo.put(view, "a", names[:5], 1)
    memo.put(view, "b", names[5:9], 2)
    memo.put(view, "b", names[5:9], 3)  # the same window again: counted once
    memo.put(view, "c", names[9:10], 4)
    assert (memo.get(view, "a"), memo.get(view, "b"), memo.get(view, "c")) == (1, 3, 4)
    memo.put(view, "d", names[10:13], 5)  # 13 names: a, the least recently used, goes
    assert [memo.get(view, k) for k in "abcd"] == [None, 3, 4, 5]
    view.drop("n5")  # b's answer no longer holds: dropped, its 4 names freed
    assert memo.get(view, "b") is None
    memo.put(view, "e", names[13:19], 6)  # 1 + 3 + 6 = 10 names: nothing else goes
    assert [memo.get(view, k) for k in "cde"] == [4, 5, 6]
    memo.put(view, "f", names, 7)  # larger than the budget alone: kept, the rest goes
    assert [memo.get(view, k) for k in "cdef"] == [None, None, None, 7]


def test_filter_prepares_the_prioritize_answer_for_the_nodes_it_passes(rules: LoadRules) -> None:
    """kube-scheduler's prioritize call names exactly the nodes filter passed, in its order:
    that answer is ready (counted as kept), equal to one computed afresh, and a node changing
    in between is seen: its entry is patched into the answer kept, which is then the answer
    computed afresh from the nodes as they are."""
    nodes = [loaded_node(f"n{i}", 0.9 if i % 3 == 0 else 0.2 + i / 100) for i in range(12)]
    decide, cache, _ = extender(rules, nodes)
    registry = decide._metrics.registry

    def kept() -> float:
        labels = {"verb": "prioritize"}
        return registry.get_sample_value("loadsched_extender_answers_kept_total", labels) or 0.0

    passed = ask(decide, "filter", [n.metadata.name for n in nodes])["NodeNames"]
    assert passed == [f"n{i}" for i in range(12) if i % 3]
    scores = ask(decide, "prioritize", passed)
    assert kept() == 1
    fresh, _, _ = extender(rules, nodes)
    assert scores == ask(fresh, "prioritize", passed)
    ask(decide, "filter", [n.metadata.name for n in nodes])
    nodes[1] = loaded_node("n1", 0.2, hot=5)
    cache.apply("MODIFIED", nodes[1])
    changed = ask(decide, "prioritize", passed)
    assert kept() == 2, "patched"
    assert changed != scores
    fresh, _, _ = extender(rules, nodes)
    assert changed == ask(fresh, "prioritize", passed)
    cache.apply("DELETED", nodes[2])  # a node the view lacks scores 0
    assert ask(decide, "prioritize", passed) == [
        {"Host": s["Host"], "Score": 0 if s["Host"] == "n2" else s["Score"]} for s in changed
    ]
    assert kept() == 3


def test_a_window_most_likely_touched_by_the_changes_is_not_checked() -> None:
    """Checking a kept answer needs a set of the window's names: not made when the changes
    have most likely touched the window (nine in ten or more), however they fell."""
    from extender.scheduling.node_view import NodeView

    view = NodeView()
    view.verdicts.update({f"n{i}": None for i in range(100)})  # type: ignore[misc]
    memo = WindowMemo[int](every_change)
    small, large = [f"n{i}" for i in range(5)], [f"n{i}" for i in range(50)]
    memo.put(view, "small", small, 1)
    memo.put(view, "large", large, 2)
    for i in range(4):  # outside both windows
        view.drop(f"n{99 - i}")
    assert memo.get(view, "small") == 1  # 4 changes: a 5-node window likely untouched
    assert memo.get(view, "large") is None  # 4 changes over half the nodes: likely touched
    memo.put(view, "all", [f"n{i}" for i in range(100)], 3)
    view.drop("n98")
    assert memo.get(view, "all") is None


def test_a_filter_answer_is_kept_while_its_nodes_keep_their_standing(rules: LoadRules) -> None:
    """The annotator rewrites nodes' values all the time; a passing node whose new values still
    pass changes its score, not what filter answers: the filter answer about its window is
    kept (and its prioritize answer prepared again, with the new score); once a node in it
    changes standing or rejection message, it is another answer (patched)."""
    current = {f"n{i}": loaded_node(f"n{i}", 0.9 if i % 4 == 0 else 0.3) for i in range(20)}
    decide, cache, _ = extender(rules, list(current.values()))
    window = [f"n{i}" for i in range(10)]
    key = (payloads.encode(window), True, None)
    registry = decide._metrics.registry

    def kept(verb: str) -> float:
        labels = {"verb": verb}
        return registry.get_sample_value("loadsched_extender_answers_kept_total", labels) or 0.0

    def change(item: Node) -> None:
        current[item.metadata.name] = item
        cache.apply("MODIFIED", item)

    def from_scratch(verb: str, names: list[str]) -> Any:
        fresh, _, _ = extender(rules, list(current.values()))
        return ask(fresh, verb, names)

    first = raw_filter(decide, window)
    passed = json.loads(first)["NodeNames"]
    scores = ask(decide, "prioritize", passed)
    answer = decide._filtered.get(decide.view(NOW), key)
    change(loaded_node("n1", 0.5, hot=3))  # still passes, a lower score
    assert decide._filtered.get(decide.view(NOW), key) is answer
    assert raw_filter(decide, window) == first
    assert kept("filter") == 1
    prepared = decide._prioritized._windows[payloads.encode(passed)]
    assert prepared.version == decide.view(NOW).changes.version, "prepared after the filter"
    moved = ask(decide, "prioritize", passed)
    assert kept("prioritize") == 2, "prepared again after the kept filter answer"
    assert moved != scores
    assert moved == from_scratch("prioritize", passed)
    for item in (
        loaded_node("n2", 0.9),
        loaded_node("n0", 0.95),
        loaded_node("n2", 0.3),
    ):  # standing, message
        change(item)
        before = kept("filter")
        assert json.loads(raw_filter(decide, window)) == from_scratch("filter", window)
        assert kept("filter") == before + 1, "patched, not computed again"


def test_a_kept_answer_counts_its_own_rejections_after_others_change(rules: LoadRules) -> None:
    """A window that holds every rejected node takes the view's rejections whole; kept after
    a node outside it is rejected too, it still counts its own."""
    decide, cache, _ = extender(
        rules, [loaded_node(f"n{i}", 0.9 if i == 0 else 0.3) for i in range(6)]
    )
    window = ["n0", "n1", "n2"]
    raw_filter(decide, window)
    cache.apply("MODIFIED", loaded_node("n4", 0.95))
    before = filtered_total(decide)
    assert json.loads(raw_filter(decide, window))["FailedAndUnresolvableNodes"].keys() == {"n0"}
    assert filtered_total(decide) - before == 1


def test_spread_scores_are_computed_again_when_a_node_asked_about_changes() -> None:
    """With ``normalize: minMax`` every node's score depends on the others asked about: an
    answer kept for them is not patched but computed again."""
    import yaml

    from shared.policy import DEFAULT_POLICY_YAML, parse_policy

    data = yaml.safe_load(DEFAULT_POLICY_YAML)
    data["spec"]["scoring"] = {"normalize": "minMax"}
    rules = LoadRules.from_policy(parse_policy(data))
    nodes = [loaded_node(f"n{i}", 0.1 + i / 20) for i in range(8)]
    decide, cache, _ = extender(rules, nodes)
    names = [n.metadata.name for n in nodes]
    assert ask(decide, "prioritize", names) == ask(decide, "prioritize", names)
    nodes[0] = loaded_node("n0", 0.6)  # the least loaded becomes the most: every score moves
    cache.apply("MODIFIED", nodes[0])
    fresh, _, _ = extender(rules, nodes)
    assert ask(decide, "prioritize", names) == ask(fresh, "prioritize", names)


def test_names_asked_about_twice_are_answered_as_from_scratch(rules: LoadRules) -> None:
    """kube-scheduler names each node once, but a request may repeat one: a rejected node
    asked about twice does not stand for every rejected node, and a kept prioritize answer
    with a repeated node is computed again, not patched at one of its places."""
    current = {n: loaded_node(n, 0.9 if n in ("a", "b") else 0.3) for n in ("a", "b", "c", "d")}
    decide, cache, _ = extender(rules, list(current.values()))

    def from_scratch(verb: str, names: list[str]) -> Any:
        fresh, _, _ = extender(rules, list(current.values()))
        return ask(fresh, verb, names)

    twice = ["a", "a", "c"]
    answer = ask(decide, "filter", twice)
    assert answer == from_scratch("filter", twice)
    assert answer["FailedAndUnresolvableNodes"].keys() == {"a"}
    scored = ["c", "c", "d"]
    before = ask(decide, "prioritize", scored)
    current["c"] = loaded_node("c", 0.05)  # a higher score
    cache.apply("MODIFIED", current["c"])
    after = ask(decide, "prioritize", scored)
    assert after == from_scratch("prioritize", scored)
    assert after[0] == after[1] != before[0]


def test_a_filter_answer_whose_nodes_change_is_patched_to_the_answer_from_scratch() -> None:
    """A kept filter answer whose nodes change is brought up to date node by node (counted as
    kept): rejected, passing again, another message, unknown values, deleted (not cached,
    failClosed) and back; each time the answer, and what the request counts, are those of
    an extender built from scratch on the same nodes."""
    import yaml

    from shared.policy import DEFAULT_POLICY_YAML, parse_policy

    data = yaml.safe_load(DEFAULT_POLICY_YAML)
    data["spec"]["staleData"] = "failClosed"
    rules = LoadRules.from_policy(parse_policy(data))
    old = NOW - timedelta(minutes=10)

    def loaded_node(name: str, usage: float, at: datetime = NOW) -> Node:  # every metric: known
        keys = [k for k in rules.keys if k != "node_hot_value"]
        annotations = {k: encode_metric(usage, at) for k in keys}
        return Node(metadata=NodeMeta(name=name, annotations=annotations))

    current = {f"n{i}": loaded_node(f"n{i}", 0.9 if i % 3 == 0 else 0.3) for i in range(12)}
    decide, cache, _ = extender(rules, list(current.values()))
    window = [f"n{i}" for i in range(0, 12, 2)]
    registry = decide._metrics.registry

    def kept() -> float:
        labels = {"verb": "filter"}
        return registry.get_sample_value("loadsched_extender_answers_kept_total", labels) or 0.0

    ask(decide, "filter", window)
    steps: list[tuple[str, Node | None]] = [
        ("n2", loaded_node("n2", 0.95)),  # rejected
        ("n0", loaded_node("n0", 0.3)),  # passing again
        ("n6", loaded_node("n6", 0.97)),  # another message
        ("n4", loaded_node("n4", 0.3, at=old)),  # stale: unknown, refused under failClosed
        ("n8", None),  # deleted: not cached
        ("n1", loaded_node("n1", 0.99)),  # outside the window
        ("n8", loaded_node("n8", 0.3)),  # back
        ("n4", loaded_node("n4", 0.2)),  # fresh again
    ]
    for count, (name, item) in enumerate(steps, start=1):
        if item is None:
            cache.apply("DELETED", current.pop(name))
        else:
            current[name] = item
            cache.apply("MODIFIED", item)
        fresh, _, _ = extender(rules, list(current.values()))
        before = counted(decide)
        assert ask(decide, "filter", window) == ask(fresh, "filter", window), name
        assert grown(before, counted(decide)) == grown({}, counted(fresh)), name
        assert kept() == count, name
    answer = ask(decide, "filter", window)
    assert answer["NodeNames"] == ["n0", "n4", "n8", "n10"]
    assert answer["FailedAndUnresolvableNodes"].keys() == {"n2", "n6"}


def test_filter_answers_for_daemonsets_are_not_patched(rules: LoadRules) -> None:
    """A DaemonSet pod's answer keeps no facts (load never keeps it off a node): once a node
    asked about changes what filter reads, it is computed again (answers made with the pod's
    estimate: tests/extender/scheduling/test_estimation.py)."""
    decide, cache, _ = extender(rules, [loaded_node(f"n{i}", 0.3) for i in range(4)])
    window = ["n0", "n1", "n2"]
    ask(decide, "filter", window, daemonset=True)
    view = decide.view(NOW)
    key = (payloads.encode(window), False, None)
    assert decide._filtered.get(view, key) is not None
    cache.apply("MODIFIED", loaded_node("n3", 0.95))  # outside the window: kept
    assert decide._filtered.get(decide.view(NOW), key) is not None
    cache.apply("MODIFIED", loaded_node("n1", 0.95))
    assert decide._filtered.get(decide.view(NOW), key) is None
    assert sorted(ask(decide, "filter", window, daemonset=True)["NodeNames"]) == window


def test_unknown_values_are_counted_each_time_a_node_is_asked_about(rules: LoadRules) -> None:
    """As full-node requests count them, row by row: a node named twice counts twice."""
    decide, _, _ = extender(rules, [loaded_node("a", 0.3, at=NOW - timedelta(minutes=10))])
    before = counted(decide)
    ask(decide, "filter", ["a", "a"])
    grew = grown(before, counted(decide))
    unknown = {k: v for k, v in grew.items() if "unknown" in k}
    assert unknown and set(unknown.values()) == {2.0}


def test_refusals_gathered_after_the_answer_is_written_are_those_judged_name_by_name(
    rules: LoadRules,
) -> None:
    """Served, the refusals of an answer that passes some node are gathered and counted once it
    is written (the work the extender defers): until then nothing is counted; then each
    request counts exactly the nodes it refused, including an answer patched from one whose
    refusals were still to be gathered."""
    nodes = [loaded_node(f"n{i}", 0.9 if i % 3 == 0 else 0.3) for i in range(12)]
    cache = NodeLoadCache(rules)
    cache.replace(nodes)
    queued: list[Any] = []
    decide = LoadAwareExtender(
        rules=rules,
        clock=Clock(),
        metrics=ExtenderMetrics(),
        node_cache=cache,
        defer=queued.append,
    )
    window = [f"n{i}" for i in range(1, 12)]  # not every refused node: gathered name by name
    answer = json.loads(raw_filter(decide, window))
    assert answer["NodeNames"] and not answer.get("FailedAndUnresolvableNodes")
    assert filtered_total(decide) == 0, "counted once the answer is written"
    first = per_name(decide, window)
    cache.apply("MODIFIED", loaded_node("n4", 0.95))  # in the window: the kept answer is patched
    answer = json.loads(raw_filter(decide, window))
    second = per_name(decide, window)
    assert set(answer["NodeNames"]) == set(window) - set(second[0])
    assert "n4" in second[0]
    while queued:
        queued.pop(0)()
    expected = sum(first[1].values()) + sum(second[1].values())
    assert filtered_total(decide) == expected
    kept = decide._filtered.get(decide.view(NOW), (payloads.encode(window), True, None))
    assert kept is not None
    assert (kept.tally.rejected, dict(kept.tally.reasons)) == second


def test_window_memo_frees_the_windows_it_drops_when_told() -> None:
    """The served extender frees the windows a new answer pushes out once that answer is
    written: until the release runs, what was dropped is held, and no longer kept."""
    import weakref

    from extender.scheduling.node_view import NodeView

    class Answer:
        pass

    view = NodeView()
    view.verdicts.update({f"n{i}": None for i in range(4)})  # type: ignore[misc]
    releases: list[Any] = []
    memo = WindowMemo[Answer](every_change, names_kept=2, release=releases.append)
    first = Answer()
    gone = weakref.ref(first)
    memo.put(view, "a", ["n0", "n1"], first)
    del first
    memo.put(view, "b", ["n2", "n3"], Answer())
    assert memo.get(view, "a") is None
    assert gone() is not None, "held until released"
    assert len(releases) == 1
    releases.pop()()
    assert gone() is None
