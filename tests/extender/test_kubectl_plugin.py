"""kubectl-loadsched through a fake of kube-apiserver's service proxy: like the real one it
forwards ``/api/v1/namespaces/<ns>/services/<scheme>:<name>:<port>/proxy/<path>`` to the
extender without the ``Authorization`` it authenticated the user with, so the plugin's token
reaches the extender only in ``X-Loadsched-Authorization``. Behind the proxy runs a real
extender app (elastic quotas, token reviews): ``quotas`` shows its ``/v1/status`` figures, and
every command's ``-o json`` and ``-o yaml`` are the extender's answer unchanged."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import yaml

from kubectl_loadsched.cli import main, probe_pod
from kubectl_loadsched.proxy import ExtenderClient, Service
from kubectl_loadsched.tables import explain_table, nodes_table, quotas_table
from shared.kube.config import KubeEndpoint
from tests.fakes.extender_calls import ClientFactory, wait_ready
from tests.fakes.jobs_api import JobsAPI
from tests.fakes.kubeconfig import kubeconfig
from tests.fakes.quota_cluster import story_cluster

pytestmark = pytest.mark.anyio

PROXY = "/api/v1/namespaces/ops/services/http:ext:8888/proxy"
"""Where the plugin's ``--service-namespace ops --service ext`` points."""
SERVICE_ARGS = ["--service-namespace", "ops", "--service", "ext"]
MANIFEST = {
    "metadata": {"name": "new", "namespace": "a"},
    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
}


class QuotaCluster(JobsAPI):
    """The elastic-quota story (``a`` borrows 2 CPU over its min 6, which ``b`` lends of its
    idle 9), with :class:`JobsAPI`'s reviews: token ``writer`` may do anything, any other
    accepted token nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.collections.update(story_cluster().collections)


class ServiceProxy:
    """kube-apiserver's service proxy in front of an extender app, as far as a client can tell.
    The plugin runs in a worker thread; the app is called on the test's event loop."""

    def __init__(self, extender: httpx.AsyncClient) -> None:
        self.extender = extender
        self.received: list[httpx.Request] = []
        """As the API server got them from the plugin."""
        self.forwarded: list[httpx.Request] = []
        """As the extender got them."""

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.received.append(request)
        path = request.url.path
        if not path.startswith(f"{PROXY}/"):
            return httpx.Response(404, json={"kind": "Status", "code": 404, "message": "nope"})
        kept = [(k, v) for k, v in request.headers.multi_items() if k.lower() != "authorization"]
        forwarded = self.extender.build_request(
            request.method,
            path.removeprefix(PROXY),
            params=request.url.params,
            headers=kept,
            content=request.content,
        )
        self.forwarded.append(forwarded)
        answer = anyio.from_thread.run(self.extender.send, forwarded)
        kind = answer.headers.get("content-type", "application/json")
        return httpx.Response(
            answer.status_code, headers={"content-type": kind}, content=answer.content
        )


async def extender(make_client: ClientFactory) -> httpx.AsyncClient:
    client = await make_client(fake=QuotaCluster(), elastic_quota=True, dispatch_auth="tokenreview")
    return await wait_ready(client)


async def plugin(proxy: ServiceProxy, config: Path, *args: str) -> tuple[int, str]:
    """``kubectl loadsched --kubeconfig CONFIG ARGS...``: its exit code and standard output."""
    out = io.StringIO()
    argv = ["--kubeconfig", str(config), *SERVICE_ARGS, *args]
    transport = httpx.MockTransport(proxy.handler)
    code = await anyio.to_thread.run_sync(lambda: main(argv, out, transport))
    return code, out.getvalue()


def user(tmp_path: Path, token: str) -> Path:
    """A kubeconfig whose user authenticates with ``token`` (to the API server, which drops
    it before the extender)."""
    folder = tmp_path / token
    folder.mkdir()
    return kubeconfig(folder, {"token": token})


WRITER = {"Authorization": "Bearer writer"}


