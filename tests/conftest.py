import os
from collections.abc import AsyncIterator

import pytest
from hypothesis import HealthCheck, settings

from tests.fakes.raw_server import Serve, Servers

# Property tests assert behaviour, never time: no per-example deadline, no "too slow" health
# check (a loaded 2-core CI machine runs them several times slower). Under CI the examples are
# derandomized, so a red run is reproducible with the same command.
settings.register_profile(
    "loadsched",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=bool(os.environ.get("CI")),
)
settings.load_profile("loadsched")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    """Starts real HTTP/1.1 servers on 127.0.0.1 (:class:`tests.fakes.raw_server.Server`)."""
    servers = Servers()
    yield servers.start
    servers.close()
