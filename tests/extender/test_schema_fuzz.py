"""Requests generated from the extender's OpenAPI schema (schemathesis) against every ``/v1``
operation it lists, with a token the cluster accepts: none may answer 5xx, and every 4xx must
name the field it refuses. ``bench/schema_fuzz.py`` runs the same with at least 5,000
requests; here a smaller count keeps the unit tier fast.

Both of schemathesis' modes run: *positive* (bodies and parameters the schema accepts) and
*negative* (ones it refuses). The posted ``template`` is sometimes replaced by one the
extender serves, so generated keys, data, overrides, schedules and time zones reach the
dispatcher and the Job building, not only the "unknown template" answer. New ``/v1`` paths
are taken from the schema without a change here. Every pod the fake cluster is asked for
exists, so ``GET /v1/explain/{namespace}/{pod}`` runs the explanation on generated names.

"Names the field", from the API's error format:

- ``422`` (FastAPI's validation and the dispatcher's own, :func:`extender.dispatch.routes.jobs.invalid`):
  ``detail`` is a non-empty list; each item has a ``msg`` and a ``loc`` that starts with
  where the field is (``body``, ``query``, ``path``, ``header``) followed by the field: a
  property of the body's schema or a key the request sent (an unknown key is named itself), or
  a declared parameter. ``loc`` may be ``["body"]`` alone, or ``["body", <offset>]``, only when
  the body is missing or is no JSON object, so there is no field to name.
- any other 4xx: ``detail`` is a sentence that names a field of the operation (``unknown
  template 'x'``) or, for the ``/{namespace}/{name}`` routes, the object the path names
  (``no dispatched Job batch/x``).
- ``429`` is backpressure, not bad input: it must carry ``Retry-After`` and a ``detail``.
- ``401`` and ``403`` are failures here: the token is one the fake cluster accepts and allows.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import anyio
import anyio.from_thread
import httpx
import hypothesis
import schemathesis
import yaml
from hypothesis import HealthCheck, Phase
from hypothesis import strategies as st
from schemathesis.core.result import Err
from schemathesis.generation import GenerationMode

from extender.app import create_app
from extender.settings import ExtenderSettings
from shared.kube.config import KubeEndpoint
from tests.fakes.clock import NOW
from tests.fakes.jobs_api import JobsAPI

TOKEN = {"Authorization": "Bearer writer"}
"""A token :class:`JobsAPI` authenticates, for a user its access reviews allow."""

TEMPLATES = {
    "templates": [
        {
            "name": "work",
            "namespace": "batch",
            "image": "img",
            "resources": {"requests": {"cpu": "1"}},
            "allowedKeys": {"names": ["ROW_ID"]},
        },
        {
            "name": "open",
            "namespace": "batch",
            "image": "img",
            "allowedKeys": {"pattern": "(TASK|T)_[A-Za-z0-9_]*"},
            "overridable": [
                "completions",
                "parallelism",
                "backoffLimit",
                "activeDeadlineSeconds",
                "ttlSecondsAfterFinished",
            ],
            "maxDataBytes": 256,
        },
    ]
}
SERVED = ("work", "open")
UNIT_EXAMPLES = 40
"""Examples per operation and mode in the unit tier."""
BAD_INPUT_EXEMPT = {401, 403, 429}
"""4xx that are not about the request's fields (401 and 403 are failures on their own)."""


class FuzzAPI(JobsAPI):
    """:class:`JobsAPI` that reads created objects as JSON (any string the API server would
    take, control characters included) and answers every create."""

    async def handler(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        creates = (
            "/apis/batch/v1/namespaces/batch/jobs",
            "/apis/batch/v1/namespaces/batch/cronjobs",
        )
        if request.method == "POST" and path in creates:
            body = json.loads(request.content)
            name = body["metadata"]["name"]
            if name in self.created:
                return httpx.Response(409, json={"code": 409, "reason": "AlreadyExists"})
            body["metadata"]["uid"] = f"uid-{len(self.created)}"
            self.created[name] = body
            return httpx.Response(201, json=body)
        if request.method == "PUT" and path.startswith(creates[1] + "/"):
            body = json.loads(request.content)
            self.created[path.rsplit("/", 1)[1]] = body
            return httpx.Response(200, json=body)
        pod = re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods/([^/]+)", path)
        if request.method == "GET" and pod:  # any pod exists: explain runs on generated names
            namespace, name = (unquote(part) for part in pod.groups())
            return httpx.Response(200, json=fuzz_pod(namespace, name))
        return await super().handler(request)


def fuzz_pod(namespace: str, name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]},
    }


