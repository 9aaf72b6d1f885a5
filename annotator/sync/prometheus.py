"""One instant query to Prometheus's HTTP API, with the auth options operators need.

httpx rather than prometheus-api-client: the annotator is async, every call needs a timeout,
and tests inject a transport instead of patching.
"""

from __future__ import annotations

import base64
import logging
import math
import re
import ssl
from dataclasses import dataclass
from pathlib import Path

import httpx
import msgspec

from shared.errors import LoadschedError

logger = logging.getLogger(__name__)


class PrometheusError(LoadschedError):
    """Prometheus could not answer a query: unreachable, an error status, or a bad body."""


class _Metric(msgspec.Struct):
    instance: str = ""


class _Sample(msgspec.Struct):
    metric: _Metric
    value: tuple[float, str]


class _Envelope(msgspec.Struct):
    status: str
    data: msgspec.Raw = msgspec.Raw(b"null")
    error: str = ""
    errorType: str = ""


class _ResultType(msgspec.Struct):
    resultType: str


class _Vector(msgspec.Struct):
    result: list[_Sample]


class _PodSample(msgspec.Struct):
    metric: dict[str, str]
    value: tuple[float, str]


class _PodVector(msgspec.Struct):
    result: list[_PodSample]


_ENVELOPE = msgspec.json.Decoder(_Envelope)
_POD_VECTOR = msgspec.json.Decoder(_PodVector)
_RESULT_TYPE = msgspec.json.Decoder(_ResultType)
_VECTOR = msgspec.json.Decoder(_Vector)
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|(?i:nan|[+-]?inf)")
"""A sample value as Prometheus writes it (Go's ``strconv.FormatFloat``, ``NaN``, ``±Inf``; the
last two in any case); Python's ``float`` would also take ``1_0``, ``infinity`` and spaces."""


def _vector(status_code: int, body: bytes, where: str) -> msgspec.Raw:
    """The ``data`` of a successful instant-vector answer, else :class:`PrometheusError`."""
    try:
        answer = _ENVELOPE.decode(body)
    except msgspec.DecodeError as e:
        raise PrometheusError(f"{where}, unreadable body: {_excerpt(body)}") from e
    if not 200 <= status_code < 300 or answer.status != "success" or bytes(answer.data) == b"null":
        detail = (
            f"{answer.errorType}: {answer.error}" if answer.error else f"status {answer.status!r}"
        )
        raise PrometheusError(f"{where} {detail}")
    try:
        result_type = _RESULT_TYPE.decode(answer.data).resultType
    except msgspec.DecodeError as e:
        raise PrometheusError(f"{where}, no resultType in data: {e}") from e
    if result_type != "vector":
        raise PrometheusError(f"{where}: expected an instant vector, got {result_type!r}")
    return answer.data


def parse_pod_values(status_code: int, body: bytes, *, promql: str) -> dict[tuple[str, str], float]:
    """``(namespace, pod) → value`` of an instant-vector answer whose series carry ``namespace``
    and ``pod`` labels. Left out: series without both labels, values that are not finite or
    are negative, and a pod with several series (which one is its usage cannot be told)."""
    where = f"query {promql!r}: HTTP {status_code}"
    data = _vector(status_code, body, where)
    try:
        samples = _POD_VECTOR.decode(data).result
    except msgspec.DecodeError as e:
        raise PrometheusError(f"{where}, malformed vector: {e}") from e
    values: dict[tuple[str, str], float] = {}
    repeated: set[tuple[str, str]] = set()
    for sample in samples:
        namespace, pod = sample.metric.get("namespace"), sample.metric.get("pod")
        text = sample.value[1]
        if not namespace or not pod or _NUMBER.fullmatch(text) is None:
            continue
        value = float(text)
        if not math.isfinite(value) or value < 0:
            continue
        key = (namespace, pod)
        if key in values:
            repeated.add(key)
        values[key] = value
    for key in repeated:
        del values[key]
    if repeated:
        logger.warning("%s: %d pods have several series; not used", where, len(repeated))
    return values


def parse_answer(status_code: int, body: bytes, *, promql: str) -> list[tuple[str, float]]:
    """``(instance label, value)`` for the series of an instant-vector answer, at most one per
    ``instance``; :class:`PrometheusError` for anything that is not a successful instant
    vector of numbers.

    What reaches the annotations follows their contract (DESIGN.md): ``NaN`` and negative
    values are kept (written as ``0.00000``). Not kept, so that nothing is written for that
    instance and its old value stays until it is stale: ``±Inf`` (no usage fraction), and an
    ``instance`` with several series of different values (which one is its usage cannot be
    told; equal ones count once).
    """
    where = f"query {promql!r}: HTTP {status_code}"
    data = _vector(status_code, body, where)
    try:
        samples = _VECTOR.decode(data).result
    except msgspec.DecodeError as e:
        raise PrometheusError(f"{where}, malformed vector: {e}") from e
    by_instance: dict[str, list[float]] = {}
    for sample in samples:
        text = sample.value[1]
        if _NUMBER.fullmatch(text) is None:
            raise PrometheusError(f"{where}: sample value {text[:40]!r} is not a number")
        by_instance.setdefault(sample.metric.instance, []).append(float(text))
    series: list[tuple[str, float]] = []
    for instance, values in by_instance.items():
        if any(math.isinf(v) for v in values):
            logger.warning("%s: instance %r has an infinite value; not used", where, instance)
        elif len({"NaN" if math.isnan(v) else v for v in values}) > 1:
            logger.warning(
                "%s: instance %r has %d series with different values; not used",
                where,
                instance,
                len(values),
            )
        else:
            series.append((instance, values[0]))
    return series


def _excerpt(body: bytes) -> str:
    return repr(body[:200].decode("utf-8", errors="replace"))


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
        """``(instance label, value)`` for an instant vector's series (:func:`parse_answer`)."""
        try:
            response = await self._client.get("/api/v1/query", params={"query": promql})
        except (httpx.HTTPError, OSError) as e:
            raise PrometheusError(f"query {promql!r}: {type(e).__name__}: {e}") from e
        return parse_answer(response.status_code, response.content, promql=promql)

    async def query_pods(self, promql: str) -> dict[tuple[str, str], float]:
        """``(namespace, pod) → value`` of an instant vector (:func:`parse_pod_values`)."""
        try:
            response = await self._client.get("/api/v1/query", params={"query": promql})
        except (httpx.HTTPError, OSError) as e:
            raise PrometheusError(f"query {promql!r}: {type(e).__name__}: {e}") from e
        return parse_pod_values(response.status_code, response.content, promql=promql)
