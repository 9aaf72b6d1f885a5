"""The scheduler verbs over HTTPS with client certificates verified (``--tls-client-ca-file``),
called by the real kube-scheduler: with a client certificate in its extender ``tlsConfig``
(certFile, keyFile, caFile) pods are placed through the extender; with none, its calls are
refused and, the extender not being ignorable, pods wait; clients without a certificate, or
with one from another CA, are refused."""

from __future__ import annotations

import ssl
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from sandbox.build import ROOT
from sandbox.cluster import Sandbox
from sandbox.loopback import free_port, http_ok
from sandbox.pki import MutualTLS, mutual_tls
from sandbox.processes import wait_for
from sandbox.specs import pod_body
from tests.e2e.conftest import LOADS, OVERLOADED
from tests.e2e.scrape import exported

pytestmark = pytest.mark.e2e


def extender_entry(url: str, tls: dict[str, str]) -> dict[str, Any]:
    """kube-scheduler's extender entry: names-only, not ignorable (a refused call leaves the
    pod Pending rather than scheduled without the extender)."""
    return {
        "urlPrefix": url,
        "filterVerb": "filter",
        "prioritizeVerb": "prioritize",
        "preemptVerb": "preempt",
        "weight": 5,
        "nodeCacheCapable": True,
        "ignorable": False,
        "enableHTTPS": True,
        "tlsConfig": tls,
        "httpTimeout": "5s",
    }


@pytest.fixture(scope="module")
def tls(sandbox: Sandbox) -> MutualTLS:
    return mutual_tls(sandbox.workdir / "extender-mtls")


@pytest.fixture(scope="module")
def https_extender(sandbox: Sandbox, tls: MutualTLS) -> Iterator[str]:
    """The extender serving HTTPS and verifying clients against ``tls.ca``."""
    port = free_port()
    kubeconfig = sandbox.service_kubeconfigs.get("extender", sandbox.kubeconfig)
    process = sandbox.supervisor.start(
        "extender-mtls",
        [
            sys.executable,
            "-m",
            "extender",
            "--kubeconfig",
            str(kubeconfig),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--tls-cert-file",
            str(tls.server.cert),
            "--tls-key-file",
            str(tls.server.key),
            "--tls-client-ca-file",
            str(tls.ca),
        ],
        cwd=ROOT,
    )
    url = f"https://127.0.0.1:{port}"
    probe = ssl.create_default_context(cafile=str(tls.ca))
    # /readyz needs no client certificate: the kubelet's probes present none
    wait_for(
        lambda: http_ok(f"{url}/readyz", probe),
        timeout=60,
        what="extender-mtls /readyz over HTTPS",
        guard=sandbox.supervisor,
    )
    yield url
    sandbox.supervisor.stop(process)


def schedule(sandbox: Sandbox, scheduler: str, batch: str, count: int) -> None:
    sandbox.create_pods(
        pod_body(f"{batch}-{i}", scheduler_name=scheduler, labels={"batch": batch})
        for i in range(count)
    )


def filter_answers(url: str, tls: MutualTLS, code: str) -> float:
    """``loadsched_extender_responses_total`` for filter with ``code``, read from /metrics
    (public: no client certificate). The 403s of the certificate check are not counted
    there: they never reach the verbs."""
    trusted = ssl.create_default_context(cafile=str(tls.ca))
    return exported(
        url, "loadsched_extender_responses_total", verify=trusted, verb="filter", code=code
    )


def test_kube_scheduler_with_a_client_certificate_schedules_through_the_extender(
    sandbox: Sandbox,
    https_extender: str,
    tls: MutualTLS,
    set_loads: Callable[[dict[str, float]], None],
) -> None:
    set_loads(LOADS)
    time.sleep(1)  # the extender's node watch sees the annotations
    before = filter_answers(https_extender, tls, "200")
    sandbox.start_scheduler(
        "mtls",
        scheduler_name="loadsched-mtls",
        extra={
            "extenders": [
                extender_entry(
                    https_extender,
                    {
                        "caFile": str(tls.ca),
                        "certFile": str(tls.client.cert),
                        "keyFile": str(tls.client.key),
                    },
                )
            ]
        },
    )
    try:
        schedule(sandbox, "loadsched-mtls", "mtls", 8)
        placed = sandbox.wait_bound("batch=mtls", 8, timeout=60)
    finally:
        sandbox.delete_pods("batch=mtls")
        sandbox.stop_scheduler("mtls")
    assert not set(placed.values()) & OVERLOADED, placed
    assert filter_answers(https_extender, tls, "200") >= before + 8


def test_kube_scheduler_without_a_client_certificate_is_refused(
    sandbox: Sandbox, https_extender: str, tls: MutualTLS
) -> None:
    before = filter_answers(https_extender, tls, "200")
    sandbox.start_scheduler(
        "mtls-anonymous",
        scheduler_name="loadsched-mtls-anonymous",
        extra={"extenders": [extender_entry(https_extender, {"caFile": str(tls.ca)})]},
    )
    try:
        schedule(sandbox, "loadsched-mtls-anonymous", "anonymous", 1)

        def refused() -> bool:
            events = sandbox.core.list_namespaced_event(
                "default", field_selector="involvedObject.name=anonymous-0"
            ).items
            messages = [e.message or "" for e in events if e.reason == "FailedScheduling"]
            return any("code 403" in m for m in messages)

        # kube-scheduler's message for a non-200 answer: "failed filter with extender at
        # URL ..., code 403"
        wait_for(refused, timeout=60, what="FailedScheduling naming the extender's 403")
        assert sandbox.placements("batch=anonymous") == {"anonymous-0": None}
    finally:
        sandbox.delete_pods("batch=anonymous")
        sandbox.stop_scheduler("mtls-anonymous")
    assert filter_answers(https_extender, tls, "200") == before


def test_clients_without_a_certificate_from_the_ca_are_refused(
    sandbox: Sandbox, https_extender: str, tls: MutualTLS
) -> None:
    body = b'{"Pod":{"metadata":{"name":"p","namespace":"default"}},"NodeNames":["node-1"]}'
    trusted = ssl.create_default_context(cafile=str(tls.ca))
    anonymous = httpx.post(f"{https_extender}/filter", content=body, verify=trusted)
    assert anonymous.status_code == 403
    stranger = mutual_tls(sandbox.workdir / "stranger-mtls")
    impostor = ssl.create_default_context(cafile=str(tls.ca))
    impostor.load_cert_chain(stranger.client.cert, stranger.client.key)
    with pytest.raises(httpx.TransportError):
        httpx.post(f"{https_extender}/filter", content=body, verify=impostor)
    ours = ssl.create_default_context(cafile=str(tls.ca))
    ours.load_cert_chain(tls.client.cert, tls.client.key)
    answer = httpx.post(f"{https_extender}/filter", content=body, verify=ours)
    assert answer.status_code == 200 and answer.json()["NodeNames"] is not None