async def test_quotas_are_the_status_reports(make_client: ClientFactory, tmp_path: Path) -> None:
    app = await extender(make_client)
    proxy = ServiceProxy(app)
    code, table = await plugin(proxy, user(tmp_path, "writer"), "quotas")
    assert code == 0, table
    (request,) = proxy.received
    assert request.url.path == f"{PROXY}/v1/status"
    assert request.url.params.get_list("part") == ["quotas"]  # not every node
    assert request.headers["Authorization"] == "Bearer writer"  # for the API server
    assert request.headers["X-Loadsched-Authorization"] == "Bearer writer"
    assert "authorization" not in proxy.forwarded[0].headers
    rows = [line.split() for line in table.splitlines()]
    assert rows[:3] == [
        ["NAMESPACE", "RESOURCE", "USED", "MIN", "MAX", "BORROWED", "LENT"],
        ["a", "(borrower)", "cpu", "8", "6", "10", "2", "0"],
        ["b", "cpu", "3", "12", "14", "0", "2"],
    ]
    assert "pool (every quota's min, summed): cpu used 11 of 18" in table
    report = (await app.get("/v1/status", headers=WRITER)).json()["quotas"]
    assert table == quotas_table(report)


@pytest.mark.parametrize("output", ["json", "yaml"])
async def test_quotas_as_json_and_yaml_and_of_one_namespace(
    make_client: ClientFactory, tmp_path: Path, output: str
) -> None:
    app = await extender(make_client)
    proxy, config = ServiceProxy(app), user(tmp_path, "writer")
    report = (await app.get("/v1/status", headers=WRITER)).json()["quotas"]
    code, text = await plugin(proxy, config, "-o", output, "quotas")
    assert code == 0 and yaml.safe_load(text) == report
    code, text = await plugin(proxy, config, "-o", output, "quotas", "-n", "b")
    only_b = yaml.safe_load(text)
    assert code == 0 and [q["namespace"] for q in only_b["items"]] == ["b"]
    assert only_b["items"][0] == report["items"][1] and only_b["pool"] == report["pool"]


@pytest.mark.parametrize("output", ["json", "yaml"])
@pytest.mark.parametrize("command", ["nodes", "explain"])
async def test_explain_and_nodes_as_json_and_yaml(
    make_client: ClientFactory, tmp_path: Path, output: str, command: str
) -> None:
    app = await extender(make_client)
    if command == "nodes":
        args, body, params = ["nodes", "-n", "a"], probe_pod("a", "100m", "128Mi"), {}
    else:
        manifest = tmp_path / "pod.yaml"
        manifest.write_text(yaml.safe_dump(MANIFEST))
        args = ["explain", "-f", str(manifest), "--nodes", "n2"]
        body, params = MANIFEST, {"nodes": "n2"}
    code, text = await plugin(ServiceProxy(app), user(tmp_path, "writer"), "-o", output, *args)
    assert code == 0, text
    direct = await app.post("/v1/explain", params=params, json=body, headers=WRITER)
    assert direct.status_code == 200 and direct.json()["nodes"]
    assert yaml.safe_load(text) == direct.json()
    if output == "json":
        assert json.loads(text) == direct.json()


