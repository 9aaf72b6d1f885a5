"""The first full-node filter request logs one warning: kube-scheduler v1.33+ scores the nodes
an extender returns in that mode as empty (kubernetes/kubernetes#141781), so an operator
learns to switch to names-only; names-only requests never log it."""

from __future__ import annotations

import logging

import pytest

from extender.scheduling.metrics import ExtenderMetrics
from extender.scheduling.node_cache import NodeLoadCache
from extender.scheduling.verbs import FULL_NODE_WARNING, LoadAwareExtender
from extender.scheduling.wire import ARGS_DECODER, NODE_DECODER
from shared.load_model import LoadRules
from shared.policy import default_policy
from tests import payloads
from tests.fakes.clock import NOW


def extender(rules: LoadRules) -> LoadAwareExtender:
    nodes = payloads.cluster(rules, 3, NOW)
    cache = NodeLoadCache(rules)
    cache.replace([NODE_DECODER.decode(payloads.encode(n)) for n in nodes])
    return LoadAwareExtender(
        rules=rules, clock=lambda: NOW, metrics=ExtenderMetrics(), node_cache=cache
    )


def test_the_first_full_node_request_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    rules = LoadRules.from_policy(default_policy())
    verbs = extender(rules)
    nodes = payloads.cluster(rules, 3, NOW)
    names = [n["metadata"]["name"] for n in nodes]
    caplog.set_level(logging.WARNING, logger="extender.scheduling.verbs")

    for _ in range(2):
        args = ARGS_DECODER.decode(payloads.encode(payloads.names_args(names)))
        assert args.Pod is not None
        verbs.filter(args.Pod, args)
    assert FULL_NODE_WARNING not in caplog.messages

    for _ in range(3):
        args = ARGS_DECODER.decode(payloads.encode(payloads.full_args(nodes)))
        assert args.Pod is not None
        verbs.filter(args.Pod, args)
    assert caplog.messages.count(FULL_NODE_WARNING) == 1
