"""Which clients may write to the API server's connection directly (shared.kube.direct): a
client built with ``direct=True`` whose auth is a token or none, and whose requests would go
through no proxy (the annotator's node patches, tests/annotator/test_patch_transport.py)."""

import ssl

import httpx
import pytest

from shared.kube import direct
from shared.kube.config import KubeEndpoint

pytestmark = pytest.mark.anyio


async def test_only_direct_clients_with_a_token_or_none_have_a_route() -> None:
    context = ssl.create_default_context()
    endpoint = KubeEndpoint(host="https://api.example:6443/base", verify=context)
    async with endpoint.client(direct=True) as client:
        route = direct.route(client)
        assert route is not None
        assert route.origin == ("https", "api.example", 6443)
        assert route.tls is context
        assert route.prefix == b"/base"
    async with endpoint.client() as client:
        assert direct.route(client) is None  # not asked for: every request through httpx
    basic = KubeEndpoint(host="https://api.example", auth=httpx.BasicAuth("a", "b"))
    async with basic.client(direct=True) as client:
        assert direct.route(client) is None
    async with httpx.AsyncClient(base_url="https://api.example") as client:
        assert direct.route(client) is None


async def test_a_client_whose_requests_go_through_a_proxy_has_no_route(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "bypassed.example")
    async with KubeEndpoint(host="https://api.example").client(direct=True) as client:
        assert direct.route(client) is None
    async with KubeEndpoint(host="https://bypassed.example").client(direct=True) as client:
        assert direct.route(client) is not None
    # one rule, whatever transport the client was given: the proxy wins
    own = KubeEndpoint(host="https://api.example")
    async with own.client(transport=httpx.AsyncHTTPTransport(), direct=True) as client:
        assert direct.route(client) is None
