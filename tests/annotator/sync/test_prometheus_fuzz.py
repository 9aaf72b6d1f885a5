"""Whatever Prometheus (or anything in front of it) answers, the annotator's parser raises
nothing but :class:`PrometheusError`, and a sync round writes only values the annotation
contract allows (DESIGN.md: a fraction with 5 decimals, NaN or negative as ``0.00000``), or
nothing.

Inputs: arbitrary bytes; arbitrary JSON; and answers shaped like Prometheus's where every
part can go wrong: HTTP status, ``status``, ``resultType``, sample values (``NaN``, ``±Inf``,
negative, out of range, not numbers), duplicate series for one instance, an empty vector.
"""

from __future__ import annotations

import json
import math
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from annotator.matching import InstanceIndex, NodeAddresses, match_series
from annotator.metrics import AnnotatorMetrics
from annotator.patching import NodePatcher
from annotator.sync.hot_value import BindingWindows
from annotator.sync.prometheus import PrometheusClient, PrometheusError, parse_answer
from annotator.sync.rounds import AnnotationSync, MetricSync
from shared.annotations import Sample, decode, encode_metric
from shared.kube.retrying import RetryPolicy
from shared.policy import default_policy
from tests.fakes.annotator import FakeNodesAPI, node, store
from tests.fakes.clock import NOW

DEFAULT = default_policy()
METRICS = MetricSync.all_from(DEFAULT)
INSTANCES = ("10.0.0.1:9100", "10.0.0.2:9100", "n3", "10.0.0.9:9100", "")
"""The harness's nodes are n1 (10.0.0.1), n2 (10.0.0.2) and n3; 10.0.0.9 and "" match none."""
INDEX = InstanceIndex([NodeAddresses(f"n{i}", (f"10.0.0.{i}",), (f"n{i}",)) for i in (1, 2, 3)])

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=24,
)
numbers = st.floats(allow_nan=False, allow_infinity=False).map(repr) | st.integers().map(str)
value_texts = (
    numbers
    | st.sampled_from(
        ["NaN", "+Inf", "-Inf", "nan", "inf", "-0", "1e999", "-1e999", "0.635", "-3.5", "250"]
    )
    | st.sampled_from(["", "abc", "1_0", " 1", "0x10", "1,5", "infinity", "١"])
    | st.text(max_size=6)
)
samples = st.fixed_dictionaries(
    {
        "metric": st.fixed_dictionaries(
            {"instance": st.sampled_from(INSTANCES)},
            optional={"job": st.sampled_from(["a", "b"]), "__name__": st.just("m")},
        ),
        "value": st.tuples(st.floats(0, 2e9), value_texts).map(list),
    }
)
shaped = st.fixed_dictionaries(
    {
        "status": st.sampled_from(["success", "success", "success", "error", ""]),
        "data": st.fixed_dictionaries(
            {
                "resultType": st.sampled_from(["vector", "vector", "vector", "matrix", "scalar"]),
                "result": st.lists(samples, max_size=8),
            }
        ),
    },
    optional={"errorType": st.text(max_size=8), "error": st.text(max_size=20)},
)
codes = st.sampled_from([200, 200, 200, 204, 400, 422, 500, 503])


def parsed(code: int, body: bytes) -> list[tuple[str, float]] | PrometheusError:
    try:
        return parse_answer(code, body, promql="m")
    except PrometheusError as e:
        return e


def expected_usable(answer: dict[str, Any]) -> dict[str, float]:
    """From a Prometheus-shaped answer whose every value is a number: each instance whose
    series agree on a value that is not infinite, with that value."""
    by_instance: dict[str, set[float | str]] = {}
    for sample in answer["data"]["result"]:
        number = float(sample["value"][1])
        by_instance.setdefault(sample["metric"]["instance"], set()).add(
            "NaN" if math.isnan(number) else number
        )
    return {
        instance: float(values.pop())
        for instance, values in by_instance.items()
        if len(values) == 1 and not any(isinstance(v, float) and math.isinf(v) for v in values)
    }


def is_number(text: str) -> bool:
    """Prometheus's spelling of a sample value, as an independent reading: Go's float
    syntax without hex, underscores or spaces; ``NaN`` and ``Inf`` in any case."""
    if text.lower() in ("nan", "inf", "+inf", "-inf"):
        return True
    body = text[1:] if text[:1] in "+-" else text
    mantissa, _, exponent = body.lower().partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).isascii() and (whole + fraction).isdigit()
    exp = exponent[1:] if exponent[:1] in "+-" else exponent
    return digits and ("e" not in body.lower() or (exp.isascii() and exp.isdigit()))


def assert_contract(series: list[tuple[str, float]]) -> None:
    """At most one series per instance, none infinite; written, every value decodes as the
    contract says."""
    instances = [instance for instance, _ in series]
    assert len(instances) == len(set(instances))
    assert not any(math.isinf(value) for _, value in series)
    for name, fraction in match_series(series, INDEX, scale=100).values.items():
        text = encode_metric(fraction, NOW)
        reading = decode(text)
        assert isinstance(reading, Sample), (name, text, reading)
        assert reading.value >= 0 and text.split(",")[0] == f"{reading.value:.5f}"


@given(code=codes, body=st.binary(max_size=200))
def test_any_bytes_raise_only_prometheus_errors(code: int, body: bytes) -> None:
    result = parsed(code, body)
    if not isinstance(result, PrometheusError):
        assert_contract(result)


