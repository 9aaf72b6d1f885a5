"""A pod loadsched refused is bound soon after loadsched's own view would admit it, for each
cause, on the real control plane (names-only, as the chart wires kube-scheduler).

The extender here sees the API server through a relay that delays everything it receives by
two seconds, so kube-scheduler always retries before the extender's watches have the change,
and is refused again (the stale answer). Without a requeue, such a pod waits for
kube-scheduler's 5-minute flush of unschedulable pods; and for the causes that are no event
to kube-scheduler at all (time, ElasticQuota edits) it waits for the flush in any case.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sandbox.cluster import Sandbox
from sandbox.requeue_story import CAUSES, RequeueRig
from tests.e2e.conftest import NODES

pytestmark = pytest.mark.e2e

BOUND_WELL_BEFORE_THE_FLUSH = 60.0
"""kube-scheduler's own flush retries after 300 s; a requeued pod is bound long before."""


@pytest.fixture(scope="module")
def rig(sandbox: Sandbox) -> Iterator[RequeueRig]:
    with RequeueRig(sandbox, [n.name for n in NODES], lag=2.0).started() as rig:
        yield rig


@pytest.mark.parametrize("cause", CAUSES)
def test_a_refused_pod_is_bound_once_loadsched_would_admit_it(rig: RequeueRig, cause: str) -> None:
    run = rig.run(cause, "names-only")
    assert run.seconds < BOUND_WELL_BEFORE_THE_FLUSH, run
    assert run.writes >= 1, f"bound without a requeue write: the test did not test it ({run})"
    if cause in ("load", "stale"):
        assert run.node == rig.nodes[rig.last_target], "the one node that now passes"


def test_nothing_is_written_while_no_pod_is_refused(rig: RequeueRig) -> None:
    before = rig.requeue_writes()
    rig.run_unrefused()
    assert rig.requeue_writes() == before
