"""Control-plane faults while work flows (its own sandbox: it restarts kube-apiserver and
etcd): a burst of 200 pods through kube-scheduler and the extender, annotator rounds from
Prometheus, 50 duplicate POSTs of one key to /v1/jobs across the fault.

After each: every pod bound exactly once, every node's annotations written by a round after
the fault from Prometheus' current values, one Job for the key and no 5xx but 503, and each
of the extender's and the annotator's watches listed again at most once, none in the quiet
window after recovery (no re-list loop; counted from their logs, since kube-apiserver's
LIST counts include kube-scheduler, kube-controller-manager and this harness). Time to recover is printed by bench/faults.py, not asserted.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sandbox.cluster import Sandbox
from sandbox.faults_cluster import Flow, run_annotator_kill, run_control_plane, run_extender_kill

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def flow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Flow]:
    with Sandbox() as box:
        yield Flow(box, tmp_path_factory.mktemp("faults")).start()


@pytest.mark.parametrize("fault", ["apiserver", "etcd", "compaction"])
def test_work_survives(flow: Flow, fault: str) -> None:
    row = run_control_plane(flow, fault, pods=200, quiet_window=5)
    details = row.details
    assert details["bound"] == 200
    assert details["bindings"] == [1]
    assert details["jobs"] == 1
    assert set(details["statuses"]) <= {0, 200, 201, 503}, details["statuses"]
    assert {200, 201} & set(details["statuses"])
    # each of loadsched's watches lists again at most once, and none after the recovery
    assert set(details["ours"].values()) <= {1}, details["ours"]
    assert details["ours_quiet"] == {}
    if fault == "etcd":  # kube-apiserver's watch cache rides it out: no watch is lost
        assert details["ours"] == {}
    else:
        # a new kube-apiserver's cache starts at etcd's head: a watch whose resourceVersion
        # is older gets 410 and lists once; one already at the head (no write to etcd
        # between its last event or bookmark and the new cache's list) resumes, which
        # timing decides (4 to 6 of the 6 seen)
        assert details["gone"], "no watch got 410 Gone: the fault did not happen"
        assert set(details["ours"]) == set(details["gone"])
    assert row.lost == 0


def test_extender_killed_during_a_burst(flow: Flow) -> None:
    """ignorable: true keeps scheduling without it; ignorable: false binds nothing while it
    is down and everything once it is back (the issue's "within 10 s" asserted as a
    generous 60 s: a behaviour, not a timing; bench/faults.py prints the figure)."""
    plain, strict = run_extender_kill(flow, pods=100, down=5)
    assert plain.details["before_return"] == 100
    assert strict.details["at_kill"] < 100
    assert strict.details["before_return"] == strict.details["at_kill"]
    assert strict.details["after_return"] < 60
    assert plain.lost == strict.lost == 0


def test_annotator_leader_killed_mid_round(flow: Flow) -> None:
    """The leader dies with its round half written (its patches slowed by a relay): no node
    is ever split between rounds (a node's due values are one patch), the follower takes the
    Lease within its timing (15 s lease, 2 s retry; a margin for a loaded machine), and its
    first round, at once, puts every node on one round within a period (5 s)."""
    row = run_annotator_kill(flow)
    details = row.details
    assert details["mid_round"], row.outcome
    assert details["split"] == [], row.outcome
    assert details["took_over"] is not None and details["took_over"] <= 15 + 2 + 5, row.outcome
    assert details["after_lead"] is not None and details["after_lead"] <= 5, row.outcome
    assert row.lost == 0
