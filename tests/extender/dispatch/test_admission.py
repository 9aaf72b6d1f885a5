"""The admission record: limits that hold across replicas, and finished keys remembered."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest

from extender.dispatch.admission import (
    DATA_KEY,
    AdmissionRecords,
    Admitted,
    Entries,
    Finished,
    Ticket,
    counts,
    encode_within,
    prune,
    record_name,
    starting_pods,
)
from extender.dispatch.caches import JOB_DECODER, JobStore, TemplatePodStore
from extender.dispatch.dispatcher import over_limits
from extender.dispatch.templates import JobTemplate
from shared.errors import APITooManyRequestsError
from shared.kube.requesting import DEFAULT_RETRY
from shared.kube.retrying import RetryPolicy
from shared.pods import POD_DECODER
from tests.fakes.clock import NOW
from tests.fakes.kube import FakeConfigMaps

pytestmark = pytest.mark.anyio

T = int(NOW.timestamp())


def template(**extra: Any) -> JobTemplate:
    return JobTemplate.model_validate({"name": "work", "namespace": "batch", "image": "i", **extra})


def job(h: str, state: str = "active", uid: str = "u") -> Any:
    conditions = (
        []
        if state == "active"
        else [{"type": "Complete" if state == "succeeded" else "Failed", "status": "True"}]
    )
    body = {
        "metadata": {
            "name": f"work-{h}",
            "namespace": "batch",
            "uid": uid,
            "labels": {"loadsched.io/template": "work"},
        },
        "status": {"conditions": conditions},
    }
    return JOB_DECODER.decode(json.dumps(body))


def pod(uid: str, job_name: str, phase: str = "Pending") -> Any:
    labels = {"loadsched.io/template": "work", "batch.kubernetes.io/job-name": job_name}
    body = {
        "metadata": {"name": uid, "namespace": "batch", "uid": uid, "labels": labels},
        "status": {"phase": phase},
    }
    return POD_DECODER.decode(json.dumps(body))


@pytest.mark.parametrize(
    ("seen", "at", "since", "kept", "finished"),
    [
        ("active", T - 500, T - 1000, True, None),
        ("succeeded", T - 500, T - 1000, False, ("succeeded", "u")),
        ("failed", T - 500, T - 1000, False, ("failed", "u")),
        ("gone-succeeded", T - 500, T - 1000, False, ("succeeded", "u")),
        ("gone-active", T - 500, T - 1000, False, ("deleted", "u")),
        ("unseen", T - 10, T - 1000, True, None),  # within the grace: in flight
        ("unseen", T - 31, T - 1000, False, None),  # watched, never came: never created
        ("unseen", T - 31, T - 20, False, ("deleted", "")),  # before this replica watched
    ],
)
@pytest.mark.parametrize("retention", [None, 600])
def test_prune(
    seen: str,
    at: int,
    since: int,
    kept: bool,
    finished: tuple[str, str] | None,
    retention: int | None,
) -> None:
    jobs = JobStore()
    if seen.startswith("gone-"):
        jobs.apply("DELETED", job("a", seen.removeprefix("gone-")))
    elif seen != "unseen":
        jobs.apply("ADDED", job("a", seen))
    entries = Entries(admitted={"a": Admitted(at, 1)})
    pruned = prune(entries, template(keyRetentionSeconds=retention), T, jobs, grace=30, since=since)
    assert ("a" in pruned.admitted) is kept
    expected = {"a": Finished(T, *finished)} if finished and retention else {}
    assert pruned.finished == expected
    assert entries.admitted == {"a": Admitted(at, 1)}  # the input is left alone


def test_finished_keys_expire_after_the_retention() -> None:
    entries = Entries(
        finished={"old": Finished(T - 600, "succeeded"), "new": Finished(T - 599, "failed")}
    )
    pruned = prune(entries, template(keyRetentionSeconds=600), T, JobStore(), grace=30, since=T)
    assert list(pruned.finished) == ["new"]


def test_counts_join_the_record_and_the_watches() -> None:
    jobs, pods = JobStore(), TemplatePodStore()
    jobs.apply("ADDED", job("a"))  # admitted and seen, one pod Pending, one Running
    jobs.apply("ADDED", job("z"))  # active, not in the record (dispatched before it existed)
    jobs.apply("ADDED", job("done", "succeeded"))
    pods.apply("ADDED", pod("p1", "work-a"))
    pods.apply("ADDED", pod("p2", "work-a", "Running"))
    pods.apply("ADDED", pod("p3", "work-z"))
    entries = Entries(admitted={"a": Admitted(T, 2), "b": Admitted(T, 3)})  # b: no pods yet
    assert counts(entries, template(), jobs, pods) == (3, 2 + 3)
    pods.apply("DELETED", pod("p1", "work-a"))
    pods.apply("ADDED", pod("p4", "work-b"))  # b's pods appear: counted from the watch
    assert counts(entries, template(), jobs, pods) == (3, 1 + 1)


@pytest.mark.parametrize(
    ("spec", "pods"),
    [
        ({}, 1),
        ({"parallelism": 4}, 4),
        ({"parallelism": 4, "completions": 2}, 2),
        ({"parallelism": 0}, 0),
    ],
)
def test_starting_pods(spec: dict[str, int], pods: int) -> None:
    assert starting_pods(spec) == pods


def test_the_record_stays_under_its_size_by_forgetting_the_oldest_finished_keys() -> None:
    finished = {f"{i:016x}": Finished(T - 1000 + i, "succeeded", "u" * 36) for i in range(1000)}
    entries = Entries(admitted={"a": Admitted(T, 1)}, finished=dict(finished))
    data = encode_within(entries, 20_000)
    assert data is not None and len(data) <= 20_000
    kept = json.loads(data)["finished"]
    assert 0 < len(kept) < 1000
    assert min(int(h, 16) for h in kept) > max(int(h, 16) for h in set(finished) - set(kept))
    full = Entries(admitted={f"{i:016x}": Admitted(T, 1) for i in range(1000)})
    assert encode_within(full, 20_000) is None


class Replica:
    """One dispatcher replica's view: its own watches (empty: nothing seen yet) and its own
    AdmissionRecords, against the API server's ConfigMaps shared by all."""

    def __init__(
        self,
        configmaps: FakeConfigMaps,
        clock: list[datetime],
        *,
        handler: Any = None,
        retry: RetryPolicy = DEFAULT_RETRY,
    ) -> None:
        self.jobs, self.pods = JobStore(), TemplatePodStore()
        self.jobs.replace([])
        client = httpx.AsyncClient(
            transport=httpx.MockTransport(handler or configmaps.handler),
            base_url="https://api.test",
        )
        self.admission = AdmissionRecords(client=client, clock=lambda: clock[0], retry=retry)

    async def admit(self, t: JobTemplate, key: str, pods: int = 1) -> Ticket:
        return await self.admission.reserve(
            t,
            f"work-{key}",
            pods,
            jobs=self.jobs,
            pods=self.pods,
            limits=lambda active, pending: over_limits(t, active, pending),
        )


