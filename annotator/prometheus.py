"""One instant query to Prometheus's HTTP API, with the auth options operators need.

httpx rather than prometheus-api-client: the annotator is async, every call needs a timeout,
and tests inject a transport instead of patching.
"""

from __future__ import annotations

import base64
import math
import ssl
from dataclasses import dataclass
from pathlib import Path

import httpx
import msgspec

from shared.errors import LoadschedError


class PrometheusError(LoadschedError):
    """Prometheus could not answer a query: unreachable, an error status, or a bad body."""


class _Metric(msgspec.Struct):
    instance: str = ""


class _Sample(msgspec.Struct):
    metric: _Metric
    value: tuple[float, str]


class _Data(msgspec.Struct):
    resultType: str
    result: list[_Sample]


class _Answer(msgspec.Struct):
    status: str
    data: _Data | None = None
    error: str = ""
    errorType: str = ""


_DECODER = msgspec.json.Decoder(_Answer)


@dataclass(frozen=True)
class PrometheusAuth:
    bearer_token_file: Path | None = None
    username: str | None = None
    password_file: Path | None = None
    ca_file: Path | None = None
    insecure_skip_verify: bool = False

    def verify(self) -> ssl.SSLContext | bool:
        if self.insecure_skip_verify:
            return False
        if self.ca_file is not None:
            return ssl.create_default_context(cafile=str(self.ca_file))
        return True


class _FileAuth(httpx.Auth):
    """Reads the token or password file on every request, so rotated secrets are used."""

    def __init__(self, auth: PrometheusAuth) -> None:
        self._auth = auth

    def auth_flow(self, request: httpx.Request):  # type: ignore[no-untyped-def]
        if self._auth.bearer_token_file is not None:
            token = self._auth.bearer_token_file.read_text().strip()
            request.headers["Authorization"] = f"Bearer {token}"
        elif self._auth.username is not None:
            password = (
                self._auth.password_file.read_text().strip() if self._auth.password_file else ""
            )
            pair = f"{self._auth.username}:{password}".encode()
            request.headers["Authorization"] = f"Basic {base64.b64encode(pair).decode()}"
        yield request


class PrometheusClient:
    def __init__(
        self,
        url: str,
        *,
        auth: PrometheusAuth = PrometheusAuth(),
        timeout: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self._client = httpx.AsyncClient(
            base_url=self.url,
            verify=auth.verify(),
            auth=_FileAuth(auth),
            timeout=httpx.Timeout(timeout),
            transport=transport,
            headers={"User-Agent": "loadsched-annotator"},
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def query(self, promql: str) -> list[tuple[str, float]]:
        """``(instance label, value)`` for every series of an instant vector."""
        try:
            response = await self._client.get("/api/v1/query", params={"query": promql})
        except (httpx.HTTPError, OSError) as e:
            raise PrometheusError(f"query {promql!r}: {type(e).__name__}: {e}") from e
        try:
            answer = _DECODER.decode(response.content)
        except msgspec.DecodeError as e:
            raise PrometheusError(
                f"query {promql!r}: HTTP {response.status_code}, "
                f"unreadable body: {response.text[:200]!r}"
            ) from e
        if answer.status != "success" or answer.data is None:
            raise PrometheusError(
                f"query {promql!r}: HTTP {response.status_code} {answer.errorType}: {answer.error}"
            )
        if answer.data.resultType != "vector":
            raise PrometheusError(
                f"query {promql!r}: expected an instant vector, got {answer.data.resultType}"
            )
        return [(s.metric.instance, _number(s.value[1])) for s in answer.data.result]


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan
