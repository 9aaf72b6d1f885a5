"""/v1/explain and kubectl-loadsched on the real control plane.

The extender runs as a real process; its explain answer is compared with what its own
/filter and /prioritize answer for the same pod; the API server reviews the tokens (401, 403).
The plugin reaches the extender through kube-apiserver's service proxy: the sandbox has no
kube-proxy and no pod network, and kube-apiserver refuses loopback endpoints and proxies only
to an endpoint backed by a pod with that IP, so the extender listens on this machine's own
address, a Pod object carries that address in its status, and a Service without selector
has an Endpoints object pointing at it. The extender runs with ``--elastic-quota``, so the
plugin's ``quotas`` (the status report's, which needs ``list nodes``) shows a real quota.
"""

from __future__ import annotations

import io
import json
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
import yaml
from kubernetes import client as k8s

from kubectl_loadsched.cli import main as plugin
from sandbox.build import ROOT
from sandbox.cluster import Sandbox
from sandbox.loopback import free_port, http_ok
from sandbox.processes import wait_for
from shared.kube.paths import ELASTIC_QUOTAS
from tests.e2e.conftest import NODES, OVERLOADED, RULES, load_annotations

pytestmark = pytest.mark.e2e

NAMESPACE = "explain"
SERVICE = "loadsched-extender"
STATUS_VIEWER = "explain-e2e-status-viewer"
"""The ClusterRole (and its binding) that lets the viewer ``list nodes``: ``/v1/status``."""
CRD = ROOT / "charts" / "loadsched" / "crds" / "elasticquota.yaml"
QUOTA: dict[str, Any] = {
    "apiVersion": ELASTIC_QUOTAS.api_version,
    "kind": "ElasticQuota",
    "metadata": {"name": "explain-quota"},
    "spec": {"min": {"cpu": "1"}, "max": {"cpu": "2"}},
}
# The Kubernetes clients below are typed Any: they take dict bodies, which their annotations
# (model classes only) do not allow.


