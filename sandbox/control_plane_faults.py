"""Faults on the sandbox's control plane and what is read back from it: restart etcd or
kube-apiserver, compact etcd's history, read kube-apiserver's and kube-scheduler's
``/metrics`` as a cluster admin."""

from __future__ import annotations

import base64
import json
import signal
import ssl
import urllib.request
from typing import Any

from sandbox.kubeconfigs import Kubeconfigs
from sandbox.loopback import http_ok
from sandbox.processes import Supervisor, wait_for
from sandbox.specs import SchedulerHandle


class ControlPlaneFaults(Kubeconfigs):
    """Restarts etcd and kube-apiserver under ``supervisor`` and compacts etcd at
    ``etcd_url``; reads the metrics of kube-apiserver and of the kube-schedulers in
    ``schedulers``."""

    supervisor: Supervisor
    etcd_url: str
    schedulers: dict[str, SchedulerHandle]

    def restart_apiserver(self, signum: int = signal.SIGTERM) -> None:
        """End kube-apiserver with ``signum`` and start it again on the same port and etcd;
        return once it is ready."""
        self.supervisor.restart("kube-apiserver", signum)
        self.wait_apiserver_ready()

    def wait_apiserver_ready(self, timeout: float = 90) -> None:
        context = self.admin_context()
        wait_for(
            lambda: http_ok(f"{self.api_url}/readyz", context),
            timeout=timeout,
            what="kube-apiserver /readyz",
            guard=self.supervisor,
        )

    def restart_etcd(self, signum: int = signal.SIGTERM) -> None:
        """End etcd with ``signum`` and start it again on the same ports and data directory;
        return once kube-apiserver is ready on it again."""
        self.supervisor.restart("etcd", signum)
        wait_for(lambda: http_ok(f"{self.etcd_url}/health"), timeout=30, what="etcd /health")
        self.wait_apiserver_ready()

    def compact_etcd(self) -> int:
        """Compact etcd's history up to its current revision (what kube-apiserver's own
        compactor does every 5 minutes); the revision compacted to."""
        key = base64.b64encode(b"/registry").decode()
        head = _post_json(f"{self.etcd_url}/v3/kv/range", {"key": key, "count_only": True})
        revision = int(head["header"]["revision"])
        _post_json(f"{self.etcd_url}/v3/kv/compaction", {"revision": revision, "physical": True})
        return revision

    def admin_context(self) -> ssl.SSLContext:
        """TLS to kube-apiserver as a cluster admin (for its /metrics and /readyz)."""
        assert self.ca is not None
        files = self.ca.issue(
            "fault-probe", "loadsched-fault-probe", organizations=("system:masters",)
        )
        context = ssl.create_default_context(cafile=str(self.ca.files.cert))
        context.load_cert_chain(str(files.cert), str(files.key))
        return context

    def scheduler_metrics(self, name: str) -> str:
        """kube-scheduler ``name``'s ``/metrics`` (Prometheus text), asked as a cluster admin:
        it delegates the check to the API server and may refuse (403) until it has read the
        authentication ConfigMap, so it is asked again for up to 30 s. Its serving
        certificate is its own, self-signed."""
        context = self.admin_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        url = f"https://127.0.0.1:{self.schedulers[name].port}/metrics"
        text = ""

        def read() -> bool:
            nonlocal text
            with urllib.request.urlopen(url, timeout=10, context=context) as response:
                text = response.read().decode()
            return True

        wait_for(read, timeout=30, what=f"kube-scheduler {name} /metrics", interval=1)
        return text

    def apiserver_requests(self, verb: str) -> dict[str, int]:
        """``apiserver_request_total`` for ``verb`` per resource since kube-apiserver (re)started."""
        request = urllib.request.Request(f"{self.api_url}/metrics")
        with urllib.request.urlopen(request, timeout=10, context=self.admin_context()) as response:
            text = response.read().decode()
        counts: dict[str, int] = {}
        for line in text.splitlines():
            if not line.startswith("apiserver_request_total{") or f'verb="{verb}"' not in line:
                continue
            labels, value = line.rsplit(" ", 1)
            resource = (
                labels.split('resource="', 1)[1].split('"', 1)[0] if 'resource="' in labels else ""
            )
            counts[resource] = counts.get(resource, 0) + int(float(value))
        return counts


def _post_json(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        answer: dict[str, Any] = json.loads(response.read())
    return answer
