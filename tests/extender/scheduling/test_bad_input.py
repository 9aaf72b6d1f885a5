"""Nothing a client sends makes the extender answer 500: bad bodies get a 4xx naming the field."""

import json
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extender.app import create_app
from extender.settings import ExtenderSettings
from shared.load_model import LoadRules
from shared.policy import default_policy
from tests import payloads
from tests.fakes.clock import NOW
from tests.fakes.extender_calls import ClientFactory

pytestmark = pytest.mark.anyio

VERBS = ["filter", "prioritize", "preempt"]


@pytest.mark.parametrize("verb", VERBS)
@pytest.mark.parametrize(
    ("body", "status", "mentions"),
    [
        (b"", 400, "truncated"),
        (b"{", 400, "truncated"),
        (b"not json", 400, "malformed"),
        (b"[]", 400, "Expected `object`"),
        (b"{}", 400, "Pod is required"),
        (b'{"Pod": null, "Nodes": {"items": []}}', 400, "Pod is required"),
        (b'{"Pod": 3}', 400, "$.Pod"),
        (b'{"Pod": {"metadata": {"name": 5}}}', 400, "$.Pod.metadata.name"),
        (b'{"Pod": {"metadata": {"ownerReferences": {}}}}', 400, "$.Pod.metadata.ownerReferences"),
    ],
)
async def test_malformed_bodies(
    client: httpx.AsyncClient, verb: str, body: bytes, status: int, mentions: str
) -> None:
    response = await client.post(f"/{verb}", content=body)
    assert response.status_code == status
    assert mentions in response.json()["detail"]


@pytest.mark.parametrize("verb", ["filter", "prioritize"])
@pytest.mark.parametrize(
    ("body", "mentions"),
    [
        ({"Pod": {}}, "one of Nodes or NodeNames"),
        ({"Pod": {}, "Nodes": None, "NodeNames": None}, "one of Nodes or NodeNames"),
        ({"Pod": {}, "Nodes": {"items": []}, "NodeNames": []}, "not both"),
        ({"Pod": {}, "NodeNames": "n1"}, "$.NodeNames"),
        ({"Pod": {}, "NodeNames": [1]}, "$.NodeNames[0]"),
        ({"Pod": {}, "Nodes": []}, "$.Nodes"),
        ({"Pod": {}, "Nodes": {"items": {}}}, "$.Nodes.items"),
        (
            {"Pod": {}, "Nodes": {"items": [{"metadata": {"annotations": {"a": 1}}}]}},
            "$.Nodes.items[0].metadata.annotations[...]",
        ),
        (
            {"Pod": {}, "Nodes": {"items": [{}, {"metadata": {"name": ["x"]}}]}},
            "$.Nodes.items[1].metadata.name",
        ),
    ],
)
async def test_wrong_types_name_the_field(
    client: httpx.AsyncClient, verb: str, body: dict[str, Any], mentions: str
) -> None:
    response = await client.post(f"/{verb}", content=json.dumps(body))
    assert response.status_code == 400
    assert mentions in response.json()["detail"]


@pytest.mark.parametrize(
    ("body", "mentions"),
    [
        (
            {"Pod": {}, "NodeNameToVictims": {"n": {"Pods": [{"metadata": {"uid": 1}}]}}},
            "$.NodeNameToVictims[...].Pods[0].metadata.uid",
        ),
        ({"Pod": {}, "NodeNameToMetaVictims": {"n": {"Pods": [{}]}}}, "UID"),
        (
            {"Pod": {}, "NodeNameToMetaVictims": {"n": {"NumPDBViolations": "1"}}},
            "NumPDBViolations",
        ),
    ],
)
async def test_preempt_wrong_types(
    client: httpx.AsyncClient, body: dict[str, Any], mentions: str
) -> None:
    response = await client.post("/preempt", content=json.dumps(body))
    assert response.status_code == 400
    assert mentions in response.json()["detail"]


async def test_body_over_the_limit_is_413(make_client: ClientFactory) -> None:
    client = await make_client(max_body_bytes=1000)
    body = payloads.encode(payloads.full_args([payloads.node("n1")]))
    assert len(body) > 1000
    response = await client.post("/filter", content=body)
    assert response.status_code == 413
    assert "over the limit of 1000" in response.json()["detail"]

    async def chunked() -> Any:  # no Content-Length: the limit applies while reading
        for i in range(0, len(body), 256):
            yield body[i : i + 256]

    response = await client.post("/filter", content=chunked())
    assert response.status_code == 413
    small = payloads.encode(payloads.full_args([]))
    assert (await client.post("/filter", content=small)).status_code == 200


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
shaped = st.fixed_dictionaries(
    {},
    optional={
        "Pod": json_values
        | st.fixed_dictionaries(
            {
                "metadata": st.dictionaries(
                    st.sampled_from(["name", "namespace", "ownerReferences", "uid"]), json_values
                )
            }
        ),
        "Nodes": json_values
        | st.fixed_dictionaries(
            {
                "items": st.lists(
                    st.fixed_dictionaries(
                        {
                            "metadata": st.dictionaries(
                                st.sampled_from(["name", "annotations"]),
                                json_values
                                | st.dictionaries(
                                    st.sampled_from(["cpu_usage_avg_5m", "node_hot_value"]),
                                    st.text(max_size=30),
                                ),
                            )
                        }
                    ),
                    max_size=3,
                )
            }
        ),
        "NodeNames": json_values | st.lists(st.text(max_size=5), max_size=3),
        "NodeNameToVictims": json_values,
        "NodeNameToMetaVictims": json_values,
    },
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=json_values | shaped, verb=st.sampled_from(VERBS))
async def test_fuzzed_bodies_never_500(client: httpx.AsyncClient, body: Any, verb: str) -> None:
    response = await client.post(f"/{verb}", content=json.dumps(body))
    assert response.status_code in (200, 400, 503), response.text
    assert response.headers["content-type"] == "application/json"


@pytest.mark.parametrize("verb", VERBS)
async def test_only_post_is_allowed(client: httpx.AsyncClient, verb: str) -> None:
    response = await client.get(f"/{verb}")
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    assert response.json() == {"detail": "Method Not Allowed"}


async def test_an_internal_error_is_a_json_500_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A verb that raises answers a logged JSON 500; the same verb's next call is served as
    usual, with the answer an app that never failed gives."""
    rules = LoadRules.from_policy(default_policy())
    body = payloads.encode(payloads.full_args(payloads.cluster(rules, 3, NOW)))

    def build() -> Any:
        return create_app(ExtenderSettings(), clock=lambda: NOW)

    async def prioritize(app: Any) -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://extender") as client:
            return await client.post("/prioritize", content=body)

    expected = await prioritize(build())
    assert expected.status_code == 200
    assert len({score["Score"] for score in expected.json()}) > 1  # the loads are told apart

    app = build()
    extender = app.state.loadsched.extender
    working = extender.prioritize
    failures: list[str] = []

    def fails_once(*args: Any) -> Any:
        if not failures:
            failures.append("boom")
            raise RuntimeError("boom")
        return working(*args)

    extender.prioritize = fails_once
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://extender") as client:
        response = await client.post("/prioritize", content=body)
        assert response.status_code == 500
        assert response.json() == {"detail": "internal error in prioritize: see the extender's log"}
        assert "boom" in caplog.text
        again = await client.post("/prioritize", content=body)
    assert failures == ["boom"]
    assert again.status_code == 200 and again.json() == expected.json()
