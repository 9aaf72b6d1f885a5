from pathlib import Path

import httpx
import pytest

from shared.errors import ConfigError
from shared.kube.config import load_endpoint
from tests.fakes.kubeconfig import kubeconfig

pytestmark = pytest.mark.anyio


async def test_a_bearer_token_is_sent(tmp_path: Path) -> None:
    seen: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("Authorization"))
        return httpx.Response(200, json={})

    endpoint = load_endpoint(str(kubeconfig(tmp_path, {"token": "s3cret"})))
    assert endpoint.host == "https://api.test:6443"
    async with endpoint.client(transport=httpx.MockTransport(handler)) as client:
        await client.get("/api/v1/nodes")
    assert seen == ["Bearer s3cret"]


async def test_no_credentials_sends_none(tmp_path: Path) -> None:
    seen: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("Authorization"))
        return httpx.Response(200, json={})

    endpoint = load_endpoint(str(kubeconfig(tmp_path, {})))
    async with endpoint.client(transport=httpx.MockTransport(handler)) as client:
        await client.get("/api")
    assert seen == [None]


def test_unreadable_kubeconfig_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="nowhere"):
        load_endpoint(str(tmp_path / "nowhere"))
