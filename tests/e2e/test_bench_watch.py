"""The benches' own pod watch (bench/pod_watch.py) on the real API server: what the quality
bench's rounds are timed by. It lists the pods of its selector only, sees each bound on its
node and its deletion begun, and its thread ends when told to stop."""

from __future__ import annotations

import threading

import pytest

from bench.pod_watch import watch_pods
from bench.quality_pods import Lives
from sandbox.cluster import Sandbox
from sandbox.processes import wait_for
from sandbox.specs import pod_body

pytestmark = pytest.mark.e2e

SELECTOR = "app=bench-watch"
OTHER = "bench-watch-other"


def test_the_watch_sees_its_pods_bound_and_deleted_then_stops(
    sandbox: Sandbox, schedulers: dict[str, str]
) -> None:
    store = Lives()
    stop = threading.Event()
    try:
        sandbox.create_pods(
            [pod_body(OTHER, scheduler_name="default-scheduler", labels={"app": OTHER})]
            + [
                pod_body(
                    f"bench-watch-{i}",
                    scheduler_name="default-scheduler",
                    labels={"app": "bench-watch", "workload": f"w{i}"},
                )
                for i in range(3)
            ]
        )
        listed, thread = watch_pods(sandbox, SELECTOR, store, name="test", until=stop)
        assert listed.wait(60), "the watch did not list"
        placed = sandbox.wait_bound(SELECTOR, 3, timeout=60)
        wait_for(
            lambda: sum(life.bound_at is not None for life in store.snapshot()) >= 3,
            timeout=30,
            what="the watch to see 3 pods bound",
        )
        lives = {life.name: life for life in store.snapshot()}
        assert set(lives) == set(placed)  # its selector's pods only
        assert {name: life.node for name, life in lives.items()} == placed
        assert {life.workload for life in lives.values()} == {"w0", "w1", "w2"}
        sandbox.delete_pods(SELECTOR)
        wait_for(
            lambda: all(life.gone_at is not None for life in store.snapshot()),
            timeout=30,
            what="the watch to see every deletion",
        )
        stop.set()
        thread.join(10)
        assert not thread.is_alive()
    finally:
        stop.set()
        for selector in (SELECTOR, f"app={OTHER}"):
            sandbox.delete_pods(selector, force=True)