def host_address() -> str:
    """This machine's address toward the outside (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.1", 9))
        address: str = s.getsockname()[0]
    assert not address.startswith("127."), "needs a non-loopback address"
    return address


def token(sandbox: Sandbox, account: str) -> str:
    core: Any = sandbox.core
    core.create_namespaced_service_account(NAMESPACE, {"metadata": {"name": account}})
    request = core.create_namespaced_service_account_token(
        account, NAMESPACE, {"spec": {"expirationSeconds": 3600}}
    )
    return str(request.status.token)


def grant(sandbox: Sandbox, account: str) -> None:
    """``get pods`` (explain's own check), ``list nodes`` (the status report's) and ``get
    services/proxy`` on the extender's Service (the API server's)."""
    rbac: Any = k8s.RbacAuthorizationV1Api(sandbox.api)
    rbac.create_cluster_role(
        {
            "metadata": {"name": STATUS_VIEWER},
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}],
        }
    )
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": STATUS_VIEWER},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": STATUS_VIEWER,
            },
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}],
        }
    )
    rbac.create_namespaced_role(
        NAMESPACE,
        {
            "metadata": {"name": "explainer"},
            "rules": [
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
                {
                    "apiGroups": [""],
                    "resources": ["services/proxy"],
                    "resourceNames": [f"http:{SERVICE}:8888"],  # as the proxy path names it
                    "verbs": ["get", "create"],
                },
            ],
        },
    )
    rbac.create_namespaced_role_binding(
        NAMESPACE,
        {
            "metadata": {"name": "explainer"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "explainer",
            },
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}],
        },
    )


def expose(sandbox: Sandbox, address: str, port: int) -> None:
    """A Service whose one endpoint is the extender on ``address:port``."""
    core: Any = sandbox.core
    core.create_namespaced_pod(
        NAMESPACE,
        {
            "metadata": {"name": "extender-endpoint"},
            "spec": {"schedulerName": "none", "containers": [{"name": "x", "image": "x"}]},
        },
    )
    # Deliberately faked: the endpoint is loadsched's own process on the host, which no
    # kubelet runs, so the pod only carries its address.
    core.patch_namespaced_pod_status(
        "extender-endpoint", NAMESPACE, {"status": {"podIP": address, "podIPs": [{"ip": address}]}}
    )
    core.create_namespaced_service(
        NAMESPACE,
        {
            "metadata": {"name": SERVICE},
            "spec": {"ports": [{"name": "http", "port": 8888, "targetPort": port}]},
        },
    )
    core.create_namespaced_endpoints(
        NAMESPACE,
        {
            "metadata": {"name": SERVICE},
            "subsets": [
                {
                    "addresses": [
                        {
                            "ip": address,
                            "targetRef": {
                                "kind": "Pod",
                                "name": "extender-endpoint",
                                "namespace": NAMESPACE,
                            },
                        }
                    ],
                    "ports": [{"name": "http", "port": port}],
                }
            ],
        },
    )


@pytest.fixture(scope="module")
def setup(sandbox: Sandbox) -> Iterator[dict[str, Any]]:
    address, port = host_address(), free_port()
    core: Any = sandbox.core
    core.create_namespace({"metadata": {"name": NAMESPACE}})
    sandbox.install_crd(CRD)
    argv = [
        sys.executable,
        "-m",
        "extender",
        "--elastic-quota",
        "--kubeconfig",
        str(sandbox.kubeconfig),
        "--host",
        address,
        "--port",
        str(port),
    ]
    process = sandbox.supervisor.start("explain-extender", argv, cwd=ROOT)
    url = f"http://{address}:{port}"
    wait_for(lambda: http_ok(f"{url}/readyz"), timeout=60, what="extender /readyz")
    for spec in NODES:
        usage = 0.9 if spec.name in OVERLOADED else 0.2 + 0.05 * NODES.index(spec)
        sandbox.annotate_node(spec.name, load_annotations(usage))
    core.create_namespaced_pod(
        NAMESPACE,
        {
            "metadata": {"name": "web"},
            "spec": {
                "schedulerName": "nobody",
                "containers": [
                    {"name": "web", "image": "x", "resources": {"requests": {"cpu": "200m"}}}
                ],
            },
        },
    )
    viewer, stranger = token(sandbox, "viewer"), token(sandbox, "stranger")
    grant(sandbox, "viewer")
    expose(sandbox, address, port)
    yield {
        "url": url,
        "viewer": viewer,
        "stranger": stranger,
        "viewer_kubeconfig": sandbox.write_token_kubeconfig("viewer", viewer),
        "stranger_kubeconfig": sandbox.write_token_kubeconfig("stranger", stranger),
    }
    sandbox.supervisor.stop(process)
    core.delete_namespace(NAMESPACE)
    rbac = k8s.RbacAuthorizationV1Api(sandbox.api)
    rbac.delete_cluster_role_binding(STATUS_VIEWER)
    rbac.delete_cluster_role(STATUS_VIEWER)
    for spec in NODES:  # the session's sandbox goes on: no node left overloaded
        sandbox.annotate_node(spec.name, dict.fromkeys(RULES.keys))


def bearer(value: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {value}"}


def test_explain_agrees_with_filter_and_prioritize(setup: dict[str, Any]) -> None:
    url = setup["url"]
    answer = httpx.get(f"{url}/v1/explain/{NAMESPACE}/web", headers=bearer(setup["viewer"]))
    assert answer.status_code == 200, answer.text
    explained = {n["node"]: n for n in answer.json()["nodes"]}
    body = {"metadata": {"name": "web", "namespace": NAMESPACE}}
    names = [n.name for n in NODES]
    args: dict[str, Any] = {
        "Pod": body | {"spec": {"containers": [{"resources": {"requests": {"cpu": "200m"}}}]}}
    }
    args["NodeNames"] = names
    filtered = httpx.post(f"{url}/filter", json=args).json()
    scores = {h["Host"]: h["Score"] for h in httpx.post(f"{url}/prioritize", json=args).json()}
    # an answer that passes nodes lists no refusal; one about the others alone lists them all
    assert filtered["FailedAndUnresolvableNodes"] == {}
    left_out = [name for name in names if name not in filtered["NodeNames"]]
    refused = httpx.post(f"{url}/filter", json=args | {"NodeNames": left_out}).json()
    assert refused["NodeNames"] == [] and set(refused["FailedAndUnresolvableNodes"]) == set(
        left_out
    )
    for name in names:
        row = explained[name]
        assert row["passed"] == (name in filtered["NodeNames"]), name
        assert row["reason"] == refused["FailedAndUnresolvableNodes"].get(name)
        assert row["score"]["final"] == scores[name], name
    for name in OVERLOADED:
        decided = [m["metric"] for m in explained[name]["metrics"] if m["decided"]]
        assert decided == [explained[name]["rejected_by"]] == ["cpu_usage_avg_5m"]
    assert {n["node"] for n in answer.json()["nodes"][: len(names) - len(OVERLOADED)]}.isdisjoint(
        OVERLOADED
    )


def test_tokens_are_reviewed_by_the_cluster(setup: dict[str, Any]) -> None:
    url = f"{setup['url']}/v1/explain/{NAMESPACE}/web"
    assert httpx.get(url).status_code == 401
    assert httpx.get(url, headers=bearer("not-a-token")).status_code == 401
    assert httpx.get(url, headers=bearer(setup["stranger"])).status_code == 403


def run_plugin(kubeconfig: str, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    code = plugin(
        ["--kubeconfig", str(kubeconfig), "--service-namespace", NAMESPACE, *args], out=out
    )
    return code, out.getvalue()


def test_plugin_through_the_service_proxy(setup: dict[str, Any], sandbox: Sandbox) -> None:
    code, out = run_plugin(
        setup["viewer_kubeconfig"], "-o", "json", "explain", "web", "-n", NAMESPACE
    )
    assert code == 0, out
    proxied = json.loads(out)
    direct = httpx.get(
        f"{setup['url']}/v1/explain/{NAMESPACE}/web", headers=bearer(setup["viewer"])
    ).json()
    assert [(n["node"], n["passed"], n["score"]["final"]) for n in proxied["nodes"]] == [
        (n["node"], n["passed"], n["score"]["final"]) for n in direct["nodes"]
    ]
    code, table = run_plugin(setup["viewer_kubeconfig"], "nodes", "-n", NAMESPACE)
    assert code == 0 and all(spec.name in table for spec in NODES), table
    assert "rejected: cpu_usage_avg_5m" in table
    # no services/proxy for this one: the API server refuses before the extender is asked
    code, _ = run_plugin(setup["stranger_kubeconfig"], "explain", "web", "-n", NAMESPACE)
    assert code == 1
    code, _ = run_plugin(setup["stranger_kubeconfig"], "quotas")
    assert code == 1
    with elastic_quota(sandbox):
        check_quotas(setup)


@contextmanager
def elastic_quota(sandbox: Sandbox) -> Iterator[None]:
    """:data:`QUOTA` in the namespace while the block runs (the sum of every quota's ``min`` is
    cluster-wide: none is left for the tests after)."""
    custom: Any = k8s.CustomObjectsApi(sandbox.api)
    where = (ELASTIC_QUOTAS.group, ELASTIC_QUOTAS.version, NAMESPACE, ELASTIC_QUOTAS.plural)
    custom.create_namespaced_custom_object(*where, QUOTA)
    try:
        yield
    finally:
        custom.delete_namespaced_custom_object(*where, QUOTA["metadata"]["name"])


def check_quotas(setup: dict[str, Any]) -> None:
    """``quotas`` through the proxy shows what ``/v1/status`` reports, as YAML and as a table
    with the borrowed and lent columns."""
    viewer = setup["viewer_kubeconfig"]

    def shown() -> bool:
        code, out = run_plugin(viewer, "-o", "yaml", "quotas", "-n", NAMESPACE)
        return code == 0 and bool(yaml.safe_load(out)["items"])

    wait_for(shown, timeout=30, what=f"namespace {NAMESPACE}'s quota in kubectl loadsched quotas")
    code, out = run_plugin(viewer, "-o", "yaml", "quotas", "-n", NAMESPACE)
    proxied = yaml.safe_load(out)
    direct = httpx.get(f"{setup['url']}/v1/status", headers=bearer(setup["viewer"]))
    assert code == 0 and direct.status_code == 200, direct.text
    (expected,) = [q for q in direct.json()["quotas"]["items"] if q["namespace"] == NAMESPACE]
    assert proxied["items"] == [expected]
    cpu = expected["resources"]["cpu"]
    assert (cpu["min"], cpu["max"]) == ("1", "2")
    code, table = run_plugin(viewer, "quotas")
    rows = [line.split() for line in table.splitlines()]
    assert code == 0 and rows[0] == "NAMESPACE RESOURCE USED MIN MAX BORROWED LENT".split()
    assert [NAMESPACE, "cpu", cpu["used"], "1", "2", cpu["borrowed"], cpu["lent"]] in rows
