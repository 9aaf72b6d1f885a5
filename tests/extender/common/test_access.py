"""extender.common.access: token and access reviews, cached per token and action, and shared
by the callers that ask while one is under way (requests that arrive together when an entry
expires send one review, not one each)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field

import httpx
import pytest

from extender.common.access import Action, Authorizer, Forbidden, Unauthenticated
from shared.kube.retrying import RetryPolicy

pytestmark = pytest.mark.anyio

CREATE_JOBS = Action("create", "batch", "jobs", "ns")


@dataclass
class ReviewingAPI:
    """The API server's TokenReview and SubjectAccessReview, each answer held ``delay`` s."""

    delay: float = 0.05
    accepted: set[str] = field(default_factory=lambda: {"good"})
    allowed: bool = True
    reviews: list[str] = field(default_factory=list)

    async def handler(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        await asyncio.sleep(self.delay)
        if body["kind"] == "TokenReview":
            self.reviews.append("token")
            known = body["spec"]["token"] in self.accepted
            user = {"username": "alice", "uid": "u1", "groups": ["g"]}
            return httpx.Response(
                201, json={**body, "status": {"authenticated": known, "user": user}}
            )
        self.reviews.append("access")
        return httpx.Response(201, json={**body, "status": {"allowed": self.allowed}})


@dataclass
class Ticking:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


def authorizer(api: ReviewingAPI, clock: Ticking) -> Authorizer:
    client = httpx.AsyncClient(base_url="https://api", transport=httpx.MockTransport(api.handler))
    return Authorizer("tokenreview", client=client, cache_seconds=10, monotonic=clock)


async def test_callers_asking_together_share_one_review_each_time_it_expires() -> None:
    api, clock = ReviewingAPI(), Ticking()
    access = authorizer(api, clock)

    async def ask() -> None:
        await access.require("Bearer good", CREATE_JOBS)

    await asyncio.gather(*(ask() for _ in range(8)))
    assert api.reviews == ["token", "access"]
    await asyncio.gather(*(ask() for _ in range(8)))
    assert api.reviews == ["token", "access"]  # cached
    clock.now += 11  # both entries expire: the next eight arrive together again
    await asyncio.gather(*(ask() for _ in range(8)))
    assert api.reviews == ["token", "access"] * 2


async def test_a_refusal_is_shared_and_kept_like_an_acceptance() -> None:
    api, clock = ReviewingAPI(), Ticking()
    access = authorizer(api, clock)
    outcomes = await asyncio.gather(
        *(access.require("Bearer bad", None) for _ in range(4)), return_exceptions=True
    )
    assert all(isinstance(o, Unauthenticated) for o in outcomes)
    assert api.reviews == ["token"]
    api.allowed = False
    outcomes = await asyncio.gather(
        *(access.require("Bearer good", CREATE_JOBS) for _ in range(4)), return_exceptions=True
    )
    assert all(isinstance(o, Forbidden) for o in outcomes)
    assert api.reviews == ["token", "token", "access"]


async def test_a_caller_that_goes_away_leaves_the_review_to_the_others() -> None:
    api, clock = ReviewingAPI(delay=0.2), Ticking()
    access = authorizer(api, clock)
    first = asyncio.ensure_future(access.require("Bearer good", None))
    await asyncio.sleep(0.05)  # its review is under way
    second = asyncio.ensure_future(access.require("Bearer good", None))
    await asyncio.sleep(0)
    first.cancel()
    identity = await second
    assert identity is not None and identity.user == "alice"
    assert api.reviews == ["token"]
    with pytest.raises(asyncio.CancelledError):
        await first


async def test_an_unreachable_api_server_is_not_kept() -> None:
    api, clock = ReviewingAPI(), Ticking()
    calls = 0

    async def failing(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise httpx.ConnectError("refused")
        return await api.handler(request)

    client = httpx.AsyncClient(base_url="https://api", transport=httpx.MockTransport(failing))
    access = Authorizer(
        "tokenreview",
        client=client,
        monotonic=clock,
        retry=RetryPolicy(attempts=1),
    )
    with pytest.raises(Exception, match="refused"):
        await access.require("Bearer good", None)
    assert await access.require("Bearer good", None) is not None  # asked again, accepted
    assert api.reviews == ["token"]
