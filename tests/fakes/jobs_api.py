"""The API server the dispatch room talks to: nodes, pods, Jobs and CronJobs, TokenReview and
SubjectAccessReview (``JobsAPI``), and the extender started on it with job templates."""

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import yaml
from fastapi import FastAPI

from extender.app import create_app
from extender.settings import ExtenderSettings
from shared.kube.config import KubeEndpoint
from tests.fakes.clock import NOW
from tests.fakes.extender_calls import ClientFactory, wait_ready
from tests.fakes.kube import FakeCluster, FakeCollection, FakeConfigMaps
from tests.payloads import node

TEMPLATES = {
    "templates": [
        {
            "name": "work",
            "namespace": "batch",
            "image": "img",
            "resources": {"requests": {"cpu": "2"}},
            "allowedKeys": {"names": ["ROW_ID"]},
            "maxActive": 1,
        },
        {
            "name": "huge",
            "namespace": "batch",
            "image": "img",
            "resources": {"requests": {"cpu": "64"}},
        },
    ]
}


class JobsAPI(FakeCluster):
    """Lists and watches from collections; POST of a Job answers 201, or 409 when the name
    was created before, or the scripted status."""

    def __init__(self, post_status: int | None = None) -> None:
        small = node("n1", index=1, images=0)
        small["status"]["allocatable"] = {"cpu": "4", "memory": "8Gi", "pods": "110"}
        super().__init__(
            {
                "/api/v1/nodes": FakeCollection([(1, [small])]),
                "/api/v1/pods": FakeCollection([(1, [])]),
                "/apis/batch/v1/jobs": FakeCollection([(1, [])]),
                "/apis/batch/v1/cronjobs": FakeCollection([(1, [])]),
            }
        )
        self.created: dict[str, dict[str, Any]] = {}
        self.configmaps = FakeConfigMaps()  # admission records
        self.post_status = post_status
        self.reviews: list[str] = []

    async def handler(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if self.configmaps.handles(request):
            return await self.configmaps.handler(request)
        if request.method == "POST" and path == "/apis/batch/v1/namespaces/batch/jobs":
            if self.post_status:
                return httpx.Response(
                    self.post_status, json={"code": self.post_status, "message": "nope"}
                )
            body = yaml.safe_load(request.content)
            name = body["metadata"]["name"]
            if name in self.created:
                return httpx.Response(409, json={"code": 409, "reason": "AlreadyExists"})
            body["metadata"]["uid"] = f"uid-{len(self.created)}"
            self.created[name] = body
            return httpx.Response(201, json=body)
        if path.startswith("/apis/batch/v1/namespaces/batch/cronjobs"):
            body = yaml.safe_load(request.content)
            if request.method == "POST":
                name = body["metadata"]["name"]
                if name in self.created:
                    return httpx.Response(409, json={"code": 409, "reason": "AlreadyExists"})
                body["metadata"]["uid"] = "cron-uid"
                self.created[name] = body
                return httpx.Response(201, json=body)
            name = path.rsplit("/", 1)[1]
            self.created[name]["spec"].update(body["spec"])
            return httpx.Response(200, json=self.created[name])
        if path.endswith("/tokenreviews"):
            self.reviews.append("token")
            token = json.loads(request.content)["spec"]["token"]
            user = {"username": f"system:serviceaccount:batch:{token}", "groups": ["g"]}
            return httpx.Response(
                201, json={"status": {"authenticated": token != "bad", "user": user}}
            )
        if path.endswith("/subjectaccessreviews"):
            self.reviews.append("access")
            spec = json.loads(request.content)["spec"]
            allowed = spec["user"].endswith(":writer")
            return httpx.Response(201, json={"status": {"allowed": allowed, "reason": "rbac"}})
        if request.method == "GET" and path.startswith("/apis/batch/v1/namespaces/batch/jobs/"):
            return httpx.Response(200, json=self.created[path.rsplit("/", 1)[1]])
        return await super().handler(request)


async def ready(
    make_client: ClientFactory, api: JobsAPI, tmp_path: Path, **settings: object
) -> httpx.AsyncClient:
    path = tmp_path / "templates.yaml"
    path.write_text(yaml.safe_dump(TEMPLATES))
    settings.setdefault("dispatch_auth", "none")
    client = await make_client(fake=api, job_templates=path, **settings)
    return await wait_ready(client)


async def serve_dispatch(
    tmp_path: Path, api: JobsAPI, extra: Callable[[FastAPI], None] | None = None
) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    path = tmp_path / "templates.yaml"
    path.write_text(yaml.safe_dump(TEMPLATES))
    app = create_app(
        ExtenderSettings(job_templates=path, dispatch_auth="tokenreview"),
        endpoint=KubeEndpoint(host="https://api.test"),
        transport=api.transport(),
        clock=lambda: NOW,
    )
    if extra is not None:
        extra(app)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://extender") as client:
            await wait_ready(client)
            yield app, client
