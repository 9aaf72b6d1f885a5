"""What the annotator talks to, faked behind ``httpx.MockTransport``: Prometheus, the nodes
API, the leases API; and the annotator's node store filled with nodes by address."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from annotator.objects import NODE_DECODER, Node, NodeStore


@dataclass
class FakePrometheus:
    """Answers /api/v1/query from ``series``: metric → [(instance, value)], or a status code."""

    series: dict[str, list[tuple[str, float]] | int] = field(default_factory=dict)
    queries: list[str] = field(default_factory=list)
    headers: list[httpx.Headers] = field(default_factory=list)

    def handler(self, request: httpx.Request) -> httpx.Response:
        promql = request.url.params["query"]
        self.queries.append(promql)
        self.headers.append(request.headers)
        answer = self.series.get(promql, [])
        if isinstance(answer, int):
            return httpx.Response(
                answer, json={"status": "error", "errorType": "internal", "error": "scripted"}
            )
        result = [
            {"metric": {"instance": i, "__name__": promql}, "value": [1700000000.0, str(v)]}
            for i, v in answer
        ]
        return httpx.Response(
            200, json={"status": "success", "data": {"resultType": "vector", "result": result}}
        )

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handler)


@dataclass
class FakeNodesAPI:
    """Records merge patches of nodes; ``fail`` scripts statuses per node (popped in order)."""

    patches: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    fail: dict[str, list[int | Exception]] = field(default_factory=dict)
    content_types: list[str] = field(default_factory=list)

    def handler(self, request: httpx.Request) -> httpx.Response:
        node = request.url.path.rsplit("/", 1)[-1]
        script = self.fail.get(node)
        if script:
            step = script.pop(0)
            if isinstance(step, Exception):
                raise step
            return httpx.Response(
                step,
                json={"kind": "Status", "code": step, "reason": "Scripted", "message": "scripted"},
            )
        self.content_types.append(request.headers["content-type"])
        self.patches.append((node, json.loads(request.content)))
        return httpx.Response(200, json={"metadata": {"name": node}})

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handler)


@dataclass
class FakeLeases:
    """A Lease store with resourceVersion checks, like the API server's."""

    leases: dict[str, dict[str, Any]] = field(default_factory=dict)
    version: int = 0
    down: bool = False
    on_request: Callable[[httpx.Request], None] | None = None

    def handler(self, request: httpx.Request) -> httpx.Response:
        if self.down:
            raise httpx.ConnectError("scripted outage")
        name = request.url.path.rsplit("/", 1)[-1]
        if request.method == "GET":
            if name not in self.leases:
                return httpx.Response(
                    404, json={"kind": "Status", "code": 404, "reason": "NotFound"}
                )
            return httpx.Response(200, json=self.leases[name])
        body = json.loads(request.content)
        name = body["metadata"]["name"]
        if request.method == "POST" and name in self.leases:
            return httpx.Response(
                409, json={"kind": "Status", "code": 409, "reason": "AlreadyExists"}
            )
        if request.method == "PUT":
            current = self.leases.get(name)
            if current is None:
                return httpx.Response(
                    404, json={"kind": "Status", "code": 404, "reason": "NotFound"}
                )
            if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
                return httpx.Response(
                    409, json={"kind": "Status", "code": 409, "reason": "Conflict"}
                )
        self.version += 1
        body["metadata"]["resourceVersion"] = str(self.version)
        self.leases[name] = body
        return httpx.Response(200, json=body)

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handler)


def node(name: str, ip: str) -> Node:
    """A node with an InternalIP and its hostname as addresses."""
    addresses = [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}]
    body = {"metadata": {"name": name}, "status": {"addresses": addresses}}
    return NODE_DECODER.decode(json.dumps(body))


def store(*nodes: Node) -> NodeStore:
    """The annotator's node store, listed with ``nodes``."""
    s = NodeStore()
    s.replace(list(nodes))
    return s
