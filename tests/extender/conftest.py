from collections.abc import AsyncIterator
from contextlib import AsyncExitStack

import httpx
import pytest

from extender.app import create_app
from extender.settings import ExtenderSettings
from shared.kube.config import KubeEndpoint
from shared.load_model import LoadRules
from shared.policy import DynamicSchedulerPolicy, default_policy
from tests.fakes.clock import NOW
from tests.fakes.extender_calls import ClientFactory
from tests.fakes.kube import FakeCollection, served


@pytest.fixture
def policy() -> DynamicSchedulerPolicy:
    return default_policy()


@pytest.fixture
def rules(policy: DynamicSchedulerPolicy) -> LoadRules:
    return LoadRules.from_policy(policy)


@pytest.fixture
async def make_client(policy: DynamicSchedulerPolicy) -> AsyncIterator[ClientFactory]:
    """Starts extender apps (lifespan included); ``fake`` turns on the node cache, served on
    127.0.0.1."""
    async with AsyncExitStack() as stack:

        async def build(
            *,
            fake: FakeCollection | None = None,
            the_policy: DynamicSchedulerPolicy | None = None,
            **settings: object,
        ) -> httpx.AsyncClient:
            # the fake API server behind a real socket, so the extender's client works as in
            # production (its own transport, chunked watch answers)
            url = await stack.enter_async_context(served(fake.handler)) if fake else None
            app = create_app(
                ExtenderSettings(**settings),  # type: ignore[arg-type]
                policy=the_policy or policy,
                endpoint=KubeEndpoint(host=url) if url else None,
                clock=lambda: NOW,
            )
            await stack.enter_async_context(app.router.lifespan_context(app))
            transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
            return await stack.enter_async_context(
                httpx.AsyncClient(transport=transport, base_url="http://extender")
            )

        yield build


@pytest.fixture
async def client(make_client: ClientFactory) -> httpx.AsyncClient:
    return await make_client()


@pytest.fixture
async def listing_client(make_client: ClientFactory) -> httpx.AsyncClient:
    """An extender whose every filter answer lists the nodes refused (``always``), for tests
    of which nodes a decision refuses and why."""
    return await make_client(filter_rejections="always")
