"""The end-to-end tier: a real control plane from sandbox/, loadsched's extender as a real
process, and real kube-schedulers calling it. One sandbox per test session; a module that needs
a quiet cluster starts its own (:func:`chart_sandbox`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import pytest

from sandbox import chart
from sandbox.cluster import Sandbox
from sandbox.loopback import free_port
from sandbox.specs import ExtenderSpec, NodeSpec
from shared.annotations import encode_metric
from shared.load_model import LoadRules
from shared.policy import default_policy

NODES = [NodeSpec(f"node-{i}", f"127.0.0.{i + 1}") for i in range(1, 9)]
RULES = LoadRules.from_policy(default_policy())
METRICS = [key for key in RULES.keys if key != "node_hot_value"]


LOADS = {
    "node-1": 0.92,
    "node-2": 0.81,
    "node-3": 0.30,
    "node-4": 0.70,
    "node-5": 0.12,
    "node-6": 0.55,
    "node-7": 0.66,
    "node-8": 0.45,
}
"""A spread of CPU and memory use over NODES, two of them just above the 0.65 limits."""
OVERLOADED = {name for name, usage in LOADS.items() if usage > 0.65}


def load_annotations(usage: float, when: datetime | None = None) -> dict[str, str | None]:
    """Every metric of the default policy at ``usage``, and no hot value."""
    when = when or datetime.now(UTC)
    values: dict[str, str | None] = {key: encode_metric(usage, when) for key in METRICS}
    values["node_hot_value"] = None
    return values


CHART_ACCOUNTS_VALUES = {
    # every optional permission the end-to-end tests need; the annotator's lease is the one
    # test_annotator elects on, in the namespace the accounts live in
    "annotator": {"elasticQuota": True, "leaseName": "loadsched-annotator-e2e"},
    "rebalance": {"enabled": True},
    "extender": {"elasticQuota": True, "bind": True},
    "dispatch": {"enabled": True},
    "scheduler": {"enabled": True, "schedulerName": "loadsched-chart"},
}


@contextmanager
def chart_sandbox() -> Iterator[Sandbox]:
    """A control plane with :data:`NODES`; loadsched's services run as the chart's
    ServiceAccounts (their tokens and the chart's RBAC), not as admin."""
    with Sandbox() as box:
        box.create_nodes(NODES)
        accounts = chart.install_accounts(box, namespace="default", values=CHART_ACCOUNTS_VALUES)
        box.service_kubeconfigs = accounts  # extender, annotator (and the chart's scheduler)
        yield box


@pytest.fixture(scope="session")
def sandbox() -> Iterator[Sandbox]:
    """The control plane the modules share (:func:`chart_sandbox`)."""
    with chart_sandbox() as box:
        yield box


@pytest.fixture(scope="session")
def extender_port() -> int:
    return free_port()


@pytest.fixture(scope="session")
def extender(sandbox: Sandbox, extender_port: int) -> str:
    return sandbox.start_extender(port=extender_port)


@pytest.fixture(scope="session")
def schedulers(sandbox: Sandbox, extender: str) -> dict[str, str]:
    """schedulerName → purpose: names-only and full-node extender modes, a non-ignorable one,
    and the plain kube-scheduler as the baseline."""
    sandbox.start_scheduler(
        "loadsched", scheduler_name="loadsched", extender=ExtenderSpec(extender)
    )
    sandbox.start_scheduler(
        "loadsched-full",
        scheduler_name="loadsched-full",
        extender=ExtenderSpec(extender, node_cache_capable=False),
    )
    sandbox.start_scheduler(
        "loadsched-strict",
        scheduler_name="loadsched-strict",
        extender=ExtenderSpec(extender, ignorable=False),
    )
    sandbox.start_scheduler("plain")
    return {
        "loadsched": "names-only",
        "loadsched-full": "full-node",
        "loadsched-strict": "not ignorable",
        "default-scheduler": "plain",
    }


@pytest.fixture
def set_loads(sandbox: Sandbox) -> Iterator[object]:
    """Write load annotations directly (until the annotator runs in the e2e tier)."""

    def apply(loads: dict[str, float]) -> None:
        for name, usage in loads.items():
            sandbox.annotate_node(name, load_annotations(usage))

    yield apply
    for node in NODES:
        sandbox.annotate_node(node.name, dict.fromkeys(RULES.keys))
