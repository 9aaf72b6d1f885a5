"""``api.md`` and ``openapi.json``: the extender's HTTP API, as ``GET /openapi.json`` serves it
(:func:`extender.openapi.api_schema`), and a table of every endpoint the app answers, the
ones outside the schema included (kube-scheduler's verbs, the status page's shell, the schema
itself)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from fastapi import FastAPI
from fastapi.routing import iter_route_contexts

from extender.openapi import SCHEMA_PATH, api_schema, authenticated_operations
from extender.scheduling.routes import PATHS as VERB_PATHS
from reference_pages.markdown import cell, code, json_file, page, table

SCHEMA_FILE = "openapi.json"
VERB = (
    "kube-scheduler's extender call (its protocol, not JSON Schema: [The extender](../extender.md))"
)
VERB_AUTH = "none; a client certificate with `--tls-client-ca-file`"


def files(app: FastAPI) -> dict[str, str]:
    schema = api_schema(app)
    secured = set(authenticated_operations(app))
    rows = [
        [code(method), code(path), summary, auth, "yes" if listed else "no"]
        for path, method, summary, auth, listed in sorted(endpoints(app, schema, secured))
    ]
    blocks = [
        f"The extender's HTTP API. Its OpenAPI schema, [`{SCHEMA_FILE}`]({SCHEMA_FILE}), is "
        f"the document a running extender serves at `GET {SCHEMA_PATH}` to any caller with "
        "a token it accepts, as the `/v1` API (`--dispatch-auth`: a token the cluster's "
        "TokenReview accepts, one of `--dispatch-tokens-file`, or anyone with `none`); "
        "without one it answers `401`. There is no interactive page.",
        "```sh\n"
        f'curl -H "Authorization: Bearer $TOKEN" https://loadsched-extender:8888{SCHEMA_PATH}\n'
        "```",
        "Client generators read it as it is (OpenAPI 3.1; the `bearer` security scheme is on "
        "every operation that needs a token). Who may do what, beyond holding a token, is "
        "the cluster's RBAC: [Job dispatch](../job-dispatch.md) and "
        "[Reliability and security](../reliability-security.md).",
        "## Endpoints",
        "Every endpoint the extender answers, also those outside the schema: kube-scheduler's "
        "calls, served ahead of the app, the status page's shell and the schema itself.",
        table(["method", "path", "summary", "authentication", "in the schema"], rows),
    ]
    return {"api.md": page("HTTP API", *blocks), SCHEMA_FILE: json_file(schema)}


def endpoints(
    app: FastAPI, schema: dict[str, Any], secured: set[tuple[str, str]]
) -> Iterator[tuple[str, str, str, str, bool]]:
    """(path, method, summary, authentication, in the schema) of every endpoint ``app``
    answers."""
    for path in VERB_PATHS:
        yield path, "POST", cell(f"`{path.strip('/')}`: {VERB}"), VERB_AUTH, False
    for context in iter_route_contexts(app.routes):
        path = str(context.path_format)
        for method in sorted(context.methods or ()):
            if method == "HEAD":
                continue
            operation = schema["paths"].get(path, {}).get(method.lower())
            summary = cell(summary_of(operation, context.endpoint))
            auth = "bearer token" if (method, path) in secured else "none"
            yield path, method, summary, auth, operation is not None


def summary_of(operation: dict[str, Any] | None, endpoint: Any) -> str:
    """The operation's summary, and the first paragraph of its description; for a route
    outside the schema, the first paragraph of its handler's docstring."""
    if operation is None:
        return str(getattr(endpoint, "__doc__", None) or "").strip().split("\n\n")[0]
    summary = str(operation.get("summary", ""))
    description = str(operation.get("description", "")).split("\n\n")[0]
    return f"{summary}: {description}" if description else summary