@dataclass
class FuzzReport:
    requests: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    operations: list[str] = field(default_factory=list)
    per_operation: Counter[str] = field(default_factory=Counter)


Send = Callable[[dict[str, Any]], httpx.Response]


@contextmanager
def serving(tmp_path: Path) -> Iterator[tuple[dict[str, Any], Send]]:
    """The extender (dispatch on, token reviews against :class:`FuzzAPI`) in an event loop
    of its own thread: its OpenAPI schema, and a blocking ``send`` for httpx request
    arguments."""
    path = tmp_path / "templates.yaml"
    path.write_text(yaml.safe_dump(TEMPLATES))
    with anyio.from_thread.start_blocking_portal() as portal:
        api = portal.call(FuzzAPI)
        app = create_app(
            ExtenderSettings(job_templates=path, dispatch_auth="tokenreview"),
            endpoint=KubeEndpoint(host="https://api.test"),
            transport=api.transport(),
            clock=lambda: NOW,
        )
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        client = httpx.AsyncClient(transport=transport, base_url="http://extender", timeout=5)
        with (
            portal.wrap_async_context_manager(app.router.lifespan_context(app)),
            portal.wrap_async_context_manager(client),
        ):

            async def send(kwargs: dict[str, Any]) -> httpx.Response:
                return await client.request(**kwargs)

            async def until_ready() -> None:
                for _ in range(500):
                    if (await client.get("/readyz")).status_code == 200:
                        return
                    await anyio.sleep(0.01)
                raise AssertionError("the extender did not become ready")

            portal.call(until_ready)
            yield app.openapi(), lambda kwargs: portal.call(send, kwargs)


def v1_operations(schema: dict[str, Any]) -> list[Any]:
    """Every operation of ``schema`` under ``/v1``, as schemathesis operations."""
    loaded = schemathesis.openapi.from_dict(schema)
    found = []
    for result in loaded.get_all_operations():
        assert not isinstance(result, Err), result.err()
        found.append(result.ok())
    return [op for op in found if op.path == "/v1" or op.path.startswith("/v1/")]


def request_of(case: Any, template: str | None) -> tuple[dict[str, Any], Any]:
    """httpx arguments for ``case`` with the token; the posted ``template`` replaced by
    ``template`` when given. Also the body as sent."""
    body = case.body
    if template is not None and isinstance(body, dict) and "template" in body:
        body = {**body, "template": template}
        case.body = body
    kwargs = case.as_transport_kwargs(base_url="http://extender", headers=TOKEN)
    kwargs.pop("cookies", None)
    if isinstance(kwargs.get("data"), str | bytes):  # requests' name for raw content
        kwargs["content"] = kwargs.pop("data")
    return kwargs, body


def _fields(operation: Any) -> set[str]:
    """The names a request of ``operation`` can carry: parameters and body properties."""
    definition = operation.definition.raw
    names = {p["name"] for p in definition.get("parameters", [])}
    content = definition.get("requestBody", {}).get("content", {}).get("application/json", {})
    schema = content.get("schema", {})
    if "$ref" in schema:
        schema = operation.schema.raw_schema["components"]["schemas"][schema["$ref"].split("/")[-1]]
    names |= set(schema.get("properties", {}))
    for prop in schema.get("properties", {}).values():
        if "alias" in prop:
            names.add(prop["alias"])
    return names


def why_not_named(operation: Any, case: Any, body: Any, response: httpx.Response) -> str | None:
    """Why ``response`` (a 4xx) does not name the field it refuses; ``None`` when it does."""
    status = response.status_code
    if status in (401, 403):
        return "refused the accepted token"
    try:
        detail = response.json().get("detail")
    except (ValueError, AttributeError):
        return "no JSON object with a detail"
    if status == 429:
        return None if detail and response.headers.get("Retry-After") else "429 without reason"
    fields = _fields(operation)
    if isinstance(detail, list):
        if not detail:
            return "an empty list of errors"
        for item in detail:
            reason = _why_loc_unnamed(item, fields, body)
            if reason is not None:
                return reason
        return None
    if isinstance(detail, str) and detail:
        if any(re.search(rf"\b{re.escape(name)}\b", detail) for name in fields):
            return None
        path = case.path_parameters or {}
        if {"namespace", "name"} <= set(path):
            named = f"{_unquoted(path['namespace'])}/{_unquoted(path['name'])}"
            if named in detail:
                return None
        return f"detail names no field: {detail[:120]!r}"
    return f"detail is neither a list nor a sentence: {detail!r:.120}"


