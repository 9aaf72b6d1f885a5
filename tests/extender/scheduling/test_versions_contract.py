"""Contract tests on the bodies each Kubernetes release's kube-scheduler sends, one folder per
release (tests/fixtures/kube-scheduler/<version>/, captured by tests/e2e/test_version_smoke.py
against that release's binaries): they decode through the extender's wire types, and the
extender's answers have the shape kube-scheduler reads, in both node-cache modes."""

from __future__ import annotations

import copy
import json
from typing import Any

import httpx
import pytest

from extender.scheduling.wire import (
    ARGS_DECODER,
    NODE_DECODER,
    PREEMPTION_DECODER,
)
from extender.scheduling.wire import (
    node_names as decode_node_names,
)
from sandbox.build import MATRIX_VERSIONS, kube_version
from sandbox.capture import BODY_NAMES, fixture_dir, read_fixtures
from shared.load_model import MAX_EXTENDER_SCORE, LoadRules
from tests import payloads
from tests.fakes.captured import VERSIONS
from tests.fakes.clock import NOW
from tests.fakes.extender_calls import ClientFactory, wait_ready
from tests.fakes.kube import FakeCollection, obj

HOT, COOL = 0.9, 0.3


def bodies(version: str) -> dict[str, dict[str, Any]]:
    return read_fixtures(fixture_dir(version))


def node_names(version: str) -> list[str]:
    return [n["metadata"]["name"] for n in bodies(version)["filter-full"]["Nodes"]["items"]]


def hot_node(version: str) -> str:
    """A node every body of ``version`` offers (its filter and prioritize bodies do)."""
    return node_names(version)[2]


def with_loads(body: dict[str, Any], rules: LoadRules, hot: str) -> dict[str, Any]:
    """``body``'s nodes with load annotations: ``hot`` overloaded, the others lightly loaded."""
    body = copy.deepcopy(body)
    for item in body["Nodes"]["items"]:
        usage = HOT if item["metadata"]["name"] == hot else COOL
        item["metadata"].setdefault("annotations", {}).update(
            payloads.load_annotations(rules, usage, NOW)
        )
    return body


async def names_only_client(
    make_client: ClientFactory, rules: LoadRules, version: str
) -> httpx.AsyncClient:
    """An extender whose node watch lists ``version``'s nodes with the same loads."""
    hot = hot_node(version)
    listed = [
        obj(name, i, payloads.load_annotations(rules, HOT if name == hot else COOL, NOW))
        for i, name in enumerate(node_names(version))
    ]
    client = await make_client(fake=FakeCollection(lists=[(100, listed)]))
    await wait_ready(client)
    return client


async def post(client: httpx.AsyncClient, verb: str, body: dict[str, Any]) -> Any:
    response = await client.post(f"/{verb}", content=json.dumps(body))
    assert response.status_code == 200, response.text
    return response.json()


def test_every_release_tested_has_its_bodies() -> None:
    for version in (*MATRIX_VERSIONS, kube_version()):
        assert version in VERSIONS, f"no {fixture_dir(version)}"
        assert set(bodies(version)) == set(BODY_NAMES)


@pytest.mark.parametrize("version", VERSIONS)
def test_bodies_have_the_documented_shape(version: str) -> None:
    captured = bodies(version)
    for verb in ("filter", "prioritize"):
        assert set(captured[f"{verb}-full"]) == {"Pod", "Nodes", "NodeNames"}
        assert captured[f"{verb}-full"]["NodeNames"] is None
        assert captured[f"{verb}-names"]["Nodes"] is None
        assert isinstance(captured[f"{verb}-names"]["NodeNames"], list)
    for mode in ("names", "full"):
        assert set(captured[f"preempt-{mode}"]) == {
            "Pod",
            "NodeNameToVictims",
            "NodeNameToMetaVictims",
        }
    assert captured["preempt-names"]["NodeNameToVictims"] is None
    assert captured["preempt-full"]["NodeNameToMetaVictims"] is None
    # objects from the scheduler's cache carry no apiVersion/kind
    assert "apiVersion" not in captured["filter-full"]["Pod"]


