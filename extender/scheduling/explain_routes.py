"""``GET /v1/explain/{namespace}/{pod}`` and ``POST /v1/explain``: what filter and prioritize
would answer for a pod now, node by node (:mod:`extender.scheduling.explain`).

Access is the dispatch API's (:mod:`extender.common.access`): authentication is a dependency of the
router, so every route answers 401 without an accepted token, and each route checks that the
caller may ``get pods`` in the pod's namespace (403 otherwise), unless ``--dispatch-auth none``
was set explicitly. The bearer token is read from ``Authorization``, or from
``X-Loadsched-Authorization`` when the request came through the API server's service proxy,
which removes ``Authorization`` once it has authenticated the caller (``kubectl loadsched``
sends both).
"""

# No ``from __future__ import annotations``: FastAPI reads the handlers' annotations.

from typing import Annotated, Any, Literal, Protocol

import httpx
import msgspec
from fastapi import APIRouter, Body, Depends, HTTPException, Query, Request
from fastapi import Path as InPath
from fastapi.exceptions import RequestValidationError

from extender.common.access import (
    Action,
    Authorizer,
    Caller,
    authenticating,
    http_error,
    presented_authorization,
)
from extender.common.routing import JSONRoute
from extender.scheduling.explain import Explainer, Explanation
from extender.scheduling.quota_gate import InvalidPod
from shared.errors import APINotFoundError, LoadschedError
from shared.kube import fetching
from shared.kube.paths import PODS
from shared.kube.retrying import RetryPolicy
from shared.pods import POD_DECODER, Pod


class ExplainService:
    """What the routes need: the explainer, who may ask, and a client to read pods with."""

    def __init__(self, explainer: Explainer, authorizer: Authorizer) -> None:
        self.explainer = explainer
        self.authorizer = authorizer
        self.client: httpx.AsyncClient | None = None
        self.retry: RetryPolicy | None = None

    def attach(self, client: httpx.AsyncClient, retry: RetryPolicy) -> None:
        """Read pods (and review tokens) through ``client`` once the cluster is reached."""
        self.client, self.retry = client, retry
        self.authorizer.attach(client)


class ExplainState(Protocol):
    """What the routes read of the process's state (:class:`extender.state.ExtenderState`)."""

    @property
    def explain(self) -> ExplainService | None: ...

    def readiness(self, room: Literal["scheduling"]) -> tuple[bool, str]: ...


def get_service(request: Request) -> ExplainService:
    """404 when this process does not serve scheduling with a cluster; 503 (``Retry-After``)
    until the node cache and the scheduling room's watches are listed."""
    state: ExplainState = request.app.state.loadsched
    service = state.explain
    if service is None:
        raise HTTPException(
            404, "explain needs the scheduling room with a node cache (--kubeconfig or in-cluster)"
        )
    ready, message = state.readiness("scheduling")
    if not ready:
        raise HTTPException(503, f"scheduling is {message}", headers={"Retry-After": "1"})
    return service


ServiceDep = Annotated[ExplainService, Depends(get_service)]


@authenticating
async def authenticated(service: ServiceDep, request: Request) -> Caller:
    """The caller; 401 without an accepted token, 502/503 when it cannot be reviewed."""
    try:
        return await service.authorizer.authenticate(presented_authorization(request.headers))
    except LoadschedError as e:
        raise http_error(e) from e


CallerDep = Annotated[Caller, Depends(authenticated)]

router = APIRouter(
    prefix="/v1/explain",
    tags=["explain"],
    dependencies=[Depends(authenticated)],
    route_class=JSONRoute,
)


async def may_get_pods(service: ExplainService, caller: Caller, namespace: str) -> None:
    try:
        await service.authorizer.authorize(caller, Action("get", "pods", namespace, group=""))
    except LoadschedError as e:
        raise http_error(e) from e


def node_names(nodes: str | None) -> list[str] | None:
    if nodes is None:
        return None
    names = [n.strip() for n in nodes.split(",") if n.strip()]
    if not names:
        raise RequestValidationError(
            [
                {
                    "type": "value_error",
                    "loc": ("query", "nodes"),
                    "msg": "no node names",
                    "input": nodes,
                }
            ]
        )
    return names


NodesQuery = Annotated[
    str | None,
    Query(description="comma-separated node names to explain (default: every cached node)"),
]


def explained(service: ExplainService, pod: Pod, nodes: str | None) -> Explanation:
    names = node_names(nodes)
    try:
        return service.explainer.explain(pod, names)
    except InvalidPod as e:
        detail = [{"type": "value_error", "loc": ("body",), "msg": str(e), "input": None}]
        raise RequestValidationError(detail) from e


LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
Namespace = Annotated[
    str, InPath(pattern=f"^{LABEL}$", max_length=63, description="the pod's namespace")
]
PodName = Annotated[
    str, InPath(pattern=rf"^{LABEL}(\.{LABEL})*$", max_length=253, description="the pod")
]


@router.get("/{namespace}/{pod}", response_model=Explanation)
async def explain_pod(
    namespace: Namespace,
    pod: PodName,
    service: ServiceDep,
    caller: CallerDep,
    nodes: NodesQuery = None,
) -> Explanation:
    """Every node's verdict for an existing pod (read from the API server), best first."""
    await may_get_pods(service, caller, namespace)
    if service.client is None or service.retry is None:  # pragma: no cover - set at start-up
        raise HTTPException(
            503, "not connected to the API server yet", headers={"Retry-After": "1"}
        )
    try:
        content = await fetching.get(
            service.client, PODS, pod, namespace=namespace, retry=service.retry
        )
    except APINotFoundError as e:
        raise HTTPException(404, f"pod {namespace}/{pod} not found") from e
    except LoadschedError as e:
        raise http_error(e) from e
    return explained(service, POD_DECODER.decode(content), nodes)


POD_EXAMPLE = {
    "metadata": {"name": "web-1", "namespace": "default"},
    "spec": {"containers": [{"name": "web", "resources": {"requests": {"cpu": "500m"}}}]},
}


@router.post("", response_model=Explanation)
async def explain_posted(
    body: Annotated[
        dict[str, Any],
        Body(
            description="a Pod (as kubectl would create it); metadata.namespace defaults to "
            "default",
            examples=[POD_EXAMPLE],
        ),
    ],
    service: ServiceDep,
    caller: CallerDep,
    nodes: NodesQuery = None,
) -> Explanation:
    """Every node's verdict for a pod not created yet, best first."""
    try:
        pod = msgspec.convert(body, Pod)
    except msgspec.ValidationError as e:
        message = str(e)
        where = message.rpartition("at `$")[2].rstrip("`")
        loc = ("body", *(p for p in where.replace("[", ".").replace("]", "").split(".") if p))
        error = {"type": "value_error", "loc": loc, "msg": message, "input": None}
        raise RequestValidationError([error]) from e
    if not pod.metadata.namespace:
        pod.metadata.namespace = "default"
    await may_get_pods(service, caller, pod.metadata.namespace)
    return explained(service, pod, nodes)
