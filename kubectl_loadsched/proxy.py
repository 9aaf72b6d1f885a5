"""Reaching the extender through the API server's service proxy, as the kubeconfig's user.

``/api/v1/namespaces/<ns>/services/<scheme>:<service>:<port>/proxy/<path>``: the API server
authenticates the user, asks RBAC whether they may ``get services/proxy`` on that Service, and
forwards the request. Before forwarding it drops ``Authorization`` (kube-apiserver's
authentication filter, ``req.Header.Del("Authorization")`` in
``k8s.io/apiserver/pkg/endpoints/filters/authentication.go``) and the impersonation headers,
and adds no identity of its own, so the extender cannot tell who asks. The plugin therefore
repeats the user's bearer token in ``X-Loadsched-Authorization``, which the proxy keeps; the
extender reviews it (TokenReview, then a SubjectAccessReview for ``get pods``) as it does for
the dispatch API. A kubeconfig without a bearer token (client certificates) needs
``--token``.

``explain`` and ``nodes`` ask ``/v1/explain`` (``get pods`` in the pod's namespace); ``quotas``
reads the elastic quotas of the status report, ``/v1/status`` (``list nodes``, as the status
page), and keeps one namespace's when asked.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from shared.errors import LoadschedError
from shared.kube.config import KubeEndpoint

PROXIED_AUTHORIZATION = "X-Loadsched-Authorization"
"""The header the extender reads a proxied caller's ``Bearer <token>`` from."""
STATUS = "/v1/status"
"""The extender's status report (the status page's data): the elastic quotas are its
``quotas``."""


class PluginError(LoadschedError):
    """What the plugin tells the user, instead of a traceback."""


@dataclass(frozen=True)
class Service:
    """Where the extender's Service is (the chart's defaults)."""

    namespace: str = "loadsched-system"
    name: str = "loadsched-extender"
    port: str = "8888"
    scheme: str = "http"

    def proxy_path(self, path: str) -> str:
        target = quote(f"{self.scheme}:{self.name}:{self.port}", safe=":")
        return f"/api/v1/namespaces/{quote(self.namespace)}/services/{target}/proxy{path}"


def user_token(endpoint: KubeEndpoint) -> str | None:
    """The ``Bearer <token>`` the kubeconfig sends (static token, token file, exec plugin)."""
    if endpoint.auth is None:
        return None
    request = httpx.Request("GET", endpoint.host)
    flow = endpoint.auth.sync_auth_flow(request)
    sent = next(flow)
    flow.close()
    value = sent.headers.get("Authorization")
    return value if value and value.lower().startswith("bearer ") else None


class ExtenderClient:
    def __init__(
        self,
        endpoint: KubeEndpoint,
        service: Service,
        *,
        token: str | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        bearer = f"Bearer {token}" if token else user_token(endpoint)
        headers = {"Accept": "application/json", "User-Agent": "kubectl-loadsched"}
        if bearer:
            headers[PROXIED_AUTHORIZATION] = bearer
        self._service = service
        self.forwards_token = bearer is not None
        self._client = httpx.Client(
            base_url=endpoint.host,
            verify=endpoint.verify,
            cert=endpoint.cert,
            auth=endpoint.auth,
            headers=headers,
            timeout=30.0,
            transport=transport,
        )

    def close(self) -> None:
        self._client.close()

    def explain_pod(self, namespace: str, pod: str, nodes: list[str] | None) -> Any:
        path = f"/v1/explain/{quote(namespace)}/{quote(pod)}"
        return self._call("GET", path, params=_nodes(nodes))

    def explain_body(self, body: dict[str, Any], nodes: list[str] | None) -> Any:
        return self._call("POST", "/v1/explain", params=_nodes(nodes), json=body)

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        url = self._service.proxy_path(path)
        try:
            response = self._client.request(method, url, **kwargs)
        except httpx.HTTPError as e:
            raise PluginError(f"cannot reach the API server: {e}") from e
        if response.is_success:
            return response.json()
        raise PluginError(_failure(response, self._service, self.forwards_token))

    def quotas(self, namespace: str | None) -> dict[str, Any]:
        """The status report's elastic quotas (each namespace's used, min, max, borrowed and
        lent per resource; the pool; invalid quotas), only ``namespace``'s when given."""
        report = self._call("GET", STATUS, params={"part": "quotas"})
        quotas = report.get("quotas") if isinstance(report, dict) else None
        if not isinstance(quotas, dict):
            raise PluginError(f"the extender's {STATUS} has no quotas (an older extender?)")
        return in_namespace(quotas, namespace) if namespace else quotas

    def rebalance(self) -> dict[str, Any]:
        """The rebalancer's last round, as the annotator's leader published it."""
        report = self._call("GET", STATUS, params={"part": "rebalance"})
        found = report.get("rebalance") if isinstance(report, dict) else None
        if not isinstance(found, dict):
            raise PluginError(f"the extender's {STATUS} has no rebalance part (an older extender?)")
        return found


def in_namespace(quotas: dict[str, Any], namespace: str) -> dict[str, Any]:
    """``quotas`` with only ``namespace``'s quota and invalid quotas (the pool stays whole: it is
    what every quota's ``min`` adds up to)."""
    return quotas | {
        "items": [q for q in quotas.get("items") or [] if q.get("namespace") == namespace],
        "invalid": [q for q in quotas.get("invalid") or [] if q.get("namespace") == namespace],
    }


def _nodes(nodes: list[str] | None) -> dict[str, str]:
    return {"nodes": ",".join(nodes)} if nodes else {}


def _failure(response: httpx.Response, service: Service, forwarded: bool) -> str:
    """Who refused: the API server (its Status object) or the extender behind it."""
    try:
        body = response.json()
    except json.JSONDecodeError:
        body = None
    where = f"service {service.namespace}/{service.name}:{service.port}"
    if isinstance(body, dict) and body.get("kind") == "Status":
        return f"the API server answered {response.status_code} for {where}: {body.get('message')}"
    detail = body.get("detail") if isinstance(body, dict) else response.text[:300]
    hint = ""
    if response.status_code == 401 and not forwarded:
        hint = " (the kubeconfig has no bearer token to forward: pass --token)"
    return f"the extender ({where}) answered {response.status_code}: {detail}{hint}"