def _unquoted(value: object) -> str:
    from urllib.parse import unquote

    return unquote(str(value))


def _why_loc_unnamed(item: Any, fields: set[str], body: Any) -> str | None:
    if not isinstance(item, dict) or not item.get("msg"):
        return f"an error without msg: {item!r:.120}"
    loc = item.get("loc")
    if not isinstance(loc, list) or not loc:
        return f"an error without loc: {item!r:.120}"
    where = loc[0]
    if where not in ("body", "query", "path", "header"):
        return f"loc does not say where: {loc!r:.120}"
    if len(loc) == 1 or (where == "body" and isinstance(loc[1], int)):
        return None if where == "body" and not isinstance(body, dict) else f"loc {loc!r:.120}"
    name = loc[1]
    sent = set(body) if where == "body" and isinstance(body, dict) else set()
    return None if name in fields or name in sent else f"loc names no field: {loc!r:.120}"


def fuzz(
    send: Send, schema: dict[str, Any], *, examples: int, report: FuzzReport | None = None
) -> FuzzReport:
    """``examples`` generated requests per ``/v1`` operation and mode, each checked."""
    report = report or FuzzReport()
    for operation in v1_operations(schema):
        report.operations.append(f"{operation.method.upper()} {operation.path}")
        modes = [GenerationMode.POSITIVE]
        if _refusable(operation):
            modes.append(GenerationMode.NEGATIVE)
        for mode in modes:
            _exercise(send, operation, mode, examples, report)
    return report


def _refusable(operation: Any) -> bool:
    """Whether the schema refuses anything of ``operation``: a body or a query parameter (a
    path parameter is any string)."""
    definition = operation.definition.raw
    return "requestBody" in definition or any(
        p["in"] == "query" for p in definition.get("parameters", [])
    )


def _exercise(
    send: Send, operation: Any, mode: GenerationMode, examples: int, report: FuzzReport
) -> None:
    @hypothesis.settings(
        max_examples=examples,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @hypothesis.given(
        case=operation.as_strategy(generation_mode=mode),
        template=st.one_of(st.none(), st.sampled_from(SERVED)),
    )
    def run(case: Any, template: str | None) -> None:
        kwargs, body = request_of(case, template)
        try:
            response = send(kwargs)
        except httpx.HTTPError as e:
            report.failures.append(f"{_describe(kwargs)}: no answer: {e!r}")
            return
        report.requests += 1
        report.statuses[response.status_code] += 1
        report.per_operation[f"{operation.method.upper()} {operation.path}"] += 1
        if response.status_code >= 500:
            report.failures.append(
                f"{_describe(kwargs)}: {response.status_code} {response.text:.200}"
            )
        elif 400 <= response.status_code < 500:
            reason = why_not_named(operation, case, body, response)
            if reason is not None:
                report.failures.append(f"{_describe(kwargs)}: {response.status_code} {reason}")

    try:
        run()
    except hypothesis.errors.Unsatisfiable:
        pass  # nothing the schema refuses can be generated (say, no parameters at all)


def _describe(kwargs: dict[str, Any]) -> str:
    body = kwargs.get("json", kwargs.get("content"))
    text = f"{kwargs['method']} {kwargs['url']}"
    if kwargs.get("params"):
        text += f" params={kwargs['params']!r:.100}"
    return text + (f" body={body!r:.300}" if body is not None else "")


def test_generated_requests_answer_no_5xx_and_name_the_field(tmp_path: Path) -> None:
    with serving(tmp_path) as (schema, send):
        report = fuzz(send, schema, examples=UNIT_EXAMPLES)
    assert {"POST /v1/jobs", "POST /v1/cronjobs", "GET /v1/jobs"} <= set(report.operations)
    assert report.failures == []
    # the generated requests reached the dispatcher: bodies it refused by field, and Jobs made
    assert report.statuses[422] > 0 and report.statuses[201] > 0


def test_a_body_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    """FastAPI alone answers ``400 There was an error parsing the body``."""
    with serving(tmp_path) as (_, send):
        for path in ("/v1/jobs", "/v1/cronjobs"):
            headers = {**TOKEN, "Content-Type": "application/json"}
            kwargs = {"method": "POST", "url": path, "content": b"\xb1{", "headers": headers}
            response = send(kwargs)
            assert response.status_code == 422
            (error,) = response.json()["detail"]
            assert error["loc"] == ["body"] and "not UTF-8 JSON" in error["msg"]
