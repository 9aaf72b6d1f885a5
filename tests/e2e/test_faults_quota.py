"""Two extender replicas behind one balancer, as the chart runs them (2 replicas, one
Service), admitting a burst into a namespace near its ElasticQuota ``max``: the ``max`` is
never exceeded at any moment, as a watch on the API server sees the bound pods.

The balancer sends each call to the next replica, as an L7 Service or a reconnecting client
would; kube-scheduler (one active, cycles serialized) admits pod after pod, so the replica
answering a pod has not necessarily seen the pods the other admitted just before. The
replicas' watches run 0.2 s behind (a busy API server): with each replica counting only
what it admitted itself, 4 pods went over max in every such run; with on-time watches,
sometimes. The replicas record admissions on the ElasticQuota (loadsched.io/admitted).
"""

from __future__ import annotations

import pytest

from sandbox.cluster import Sandbox
from sandbox.faults import quota_two_replicas

pytestmark = pytest.mark.e2e


def test_two_replicas_never_exceed_max(sandbox: Sandbox) -> None:
    row = quota_two_replicas(sandbox, prefill=30, pods=200, watch_lag=0.2)

    assert all(count > 0 for count in row.details["served"].values()), row.details["served"]
    assert len(row.details["served"]) == 2, "both replicas answered calls"
    assert row.details["peak"] == row.details["max"], (
        f"bound CPU peaked at {float(row.details['peak'])} of max {float(row.details['max'])}"
    )
    assert all(times == 1 for times in row.details["bindings"].values())
    assert row.details["recorded"] > 0, "admissions were recorded on the ElasticQuota"
