"""Driving the extender under test: the ``make_client`` fixture's type, waiting until it is
ready, asking a verb of a ``LoadAwareExtender`` directly, and reading its filter counters."""

import json
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

import anyio
import httpx

from extender.scheduling.verbs import LoadAwareExtender
from extender.scheduling.wire import ARGS_DECODER, ENCODER, Node, NodeMeta
from shared.annotations import encode_hot_value, encode_metric
from tests import payloads
from tests.fakes.clock import NOW

ClientFactory = Callable[..., Awaitable[httpx.AsyncClient]]


def counted(decide: LoadAwareExtender) -> dict[str, float]:
    """The extender's filter counters, by labels: nodes filtered, unknown values, uncached."""
    out = {}
    for family in decide._metrics.registry.collect():
        for sample in family.samples:
            if sample.name.endswith("_total") and (
                "nodes" in sample.name or "unknown" in sample.name
            ):
                out[f"{sample.name}{sorted(sample.labels.items())}"] = sample.value
    return out


def grown(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """What each counter grew by between ``before`` and ``after`` (those that did)."""
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v != before.get(k, 0.0)}


async def wait_ready(
    client: httpx.AsyncClient, path: str = "/readyz", seconds: float = 15
) -> httpx.AsyncClient:
    """Wait until the extender behind ``client`` answers ``path`` with 200; the client. An
    AssertionError with its last answer after ``seconds``."""
    deadline = anyio.current_time() + seconds
    while (response := await client.get(path)).status_code != 200:
        if anyio.current_time() > deadline:
            raise AssertionError(f"not ready after {seconds:g} s: {response.text}")
        await anyio.sleep(0.01)
    return client


def loaded_node(name: str, usage: float, *, hot: int | None = None, at: datetime = NOW) -> Node:
    """A node whose CPU and memory values are ``usage``, sampled ``at``; a hot value if given."""
    annotations = {
        "cpu_usage_avg_5m": encode_metric(usage, at),
        "mem_usage_avg_5m": encode_metric(usage, at),
    }
    if hot is not None:
        annotations["node_hot_value"] = encode_hot_value(hot, at)
    return Node(metadata=NodeMeta(name=name, annotations=annotations))


def ask(decide: LoadAwareExtender, verb: str, names: list[str], *, daemonset: bool = False) -> Any:
    args = ARGS_DECODER.decode(
        payloads.encode(payloads.names_args(names, payloads.pod(daemonset=daemonset)))
    )
    assert args.Pod is not None
    answer = getattr(decide, verb)(args.Pod, args)
    return json.loads(ENCODER.encode(answer))
