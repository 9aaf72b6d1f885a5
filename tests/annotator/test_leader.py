from datetime import timedelta

import httpx
import pytest

from annotator.leader import MICRO, LeaderElector, LeaseTimings
from tests.fakes.annotator import FakeLeases
from tests.fakes.clock import NOW, Clock

pytestmark = pytest.mark.anyio


def elector(
    fake: FakeLeases, identity: str, clock: Clock, timings: LeaseTimings | None = None
) -> LeaderElector:
    client = httpx.AsyncClient(base_url="https://api", transport=fake.transport())
    return LeaderElector(
        client,
        name="lease",
        namespace="ns",
        identity=identity,
        clock=clock,
        monotonic=clock.monotonic,
        timings=timings or LeaseTimings(),
    )


async def test_one_leader_then_takeover_after_expiry() -> None:
    fake, clock = FakeLeases(), Clock()
    a, b = elector(fake, "a", clock), elector(fake, "b", clock)
    await a.step()
    await b.step()
    assert a.is_leader and not b.is_leader
    spec = fake.leases["lease"]["spec"]
    assert spec["holderIdentity"] == "a" and spec["leaseDurationSeconds"] == 15
    clock.now += timedelta(seconds=10)
    await a.step()  # renews
    clock.now += timedelta(seconds=14)
    await b.step()
    assert not b.is_leader  # renewed 14 s ago: still a's
    clock.now += timedelta(seconds=2)
    await b.step()  # 16 s without renewal: expired
    assert b.is_leader
    assert fake.leases["lease"]["spec"]["leaseTransitions"] == 1
    await a.step()  # a sees b holds it and stops at once
    assert not a.is_leader


async def test_release_hands_over_at_once() -> None:
    fake, clock = FakeLeases(), Clock()
    a, b = elector(fake, "a", clock), elector(fake, "b", clock)
    await a.step()
    await a.release()
    assert not a.is_leader
    assert fake.leases["lease"]["spec"]["holderIdentity"] == ""
    clock.now += timedelta(seconds=1)
    await b.step()
    assert b.is_leader


async def test_api_outage_keeps_leading_only_until_the_renew_deadline() -> None:
    fake, clock = FakeLeases(), Clock()
    a = elector(fake, "a", clock)  # renew deadline 10 s
    await a.step()
    assert a.is_leader
    fake.down = True
    clock.now += timedelta(seconds=5)
    await a.step()
    assert a.is_leader  # within the deadline
    clock.now += timedelta(seconds=4.9)
    assert a.is_leader  # 9.9 s since the last renewal
    clock.now += timedelta(seconds=0.1)
    assert not a.is_leader  # is_leader checks the deadline itself, between steps too
    await a.step()
    assert not a.is_leader
    fake.down = False
    await a.step()  # the API is back and the lease still ours: leading again
    assert a.is_leader


async def test_renewals_keep_leadership_past_the_deadline() -> None:
    fake, clock = FakeLeases(), Clock()
    a = elector(fake, "a", clock)
    await a.step()
    for _ in range(5):  # 5 x 8 s = 40 s, each renewal within the 10 s deadline
        clock.now += timedelta(seconds=8)
        assert a.is_leader
        await a.step()
    assert a.is_leader


async def test_conflicting_write_is_not_leadership() -> None:
    fake, clock = FakeLeases(), Clock()
    a = elector(fake, "a", clock)
    await a.step()
    # someone else rewrites the lease between our read and our write
    original = fake.handler

    def racing(request: httpx.Request) -> httpx.Response:
        if request.method == "PUT":
            fake.leases["lease"]["metadata"]["resourceVersion"] = "999"
        return original(request)

    fake.handler = racing  # type: ignore[method-assign]
    a._client = httpx.AsyncClient(base_url="https://api", transport=httpx.MockTransport(racing))
    await a.step()
    assert not a.is_leader


def test_timestamps_are_micro_time() -> None:
    assert NOW.strftime(MICRO) == "2026-11-22T12:00:00.000000Z"
