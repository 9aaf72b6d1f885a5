import os

import pytest
from hypothesis import HealthCheck, settings

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
