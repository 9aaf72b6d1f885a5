from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from datetime import UTC, datetime

import httpx
import pytest

from extender.app import create_app
from extender.scheduling.verbs import LoadAwareExtender
from extender.settings import ExtenderSettings
from shared.kube.config import KubeEndpoint
from shared.load_model import LoadRules
from shared.policy import DynamicSchedulerPolicy, default_policy
from tests.fakekube import FakeCollection

NOW = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)

ClientFactory = Callable[..., Awaitable[httpx.AsyncClient]]


@pytest.fixture
def policy() -> DynamicSchedulerPolicy:
    return default_policy()


@pytest.fixture
def rules(policy: DynamicSchedulerPolicy) -> LoadRules:
    return LoadRules.from_policy(policy)


@pytest.fixture
async def make_client(policy: DynamicSchedulerPolicy) -> AsyncIterator[ClientFactory]:
    """Starts extender apps (lifespan included); ``fake`` turns on the node cache."""
    async with AsyncExitStack() as stack:

        async def build(
            *,
            fake: FakeCollection | None = None,
            the_policy: DynamicSchedulerPolicy | None = None,
            **settings: object,
        ) -> httpx.AsyncClient:
            app = create_app(
                ExtenderSettings(**settings),  # type: ignore[arg-type]
                policy=the_policy or policy,
                endpoint=KubeEndpoint(host="https://api.test") if fake else None,
                transport=fake.transport() if fake else None,
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


def counted(decide: LoadAwareExtender) -> dict[str, float]:
    """The extender's filter counters, by labels: nodes filtered, unknown values, uncached."""
    out = {}
    for family in decide._metrics.registry.collect():  # noqa: SLF001 - its own registry
        for sample in family.samples:
            if sample.name.endswith("_total") and (
                "nodes" in sample.name or "unknown" in sample.name
            ):
                out[f"{sample.name}{sorted(sample.labels.items())}"] = sample.value
    return out


def grown(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """What each counter grew by between ``before`` and ``after`` (those that did)."""
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v != before.get(k, 0.0)}