def stored(configmaps: FakeConfigMaps) -> dict[str, dict[str, list[Any]]]:
    """The record as the API server holds it."""
    data = configmaps.objects[("batch", record_name(template()))]["data"][DATA_KEY]
    return dict(json.loads(data))


async def test_two_replicas_never_admit_more_than_max_active() -> None:
    configmaps, clock = FakeConfigMaps(), [NOW]
    a, b = Replica(configmaps, clock), Replica(configmaps, clock)
    t = template(maxActive=10)
    tickets = await asyncio.gather(*((a if i % 2 else b).admit(t, f"{i:04x}") for i in range(50)))
    outcomes = [x.outcome for x in tickets]
    assert outcomes.count("admitted") == 10 and outcomes.count("refused") == 40
    assert len(stored(configmaps)["admitted"]) == 10
    refused = next(x for x in tickets if x.outcome == "refused")
    assert refused.reason == "template work has 10 active Jobs (maxActive 10)"


async def test_max_pending_counts_admitted_jobs_whose_pods_are_not_seen() -> None:
    configmaps, clock = FakeConfigMaps(), [NOW]
    a, b = Replica(configmaps, clock), Replica(configmaps, clock)
    t = template(maxPending=5)
    assert (await a.admit(t, "a", pods=3)).outcome == "admitted"
    assert (await b.admit(t, "b", pods=2)).outcome == "admitted"
    refused = await a.admit(t, "c")
    assert refused == Ticket("refused", "template work has 5 Pending pods (maxPending 5)")
    for replica in (a, b):  # a's pods run: b's 2 (not seen yet) still count
        replica.jobs.apply("ADDED", job("a"))
        for i in range(3):
            replica.pods.apply("ADDED", pod(f"p{i}", "work-a", "Running"))
    assert (await b.admit(t, "c")).outcome == "admitted"


