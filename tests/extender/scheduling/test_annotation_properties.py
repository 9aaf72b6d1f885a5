"""No annotation can break a decision: arbitrary annotation maps, hostile values included, go
through the codec, the load model and the extender's filter and prioritize (the ASGI app, no
network) in both modes, and every answer is a 200 with names only from the input and scores
in range. Both modes agree on every node they both know."""

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extender.app import create_app
from extender.scheduling.node_cache import NodeLoadCache, decode_node
from extender.settings import ExtenderSettings
from shared.annotations import format_timestamp
from shared.kube.config import KubeEndpoint
from shared.load_model import LoadRules, NodeLoad, evaluate
from shared.policy import DynamicSchedulerPolicy, default_policy, parse_policy
from tests import payloads
from tests.fakes.clock import NOW

pytestmark = pytest.mark.anyio

SHANGHAI = ZoneInfo("Asia/Shanghai")
POLICY_KEYS = list(LoadRules.from_policy(default_policy()).keys)

HOSTILE_NUMBERS = [
    "0", "-0", "0.5", "0.65", "0.65001", "1", "2.", ".5", "+0.5", "1e-3",
    "1e308", "-1e308", "1.7976931348623157e308", "1e400", "-1e400", "1e-400", "9" * 400,
    "+Inf", "-Inf", "inf", "Infinity", "-infinity", "NaN", "nan", "-NaN", "+nan",
    "\u0660.\u0669", "\uff10.5", "\u0131nf", "1_0", "0x1p-2", " 0.5", "0.5 ", "", "-", "e5",
]  # fmt: skip
HOSTILE_STAMPS = [
    "9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "0000-01-01T00:00:00Z",
    "2026-02-29T00:00:00Z", "2026-11-22T24:00:00Z", "2026-11-22T12:00:60Z",
    "\u0662\u0660\u0662\u0666-11-22T12:00:00Z", "2026-11-22T12:00:00", "2026-11-22 12:00:00Z",
    "2026-11-22T12:00:00+00:00", "", "Z",
]  # fmt: skip
NEAR_NOW = [
    timedelta(0), timedelta(seconds=-30), timedelta(seconds=59), timedelta(minutes=1),
    timedelta(minutes=1, seconds=1), timedelta(minutes=-8), timedelta(hours=8),
    timedelta(hours=-8),
]  # fmt: skip


def stamp_near_now(offset: timedelta, zone: ZoneInfo | None) -> str:
    return format_timestamp(NOW + offset, zone or ZoneInfo("UTC"))


numbers = (
    st.sampled_from(HOSTILE_NUMBERS)
    | st.floats().map(repr)
    | st.floats(min_value=0, max_value=2).map(lambda f: f"{f:.5f}")
    | st.text(max_size=8)
)
stamps = (
    st.sampled_from(HOSTILE_STAMPS)
    | st.builds(stamp_near_now, st.sampled_from(NEAR_NOW), st.sampled_from([None, SHANGHAI]))
    | st.datetimes().map(lambda d: d.strftime("%Y-%m-%dT%H:%M:%SZ"))
    | st.text(max_size=24)
)
values = (
    st.builds(lambda n, s: f"{n},{s}", numbers, stamps)
    | st.builds(lambda n, s, t: f"{n},{s},{t}", numbers, stamps, st.text(max_size=4))
    | st.text(max_size=40)
)
keys = st.sampled_from(POLICY_KEYS) | st.text(max_size=20)
annotation_maps = st.dictionaries(keys, values, max_size=10)
nodes = st.lists(annotation_maps | st.none(), min_size=1, max_size=5)


def node_items(maps: list[dict[str, str] | None]) -> list[dict[str, Any]]:
    items = []
    for i, annotations in enumerate(maps):
        metadata: dict[str, Any] = {"name": f"n{i}"}
        if annotations is not None:
            metadata["annotations"] = annotations
        items.append({"metadata": metadata})
    return items


