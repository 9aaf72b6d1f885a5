"""The one request function: what is retried, how long it waits, and what it raises."""

from typing import Any

import httpx
import pytest

from shared.errors import (
    APIConflictError,
    APIError,
    APIForbiddenError,
    APIGoneError,
    APIInvalidError,
    APINotFoundError,
    APIServerError,
    APITimeoutError,
    APITooManyRequestsError,
    APIUnauthorizedError,
    APIUnreachableError,
)
from shared.kube import creating, fetching, patching
from shared.kube.paths import NODES, PODS
from shared.kube.requesting import request
from shared.kube.retrying import RetryPolicy, retry_after

pytestmark = pytest.mark.anyio

Answer = int | tuple[int, dict[str, str]] | Exception


class Scripted:
    """Answers each request with the next scripted status (or raises the scripted error);
    200 with ``{}`` once the script is used up. Records what was sent."""

    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if self.answers else 200
        if isinstance(answer, Exception):
            raise answer
        code, headers = answer if isinstance(answer, tuple) else (answer, {})
        body = {} if code < 300 else {"kind": "Status", "code": code, "message": "scripted"}
        return httpx.Response(code, json=body, headers=headers)

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url="https://api", transport=httpx.MockTransport(self.handler)
        )


class Sleeps:
    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


POLICY = RetryPolicy(attempts=4, backoff=0.5, backoff_max=6.0, timeout=3.0)


async def send(fake: Scripted, method: str, sleeps: Sleeps, **kwargs: Any) -> httpx.Response:
    async with fake.client() as client:
        return await request(
            client, method, "/api/v1/nodes/n1", what="node/n1", retry=POLICY, sleep=sleeps, **kwargs
        )


@pytest.mark.parametrize("method", ["GET", "POST", "PATCH", "PUT", "DELETE"])
@pytest.mark.parametrize("code", [429, 503])
async def test_retry_after_is_the_wait_for_every_method(method: str, code: int) -> None:
    fake = Scripted((code, {"Retry-After": "2"}), (code, {"Retry-After": "1"}))
    sleeps = Sleeps()
    response = await send(fake, method, sleeps)
    assert response.status_code == 200
    assert sleeps.waits == [2.0, 1.0]
    assert len(fake.requests) == 3


async def test_retry_after_is_capped_by_the_backoff_max() -> None:
    fake = Scripted((429, {"Retry-After": "120"}))
    sleeps = Sleeps()
    await send(fake, "PATCH", sleeps)
    assert sleeps.waits == [POLICY.backoff_max]


async def test_without_retry_after_the_waits_back_off_within_bounds() -> None:
    fake = Scripted(500, 500, 500)
    sleeps = Sleeps()
    await send(fake, "GET", sleeps)
    caps = [0.5, 1.0, 2.0]
    assert len(sleeps.waits) == 3
    assert all(0 <= wait <= cap for wait, cap in zip(sleeps.waits, caps, strict=True))


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (httpx.ReadTimeout("slow"), APITimeoutError),
        (httpx.RemoteProtocolError("closed"), APIUnreachableError),
        (500, APIServerError),
        (504, APIServerError),
    ],
)
async def test_a_post_the_server_may_have_run_is_not_sent_again(
    answer: Answer, error: type[Exception]
) -> None:
    fake = Scripted(answer)
    sleeps = Sleeps()
    with pytest.raises(error):
        await send(fake, "POST", sleeps, json={"kind": "Event"})
    assert len(fake.requests) == 1
    assert sleeps.waits == []


@pytest.mark.parametrize(
    "answer", [httpx.ConnectError("refused"), httpx.ConnectTimeout("syn"), httpx.PoolTimeout("x")]
)
async def test_a_post_that_never_left_is_sent_again(answer: Exception) -> None:
    fake = Scripted(answer)
    response = await send(fake, "POST", Sleeps(), json={"kind": "Event"})
    assert response.status_code == 200
    assert len(fake.requests) == 2


@pytest.mark.parametrize(
    "answer", [httpx.ReadTimeout("slow"), httpx.RemoteProtocolError("closed"), 500, 504]
)
async def test_reads_and_idempotent_writes_are_retried_on_any_transient_failure(
    answer: Answer,
) -> None:
    for method, idempotent in (("GET", False), ("PATCH", True)):
        fake = Scripted(answer)
        response = await send(fake, method, Sleeps(), idempotent=idempotent)
        assert response.status_code == 200, method
        assert len(fake.requests) == 2, method