@given(code=codes, value=json_values)
def test_any_json_raises_only_prometheus_errors(code: int, value: Any) -> None:
    result = parsed(code, json.dumps(value).encode())
    if not isinstance(result, PrometheusError):
        assert_contract(result)
        assert isinstance(value, dict) and value.get("status") == "success"


@settings(max_examples=300)
@given(code=codes, answer=shaped)
def test_prometheus_shaped_answers(code: int, answer: dict[str, Any]) -> None:
    result = parsed(code, json.dumps(answer).encode())
    values = [s["value"][1] for s in answer["data"]["result"]]
    usable = (
        200 <= code < 300
        and answer["status"] == "success"
        and answer["data"]["resultType"] == "vector"
        and all(is_number(v) for v in values)
    )
    if not usable:
        assert isinstance(result, PrometheusError), (code, answer, result)
        return
    assert not isinstance(result, PrometheusError), result
    assert_contract(result)
    got = dict(result)
    want = expected_usable(answer)
    assert got.keys() == want.keys()
    for instance, value in want.items():
        assert got[instance] == value or (math.isnan(got[instance]) and math.isnan(value))


@pytest.mark.parametrize(
    ("values", "written"),
    [
        (["63.5"], "0.63500"),
        (["NaN"], "0.00000"),
        (["-3"], "0.00000"),
        (["+Inf"], None),
        (["-Inf"], None),
        (["1e999"], None),
        (["40", "40"], "0.40000"),  # the same series twice counts once
        (["40", "90"], None),  # which one is the usage cannot be told
        (["NaN", "NaN"], "0.00000"),
        (["NaN", "20"], None),
    ],
)
def test_what_one_instance_writes(values: list[str], written: str | None) -> None:
    result = [
        {"metric": {"instance": "10.0.0.1:9100", "job": str(i)}, "value": [1.0, v]}
        for i, v in enumerate(values)
    ]
    body = {"status": "success", "data": {"resultType": "vector", "result": result}}
    series = parse_answer(200, json.dumps(body).encode(), promql="m")
    fractions = match_series(series, INDEX, scale=100).values
    assert (encode_metric(fractions["n1"], NOW).split(",")[0] if "n1" in fractions else None) == (
        written
    )


@pytest.mark.parametrize(
    ("code", "body", "mentions"),
    [
        (200, b"<html>", "unreadable body"),
        (500, b'{"status":"success","data":{"resultType":"vector","result":[]}}', "HTTP 500"),
        (200, b'{"status":"success","data":{"resultType":"scalar","result":[1,"2"]}}', "scalar"),
        (200, b'{"status":"success","data":{"resultType":"vector","result":[1]}}', "malformed"),
        (200, b'{"status":"success","data":{"result":[]}}', "resultType"),
        (200, b'{"status":"success"}', "status 'success'"),
        (422, b'{"status":"error","errorType":"bad_data","error":"parse error"}', "bad_data"),
        (
            200,
            b'{"status":"success","data":{"resultType":"vector","result":'
            b'[{"metric":{"instance":"a"},"value":[1,"1_0"]}]}}',
            "not a number",
        ),
    ],
)
def test_errors_say_what_was_wrong(code: int, body: bytes, mentions: str) -> None:
    with pytest.raises(PrometheusError, match=mentions):
        parse_answer(code, body, promql="m")


def _round(body: bytes, code: int) -> tuple[dict[str, dict[str, str | None]], list[str]]:
    """One sync round of every metric of the default policy with Prometheus answering
    ``body``: the annotations written, and the metrics that failed."""

    async def run() -> tuple[dict[str, dict[str, str | None]], list[str]]:
        nodes_api = FakeNodesAPI()
        prometheus = PrometheusClient(
            "http://prom",
            transport=httpx.MockTransport(lambda _: httpx.Response(code, content=body)),
        )
        sync = AnnotationSync(
            policy=DEFAULT,
            prometheus=prometheus,
            nodes=store(node("n1", "10.0.0.1"), node("n2", "10.0.0.2"), node("n3", "10.0.0.3")),
            patcher=NodePatcher(
                httpx.AsyncClient(base_url="https://api", transport=nodes_api.transport()),
                retry=RetryPolicy(backoff=0.001, backoff_max=0.01),
            ),
            windows=BindingWindows(DEFAULT.spec.hot_value),
            metrics=AnnotatorMetrics(),
            clock=lambda: NOW,
            may_write=lambda: True,
        )
        report = await sync.sync(METRICS)
        await prometheus.aclose()
        written: dict[str, dict[str, str | None]] = {}
        for name, patch in nodes_api.patches:
            written.setdefault(name, {}).update(patch["metadata"]["annotations"])
        return written, report.failed_metrics

    return anyio.run(run)


@settings(max_examples=60)
@given(code=codes, answer=shaped | json_values)
def test_a_sync_round_writes_contract_values_or_nothing(code: int, answer: Any) -> None:
    body = json.dumps(answer).encode()
    written, failed = _round(body, code)
    result = parsed(code, body)
    if isinstance(result, PrometheusError) or not result:
        assert written == {} and set(failed) == {m.name for m in METRICS}
        return
    for values in written.values():
        for text in values.values():
            reading = decode(text)
            assert isinstance(reading, Sample) and 0 <= reading.value, text