@pytest.mark.parametrize("version", VERSIONS)
def test_bodies_decode_through_the_wire_types(version: str) -> None:
    folder = fixture_dir(version)
    for name in BODY_NAMES:
        raw = (folder / f"{name}.json").read_bytes()
        as_json = json.loads(raw)
        pod = as_json["Pod"]["metadata"]
        if name.startswith("preempt"):
            preemption = PREEMPTION_DECODER.decode(raw)
            assert preemption.Pod is not None
            assert (preemption.Pod.metadata.name, preemption.Pod.metadata.uid) == (
                pod["name"],
                pod["uid"],
            )
            if name == "preempt-names":
                meta = preemption.NodeNameToMetaVictims or {}
                assert {n: [p.UID for p in v.Pods] for n, v in meta.items()} == {
                    n: [p["UID"] for p in v["Pods"]]
                    for n, v in as_json["NodeNameToMetaVictims"].items()
                }
            else:
                full = preemption.NodeNameToVictims or {}
                assert {n: [p.metadata.uid for p in v.Pods or []] for n, v in full.items()} == {
                    n: [p["metadata"]["uid"] for p in v["Pods"]]
                    for n, v in as_json["NodeNameToVictims"].items()
                }
            continue
        args = ARGS_DECODER.decode(raw)
        assert args.Pod is not None and args.Pod.metadata.name == pod["name"]
        if name.endswith("names"):
            assert args.names_only and decode_node_names(args.NodeNames) == as_json["NodeNames"]
        else:
            assert args.Nodes is not None and args.Nodes.items is not None
            decoded = [NODE_DECODER.decode(item) for item in args.Nodes.items]
            assert [n.metadata.name for n in decoded] == [
                n["metadata"]["name"] for n in as_json["Nodes"]["items"]
            ]
            assert all(n.status.allocatable for n in decoded)


@pytest.mark.anyio
@pytest.mark.parametrize("version", VERSIONS)
async def test_filter_answers_in_both_modes(
    client: httpx.AsyncClient, make_client: ClientFactory, rules: LoadRules, version: str
) -> None:
    hot = hot_node(version)
    body = with_loads(bodies(version)["filter-full"], rules, hot)
    full = await post(client, "filter", body)
    assert full["NodeNames"] is None
    # an answer that passes nodes lists no refusal: kube-scheduler drops them unread
    assert full["FailedAndUnresolvableNodes"] == {} and full["FailedNodes"] == {}
    assert full["Nodes"]["items"] == [
        n for n in body["Nodes"]["items"] if n["metadata"]["name"] != hot
    ]

    names_client = await names_only_client(make_client, rules, version)
    names_body = bodies(version)["filter-names"]
    names = await post(names_client, "filter", names_body)
    assert names["Nodes"] is None
    assert names["NodeNames"] == [n for n in names_body["NodeNames"] if n != hot]
    assert names["FailedAndUnresolvableNodes"] == {} and names["FailedNodes"] == {}


@pytest.mark.anyio
@pytest.mark.parametrize("version", VERSIONS)
async def test_prioritize_answers_a_bare_array_in_both_modes(
    client: httpx.AsyncClient, make_client: ClientFactory, rules: LoadRules, version: str
) -> None:
    hot = hot_node(version)
    body = with_loads(bodies(version)["prioritize-full"], rules, hot)
    full = await post(client, "prioritize", body)
    names_client = await names_only_client(make_client, rules, version)
    names_body = bodies(version)["prioritize-names"]
    names = await post(names_client, "prioritize", names_body)
    for answer, offered in ((full, node_names(version)), (names, names_body["NodeNames"])):
        assert isinstance(answer, list)
        assert all(set(entry) == {"Host", "Score"} for entry in answer)
        assert [entry["Host"] for entry in answer] == offered
        scores = {entry["Host"]: entry["Score"] for entry in answer}
        assert all(0 <= score <= MAX_EXTENDER_SCORE for score in scores.values())
        others = {score for host, score in scores.items() if host != hot}
        assert len(others) == 1 and scores[hot] < min(others), scores
    # both modes score a node alike
    assert {e["Host"]: e["Score"] for e in names}.items() <= {
        e["Host"]: e["Score"] for e in full
    }.items()


@pytest.mark.anyio
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("mode", ["names", "full"])
async def test_preempt_answers_victims_by_uid(
    client: httpx.AsyncClient, version: str, mode: str
) -> None:
    body = bodies(version)[f"preempt-{mode}"]
    result = await post(client, "preempt", body)
    if mode == "names":
        expected = body["NodeNameToMetaVictims"]
    else:
        expected = {
            node: {
                "Pods": [{"UID": p["metadata"]["uid"]} for p in victims["Pods"]],
                "NumPDBViolations": victims["NumPDBViolations"],
            }
            for node, victims in body["NodeNameToVictims"].items()
        }
    assert result == {"NodeNameToMetaVictims": expected}
    assert result["NodeNameToMetaVictims"]