async def test_quotas_need_list_nodes(
    make_client: ClientFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    app = await extender(make_client)
    code, out = await plugin(ServiceProxy(app), user(tmp_path, "reader"), "quotas")
    assert (code, out) == (1, "")
    # only the plugin's line: another test's logging handler may write to stderr as well
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert errors == [
        "error: the extender (service ops/ext:8888) answered 403: user "
        "system:serviceaccount:batch:reader may not list nodes in all namespaces: rbac"
    ]


OFF = {"enabled": False, "items": [], "pool": {}, "invalid": []}
NONE = {"enabled": True, "items": [], "pool": {}, "invalid": []}
INVALID = NONE | {"invalid": [{"namespace": "c", "name": "q", "reason": "min over max"}]}


@pytest.mark.parametrize(
    ("quotas", "shown"),
    [
        (OFF, "elastic quotas are off on this extender (--elastic-quota)\n"),
        (NONE, "no elastic quotas\n"),
        (INVALID, "no elastic quotas\nc/q: ignored: min over max\n"),
    ],
    ids=["off", "none", "invalid"],
)
def test_quotas_table_says_what_is_missing(quotas: dict[str, Any], shown: str) -> None:
    assert quotas_table(quotas) == shown


def test_quotas_table_without_max() -> None:
    memory = {"min": "1Gi", "max": None, "used": "512Mi", "borrowed": "0", "lent": "0"}
    item = {"namespace": "c", "borrower": False, "resources": {"memory": memory}}
    rows = [line.split() for line in quotas_table(NONE | {"items": [item]}).splitlines()]
    assert rows[1] == ["c", "memory", "512Mi", "1Gi", "none", "0", "0"]


def test_explain_goes_through_the_service_proxy() -> None:
    """The plugin's request path and headers as the API server's proxy receives them, and the
    explain and nodes tables of the answer."""
    seen: list[httpx.Request] = []
    answer = {
        "pod": "shop/web",
        "daemonset": False,
        "quota": {"rule": "no-quota", "message": "no elastic quota applies", "resources": []},
        "nodes": [
            {
                "node": "hot",
                "passed": False,
                "rejected_by": "cpu_usage_avg_5m",
                "reason": "Load[cpu_usage_avg_5m]=0.90000 of node[hot] is above 0.65",
                "placed": 0,
                "score": {"final": 1, "score": 10, "hot_value": 0, "hot_penalty": 0},
                "metrics": [
                    {
                        "metric": "cpu_usage_avg_5m",
                        "state": "fresh",
                        "value": 0.9,
                        "measured": 0.9,
                        "estimated": 0.0,
                        "age_seconds": 30,
                        "limit": 0.65,
                        "limit_from": "policy",
                        "decided": True,
                    }
                ],
            }
        ],
    }

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=answer)

    endpoint = KubeEndpoint(host="https://api.test")
    service = Service(namespace="ops", name="ext", port="8888")
    client = ExtenderClient(endpoint, service, token="t0k", transport=httpx.MockTransport(handler))
    result = client.explain_pod("shop", "web", ["hot"])
    assert seen[0].url.path == f"{PROXY}/v1/explain/shop/web"
    assert seen[0].url.params["nodes"] == "hot"
    assert seen[0].headers["X-Loadsched-Authorization"] == "Bearer t0k"
    table = explain_table(result)
    assert "rejected: cpu_usage_avg_5m" in table and "0.900 (30s) > 0.65 (policy)" in table
    assert "0.900 (30s)" in nodes_table(result)


REBALANCE_STATUS = {
    "roundAt": "2026-11-22T12:05:00Z",
    "dryRun": True,
    "nodes": {"over": 1, "waiting": 0, "held": 0, "stale": 0, "under": 2},
    "overThreshold": [
        {
            "node": "n1",
            "state": "over",
            "metrics": [
                {"metric": "cpu_usage_avg_5m", "value": 0.8, "high": 0.65, "low": 0.52, "rounds": 5}
            ],
        }
    ],
    "plans": [
        {
            "node": "n1",
            "metric": "cpu_usage_avg_5m",
            "value": 0.8,
            "high": 0.65,
            "overshoot": 1.2,
            "resource": "cpu",
            "moves": [
                {
                    "pod": "web/api-1",
                    "usage": 1.5,
                    "measured": True,
                    "target": "n2",
                    "valueAfter": 0.3875,
                }
            ],
            "unplaced": [],
        }
    ],
    "lastEvictions": [
        {
            "at": "2026-11-22T12:05:00Z",
            "pod": "web/api-1",
            "node": "n1",
            "target": "n2",
            "metric": "cpu_usage_avg_5m",
            "result": "dry-run",
            "detail": "",
        }
    ],
}


async def test_rebalance_shows_the_published_plan(
    make_client: ClientFactory, tmp_path: Path
) -> None:
    fake = QuotaCluster()
    client = await make_client(fake=fake, elastic_quota=True, dispatch_auth="tokenreview")
    app = await wait_ready(client)
    proxy = ServiceProxy(app)
    config = user(tmp_path, "writer")
    code, text = await plugin(proxy, config, "rebalance")
    assert code == 0, text
    assert text.startswith("no rebalancer status: no configmap default/loadsched-rebalance")
    fake.configmaps.put(
        "default", "loadsched-rebalance", {"status.json": json.dumps(REBALANCE_STATUS)}
    )
    code, text = await plugin(proxy, config, "rebalance")
    assert code == 0, text
    lines = [line.split() for line in text.splitlines()]
    assert text.startswith("rebalancer DRY RUN: nothing is evicted")
    assert ["n1", "over", "cpu_usage_avg_5m", "0.800", "0.65", "5"] in lines
    assert ["n1", "web/api-1", "1.5", "n2", "0.388"] in lines
    assert ["2026-11-22T12:05:00Z", "web/api-1", "n1", "n2", "cpu_usage_avg_5m", "dry-run"] in lines
    code, raw = await plugin(proxy, config, "-o", "json", "rebalance")
    assert json.loads(raw) == {"published": True, **REBALANCE_STATUS}