POLICIES = {
    "crane-default": default_policy(),
    "fail-closed-shanghai": parse_policy(
        {
            "spec": {
                **default_policy().model_dump(by_alias=True)["spec"],
                "staleData": "failClosed",
                "timestampZone": "Asia/Shanghai",
            }
        }
    ),
}


@pytest.fixture(params=sorted(POLICIES))
def policy(request: pytest.FixtureRequest) -> DynamicSchedulerPolicy:
    return POLICIES[request.param]


@pytest.fixture
async def app_and_cache(
    policy: DynamicSchedulerPolicy,
) -> AsyncIterator[tuple[httpx.AsyncClient, NodeLoadCache]]:
    """The extender app with a node cache that the test feeds itself (no watch runs)."""
    app = create_app(
        ExtenderSettings(filter_rejections="always"),  # every answer says why of each node
        policy=policy,
        endpoint=KubeEndpoint(host="https://api.test"),
        clock=lambda: NOW,
    )
    cache = app.state.loadsched.node_cache
    assert isinstance(cache, NodeLoadCache)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://extender") as client:
        yield client, cache


async def post(client: httpx.AsyncClient, verb: str, body: dict[str, Any]) -> Any:
    response = await client.post(f"/{verb}", content=payloads.encode(body))
    assert response.status_code == 200, response.text
    return response.json()


def check_scores(answer: Any, names: list[str]) -> dict[str, int]:
    assert [entry["Host"] for entry in answer] == names
    scores = {entry["Host"]: entry["Score"] for entry in answer}
    assert all(isinstance(s, int) and 0 <= s <= 10 for s in scores.values())
    return scores


@given(maps=nodes, daemonset=st.booleans())
@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
async def test_any_annotations_get_a_decision_in_both_modes(
    app_and_cache: tuple[httpx.AsyncClient, NodeLoadCache],
    policy: DynamicSchedulerPolicy,
    maps: list[dict[str, str] | None],
    daemonset: bool,
) -> None:
    client, cache = app_and_cache
    items = node_items(maps)
    names = [item["metadata"]["name"] for item in items]
    pod = payloads.pod(daemonset=daemonset)

    # the pure core: decode and evaluate never raise, the score stays on its scales
    rules = LoadRules.from_policy(policy)
    for name, annotations in zip(names, maps, strict=True):
        verdict = evaluate(NodeLoad.from_annotations(name, annotations, rules), rules, NOW)
        assert 0 <= verdict.score <= 100 and 0 <= verdict.extender_score <= 10
        assert verdict.valid_until is None or NOW < verdict.valid_until <= NOW + timedelta(days=1)

    # full-node mode: the nodes come in the body
    full = await post(client, "filter", payloads.full_args(items, pod))
    assert full["Error"] == ""
    passed = [item["metadata"]["name"] for item in full["Nodes"]["items"]]
    rejected = full["FailedAndUnresolvableNodes"]
    assert set(passed).isdisjoint(rejected) and set(passed) | set(rejected) == set(names)
    assert full["Nodes"]["items"] == [i for i in items if i["metadata"]["name"] in passed]
    if daemonset:
        assert rejected == {}
    full_scores = check_scores(
        await post(client, "prioritize", payloads.full_args(items, pod)), names
    )

    # names-only mode: the same nodes from the cache, plus one it does not hold
    cache.replace([decode_node(payloads.encode(item)) for item in items])
    asked = [*reversed(names), "absent"]
    by_name = await post(client, "filter", payloads.names_args(asked, pod))
    assert by_name["Error"] == "" and by_name["Nodes"] is None
    assert [n for n in asked if n in by_name["NodeNames"]] == by_name["NodeNames"]
    assert set(by_name["NodeNames"]) | set(by_name["FailedAndUnresolvableNodes"]) == set(asked)
    # both modes decide every node alike
    assert [n for n in by_name["NodeNames"] if n != "absent"] == list(reversed(passed))
    assert {n: m for n, m in by_name["FailedAndUnresolvableNodes"].items() if n != "absent"} == (
        rejected
    )
    names_scores = check_scores(
        await post(client, "prioritize", payloads.names_args(asked, pod)), asked
    )
    assert names_scores == {**full_scores, "absent": 0}
