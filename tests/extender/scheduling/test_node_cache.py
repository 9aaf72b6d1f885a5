from datetime import timedelta

from extender.scheduling.node_cache import NodeLoadCache, RequestMemo
from extender.scheduling.wire import Node, NodeMeta
from shared.annotations import encode_metric
from shared.load_model import LoadRules
from tests.fakes.clock import NOW


def node(name: str, **annotations: str) -> Node:
    return Node(metadata=NodeMeta(name=name, annotations=annotations))


def test_verdict_is_recomputed_when_a_value_goes_stale(rules: LoadRules) -> None:
    cache = NodeLoadCache(rules)
    cache.replace([node("n1", cpu_usage_avg_5m=encode_metric(0.9, NOW))])
    entry = cache.get("n1")
    assert entry is not None
    assert entry.verdict(rules, NOW).overload is not None
    assert entry.verdict(rules, NOW + timedelta(minutes=7)).overload is not None
    # 3m period + 5m: stale at 8m, fail-open passes
    assert entry.verdict(rules, NOW + timedelta(minutes=8)).overload is None
    # a clock that goes back is not served a verdict from the future
    assert entry.verdict(rules, NOW).overload is not None


def test_watch_events_update_and_delete(rules: LoadRules) -> None:
    cache = NodeLoadCache(rules)
    cache.replace([node("n1"), node("n2")])
    first = cache.get("n1")
    cache.apply("MODIFIED", node("n1", unrelated="x"))
    assert cache.get("n1") is first  # annotations the rules do not read: nothing re-decoded
    cache.apply("MODIFIED", node("n1", cpu_usage_avg_5m=encode_metric(0.9, NOW)))
    entry = cache.get("n1")
    assert entry is not first and entry is not None
    assert entry.verdict(rules, NOW).overload is not None
    cache.apply("DELETED", node("n2"))
    cache.apply("ADDED", node("n3"))
    assert cache.get("n2") is None and len(cache) == 2


def test_relist_keeps_unchanged_entries(rules: LoadRules) -> None:
    cache = NodeLoadCache(rules)
    cache.replace([node("n1", cpu_usage_avg_5m=encode_metric(0.1, NOW))])
    before = cache.get("n1")
    cache.replace([node("n1", cpu_usage_avg_5m=encode_metric(0.1, NOW)), node("n2")])
    assert cache.get("n1") is before


def test_request_memo_is_bounded(rules: LoadRules) -> None:
    memo = RequestMemo(rules, max_entries=3)
    entries = [memo.load(node(f"n{i}")) for i in range(3)]
    assert memo.load(node("n0")) is entries[0]
    memo.load(node("n9"))
    assert memo.load(node("n0")) is not entries[0]


def test_verdicts_snapshot_follows_events_and_expiry(rules: LoadRules) -> None:
    cache = NodeLoadCache(rules)
    cache.replace([node("hot", cpu_usage_avg_5m=encode_metric(0.9, NOW)), node("cool")])
    verdicts = cache.view(NOW).verdicts
    assert verdicts["hot"].overload is not None
    assert verdicts["cool"].overload is None
    # an event is seen by the next call
    cache.apply("MODIFIED", node("cool", cpu_usage_avg_5m=encode_metric(0.95, NOW)))
    assert cache.view(NOW).verdicts["cool"].overload is not None
    # expiry re-evaluates without any event
    later = cache.view(NOW + timedelta(minutes=8)).verdicts
    assert later["hot"].overload is None and later["cool"].overload is None
    # the clock going back re-evaluates everything
    assert cache.view(NOW).verdicts["hot"].overload is not None
    cache.apply("DELETED", node("hot"))
    view = cache.view(NOW)
    assert set(view.verdicts) == set(view.scores) == {"cool"}
    assert view.clean == set()  # cool is overloaded
    cache.replace([node("other", **{k: encode_metric(0.1, NOW) for k in rules.keys})])
    view = cache.view(NOW)
    assert set(view.verdicts) == {"other"}
    assert view.clean == {"other"}
    assert view.scores["other"].Score == 9