async def test_a_write_that_loses_the_race_rereads_and_counts_again() -> None:
    configmaps, clock = FakeConfigMaps(), [NOW]
    a = Replica(configmaps, clock)
    t = template(maxActive=2)
    assert (await a.admit(t, "a")).outcome == "admitted"
    # another replica takes the last place between a's read and a's write
    other = json.dumps({"admitted": {"a": [T, 1], "x": [T, 1]}, "finished": {}})
    configmaps.before_write.append(
        lambda: configmaps.put("batch", record_name(t), {DATA_KEY: other})
    )
    ticket = await a.admit(t, "b")
    assert ticket == Ticket("refused", "template work has 2 active Jobs (maxActive 2)")
    assert configmaps.writes == ["POST"]  # a's second write was refused with a 409
    assert set(stored(configmaps)["admitted"]) == {"a", "x"}


async def test_a_stale_copy_is_reread_before_refusing() -> None:
    configmaps, clock = FakeConfigMaps(), [NOW]
    a = Replica(configmaps, clock)
    t = template(maxActive=1)
    assert (await a.admit(t, "a")).outcome == "admitted"
    # another replica took a's entry back (its create failed): a's copy is stale
    empty = json.dumps({"admitted": {}, "finished": {}})
    configmaps.put("batch", record_name(t), {DATA_KEY: empty})
    assert (await a.admit(t, "b")).outcome == "admitted"


def throttled_once(configmaps: FakeConfigMaps, method: str) -> Any:
    """The API server's handler, answering the first ``method`` with 429 and Retry-After
    (API Priority and Fairness rejecting it before running it)."""
    throttled: list[str] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        if request.method == method and not throttled:
            throttled.append(method)
            body = {"kind": "Status", "code": 429, "reason": "TooManyRequests"}
            return httpx.Response(429, json=body, headers={"Retry-After": "0"})
        return await configmaps.handler(request)

    return handler


@pytest.mark.parametrize("method", ["GET", "POST", "PUT"])
async def test_a_throttled_record_call_is_retried_by_the_policy(method: str) -> None:
    t = template(maxActive=5)
    for retry, retried in ((DEFAULT_RETRY, True), (RetryPolicy(attempts=1), False)):
        configmaps, clock = FakeConfigMaps(), [NOW]
        if method == "PUT":  # the record exists: the next write replaces it
            assert (await Replica(configmaps, clock).admit(t, "a")).outcome == "admitted"
        a = Replica(configmaps, clock, handler=throttled_once(configmaps, method), retry=retry)
        if retried:
            assert (await a.admit(t, "b")).outcome == "admitted"
            assert "b" in stored(configmaps)["admitted"]
        else:
            with pytest.raises(APITooManyRequestsError):
                await a.admit(t, "b")


async def test_an_entry_whose_job_never_came_ends_after_the_grace() -> None:
    configmaps, clock = FakeConfigMaps(), [NOW]
    a = Replica(configmaps, clock)
    t = template(maxActive=1)
    assert (await a.admit(t, "a")).outcome == "admitted"  # then the replica "crashed"
    assert (await a.admit(t, "b")).outcome == "refused"
    clock[0] = NOW + timedelta(seconds=31)
    assert (await a.admit(t, "b")).outcome == "admitted"
    assert set(stored(configmaps)["admitted"]) == {"b"}


async def test_a_finished_key_is_retained_and_never_admitted_again() -> None:
    configmaps, clock = FakeConfigMaps(), [NOW]
    a, b = Replica(configmaps, clock), Replica(configmaps, clock)
    t = template(keyRetentionSeconds=600)
    assert (await a.admit(t, "k")).outcome == "admitted"
    assert (await b.admit(t, "k")).outcome == "in-flight"  # another replica creates it now
    for replica in (a, b):  # the Job runs, finishes, and the TTL controller deletes it
        replica.jobs.apply("ADDED", job("k", uid="uid-k"))
        replica.jobs.apply("DELETED", job("k", "succeeded", uid="uid-k"))
    clock[0] = NOW + timedelta(seconds=60)
    retained = await b.admit(t, "k")  # and writes the record: the key has ended
    assert retained == Ticket("retained", state="succeeded", uid="uid-k")
    assert stored(configmaps)["finished"] == {"k": [T + 60, "succeeded", "uid-k"]}
    fresh = Replica(configmaps, clock)  # a replica started after the Job was gone
    assert await fresh.admit(t, "k") == Ticket("retained", state="succeeded", uid="uid-k")
    clock[0] = NOW + timedelta(seconds=60 + 600)
    assert (await fresh.admit(t, "k")).outcome == "admitted"  # beyond the retention


async def test_release_takes_an_admission_back() -> None:
    configmaps, clock = FakeConfigMaps(), [NOW]
    a = Replica(configmaps, clock)
    t = template(maxActive=1)
    assert (await a.admit(t, "a")).outcome == "admitted"
    await a.admission.release(t, "work-a")
    assert stored(configmaps)["admitted"] == {}
    assert (await a.admit(t, "b")).outcome == "admitted"