async def test_a_conflict_is_retried_only_when_the_caller_says_so() -> None:
    fake = Scripted(409)
    with pytest.raises(APIConflictError):
        await send(fake, "PUT", Sleeps())
    assert len(fake.requests) == 1
    fake = Scripted(409)
    await send(fake, "PATCH", Sleeps(), conflicts=True)
    assert len(fake.requests) == 2


@pytest.mark.parametrize(
    ("answers", "error"),
    [
        ([(429, {"Retry-After": "1"})] * 4, APITooManyRequestsError),
        ([503] * 4, APIServerError),
        ([httpx.ConnectError("refused")] * 4, APIUnreachableError),
        ([httpx.ReadTimeout("slow")] * 4, APITimeoutError),
    ],
)
async def test_retries_exhausted_raise_the_last_error_by_kind(
    answers: list[Answer], error: type[Exception]
) -> None:
    fake = Scripted(*answers)
    sleeps = Sleeps()
    with pytest.raises(error) as raised:
        await send(fake, "GET", sleeps)
    assert len(fake.requests) == POLICY.attempts
    assert len(sleeps.waits) == POLICY.attempts - 1
    assert type(raised.value) is error


@pytest.mark.parametrize(
    ("code", "error"),
    [
        (400, None),
        (401, APIUnauthorizedError),
        (403, APIForbiddenError),
        (404, APINotFoundError),
        (409, APIConflictError),
        (410, APIGoneError),
        (422, APIInvalidError),
    ],
)
async def test_client_errors_escalate_at_once_as_their_class(
    code: int, error: type[APIError] | None
) -> None:
    fake = Scripted(code)
    with pytest.raises(error or APIError) as raised:
        await send(fake, "GET", Sleeps())
    assert raised.value.status == code
    assert type(raised.value).__name__ == (error.__name__ if error else "APIError")
    assert len(fake.requests) == 1


async def test_a_policy_of_one_attempt_never_retries() -> None:
    fake = Scripted((429, {"Retry-After": "1"}))
    with pytest.raises(APITooManyRequestsError) as raised:
        async with fake.client() as client:
            await request(client, "POST", "/x", what="x", retry=POLICY.once(), sleep=Sleeps())
    assert raised.value.retry_after == 1.0


async def test_each_try_has_the_policy_timeout() -> None:
    fake = Scripted()
    await send(fake, "GET", Sleeps())
    assert fake.requests[0].extensions["timeout"] == {
        "connect": 3.0,
        "read": 3.0,
        "write": 3.0,
        "pool": 3.0,
    }


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("3", 3.0),
        (" 1.5 ", 1.5),
        ("-4", 0.0),
        ("nan", None),
        ("Wed, 21 Oct 2015 07:28:00 GMT", None),
        (None, None),
    ],
)
def test_retry_after_header(header: str | None, seconds: float | None) -> None:
    assert retry_after(header) == seconds


@pytest.mark.parametrize(
    "kwargs",
    [{"attempts": 0}, {"backoff": 2.0, "backoff_max": 1.0}, {"backoff": -1.0}, {"timeout": 0.0}],
)
def test_a_policy_refuses_nonsense(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**kwargs)


async def test_verbs_send_the_path_method_body_and_content_type() -> None:
    fake = Scripted()
    async with fake.client() as client:
        await patching.patch(client, NODES, "n1", {"metadata": {"annotations": {"a": None}}})
        await patching.patch(
            client,
            PODS,
            "p",
            {"status": {}},
            namespace="ns",
            subresource="status",
            patch_type=patching.PatchType.STRATEGIC,
        )
        await creating.create(
            client, PODS, {"kind": "Eviction"}, namespace="ns", name="p", subresource="eviction"
        )
        await fetching.get(client, PODS, "p", namespace="ns")
    sent = [(r.method, r.url.path, r.headers.get("content-type"), r.content) for r in fake.requests]
    assert sent == [
        (
            "PATCH",
            "/api/v1/nodes/n1",
            "application/merge-patch+json",
            b'{"metadata":{"annotations":{"a":null}}}',
        ),
        (
            "PATCH",
            "/api/v1/namespaces/ns/pods/p/status",
            "application/strategic-merge-patch+json",
            b'{"status":{}}',
        ),
        (
            "POST",
            "/api/v1/namespaces/ns/pods/p/eviction",
            "application/json",
            b'{"kind":"Eviction"}',
        ),
        ("GET", "/api/v1/namespaces/ns/pods/p", None, b""),
    ]
