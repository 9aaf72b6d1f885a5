from fractions import Fraction
from typing import Any

import msgspec
import pytest

from shared.pods import POD_DECODER, Pod

MI = 2**20


def decode(
    spec: dict[str, Any], status: dict[str, Any] | None = None, meta: dict[str, Any] | None = None
) -> Pod:
    return POD_DECODER.decode(
        msgspec.json.encode({"metadata": meta or {}, "spec": spec, "status": status or {}})
    )


def container(cpu: str | None = None, memory: str | None = None, **extra: str) -> dict[str, Any]:
    requests = {k: v for k, v in {"cpu": cpu, "memory": memory}.items() if v is not None}
    return {"resources": {"requests": requests}, **extra}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {"containers": [container("500m", "256Mi"), container("1")]},
            {"cpu": "1.5", "memory": 256 * MI},
        ),
        ({"containers": [{"name": "no-requests"}]}, {}),
        # a one-shot init container larger than the app: the peak wins
        ({"containers": [container("1")], "initContainers": [container("2")]}, {"cpu": "2"}),
        # a sidecar adds to the app and to later init containers
        (
            {
                "containers": [container("1")],
                "initContainers": [container("500m", restartPolicy="Always"), container("2")],
            },
            {"cpu": "2.5"},
        ),
        ({"containers": [container("1")], "overhead": {"cpu": "250m"}}, {"cpu": "1.25"}),
        ({"containers": [container("0")]}, {}),
        (
            {"containers": [{"resources": {"requests": {"nvidia.com/gpu": 2}}}]},
            {"nvidia.com/gpu": 2},
        ),
    ],
)
def test_effective_request(spec: dict[str, Any], expected: dict[str, Any]) -> None:
    assert decode(spec).request() == {k: Fraction(v) for k, v in expected.items()}


def test_malformed_request_names_the_field() -> None:
    pod = decode({"containers": [container("1"), container("lots")]})
    with pytest.raises(ValueError, match=r"spec\.containers\[1\]\.resources\.requests\.cpu"):
        pod.request()


def limited(cpu: str | None = None, memory: str | None = None, **extra: str) -> dict[str, Any]:
    limits = {k: v for k, v in {"cpu": cpu, "memory": memory}.items() if v is not None}
    return {"resources": {"limits": limits}, **extra}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {"containers": [limited("500m", "256Mi"), limited("1", "1Gi")]},
            {"cpu": "1.5", "memory": 1280 * MI},
        ),
        # one container without a CPU limit leaves the pod unbounded in CPU only
        ({"containers": [limited("1", "1Gi"), limited(memory="1Gi")]}, {"memory": 2048 * MI}),
        ({"containers": [{"name": "no-limits"}]}, {}),
        ({"containers": []}, {}),
        # a restartable sidecar runs beside the app; a one-shot init container does not
        (
            {
                "containers": [limited("1")],
                "initContainers": [limited("500m", restartPolicy="Always"), limited("4")],
            },
            {"cpu": "1.5"},
        ),
        (
            {"containers": [limited("1")], "initContainers": [{"restartPolicy": "Always"}]},
            {},
        ),
        # the overhead adds to a bounded resource only
        (
            {"containers": [limited("1")], "overhead": {"cpu": "250m", "memory": "64Mi"}},
            {"cpu": "1.25"},
        ),
    ],
)
def test_pod_limit(spec: dict[str, Any], expected: dict[str, Any]) -> None:
    assert decode(spec).limit() == {k: Fraction(v) for k, v in expected.items()}


def test_malformed_limit_names_the_field() -> None:
    pod = decode({"containers": [limited("1"), limited("lots")]})
    with pytest.raises(ValueError, match=r"spec\.containers\[1\]\.resources\.limits\.cpu"):
        pod.limit()


def test_states() -> None:
    waiting = decode(
        {}, {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    )
    assert waiting.is_unschedulable and not waiting.is_terminal
    assert not decode(
        {"nodeName": "n1"}, {"conditions": waiting.status.conditions}
    ).is_unschedulable
    assert decode({}, {"phase": "Succeeded"}).is_terminal
    assert decode({"priority": 7}).priority == 7 and decode({}).priority == 0
    daemon = decode({}, meta={"ownerReferences": [{"kind": "DaemonSet", "name": "x"}]})
    assert daemon.is_daemonset_pod
