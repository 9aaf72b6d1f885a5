"""Resource limits of the extender, measured as it really runs: a ``loadsched-extender``
process listing and watching a (fake) API server over HTTP.

1. Memory and start-up at size: 10,000 nodes (real-looking: labels, conditions, 40 images,
   about 10 KB each) and 100,000 pods (about 3 KB each: managedFields, status, owner) in its
   caches, serving both rooms with elastic quotas (every cache of pods, nodes, quotas, Jobs
   and CronJobs filled), beside the same process with empty caches, in one run. Printed: RSS
   once ready and its peak (``VmHWM``) during the initial LISTs, what the caches cost per node
   and per pod, and start-up: process start to ``/healthz`` (imports) and to ``/readyz``
   200 (initial LISTs done). Target: RSS ≤ 1 GiB.
2. Slow clients: names-only filter and prioritize latency against the same extender, alone
   and while 1,000 idle keep-alive connections and 10 clients sending a body one byte a
   second hang on, in alternating blocks of one run; the ratio of the two.

    .venv/bin/python -m bench.memory [--quick]   # --quick: 1,000 nodes and 10,000 pods

``--tracemalloc`` also runs the sized extender under ``-X tracemalloc`` and prints its 25
largest allocation sites once ready.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx

from bench.extender import free_port, percentile, server_ms
from bench.fake_apiserver import FakeNodeAPI
from bench.results import measured, record
from bench.targets import target
from shared.kube.paths import CRONJOBS, ELASTIC_QUOTAS, JOBS, NODES, PODS
from shared.load_model import LoadRules
from shared.policy import default_policy
from tests import payloads

ROOT = Path(__file__).resolve().parents[1]
RSS = target("memory", "rss")
NAMESPACES = 1000
IDLE = 1000
TRICKLERS = 10
TEMPLATES = """templates:
  - name: report
    namespace: team-0000
    image: registry.example/reports:1
    allowedKeys: {names: [REPORT_ID]}
"""


def pod(index: int, node: str) -> dict[str, Any]:
    """A bound pod of a ReplicaSet as the API server lists it (about 3 KB of JSON)."""
    namespace = f"team-{index % NAMESPACES:04d}"
    name = f"web-{index:06d}-7d9c8b6f5-x{index % 97:02d}"
    uid = f"{index:08x}-0000-4000-8000-{index:012x}"
    stamp = "2026-11-22T10:00:00Z"
    return {
        "metadata": {
            "name": name,
            "generateName": f"web-{index:06d}-7d9c8b6f5-",
            "namespace": namespace,
            "uid": uid,
            "resourceVersion": str(1000 + index),
            "creationTimestamp": stamp,
            "labels": {"app": "web", "pod-template-hash": "7d9c8b6f5", "team": namespace},
            "annotations": {"kubectl.kubernetes.io/restartedAt": stamp},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"web-{index:06d}-7d9c8b6f5",
                    "uid": f"rs-{uid}",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": [
                {
                    "manager": "kube-controller-manager",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": stamp,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {
                        "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                        "f:spec": {"f:containers": {'k:{"name":"web"}': {".": {}}}},
                    },
                }
            ],
        },
        "spec": {
            "containers": [
                {
                    "name": "web",
                    "image": "registry.example/web:1.2.3",
                    "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                    "env": [{"name": "MODE", "value": "production"}],
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "128Mi"},
                        "limits": {"memory": "256Mi"},
                    },
                    "volumeMounts": [
                        {
                            "name": "kube-api-access",
                            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                            "readOnly": True,
                        }
                    ],
                    "terminationMessagePath": "/dev/termination-log",
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
            "restartPolicy": "Always",
            "schedulerName": "loadsched",
            "nodeName": node,
            "serviceAccountName": "default",
            "priority": 0,
            "preemptionPolicy": "PreemptLowerPriority",
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
            ],
            "volumes": [{"name": "kube-api-access", "projected": {"defaultMode": 420}}],
        },
        "status": {
            "phase": "Running",
            "podIP": f"10.{index >> 16 & 255}.{index >> 8 & 255}.{index & 255}",
            "startTime": stamp,
            "qosClass": "Burstable",
            "conditions": [
                {"type": kind, "status": "True", "lastTransitionTime": stamp}
                for kind in ("PodReadyToStartContainers", "Initialized", "Ready", "PodScheduled")
            ],
            "containerStatuses": [
                {
                    "name": "web",
                    "ready": True,
                    "restartCount": 0,
                    "image": "registry.example/web:1.2.3",
                    "imageID": "registry.example/web@sha256:" + "ab" * 32,
                    "containerID": "containerd://" + f"{index:064x}",
                    "started": True,
                    "state": {"running": {"startedAt": stamp}},
                }
            ],
        },
    }


class PageServer:
    """A stand-in API server whose LIST pages (500 items, as the extender's watches ask) are
    encoded once in advance, and whose watches stay idle: serving a page costs only its
    transfer, so start-up measures the extender rather than the server."""

    PAGE = 500

    def __init__(self, collections: dict[str, Iterable[dict[str, Any]]]) -> None:
        self.pages: dict[tuple[str, str], bytes] = {}
        for path, items in collections.items():
            chunk: list[dict[str, Any]] = []
            start = 0
            for item in items:
                chunk.append(item)
                if len(chunk) == self.PAGE:
                    self._add(path, start, chunk, more=True)
                    start += self.PAGE
                    chunk = []
            self._add(path, start, chunk, more=False)
        self.stop = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                url = urlparse(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                if query.get("watch"):
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    self.wfile.flush()
                    server.stop.wait(float(query.get("timeoutSeconds", "300")))
                    self.wfile.write(b"0\r\n\r\n")
                    return
                body = server.pages.get((url.path, query.get("continue", "")))
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)

    def _add(self, path: str, start: int, items: list[dict[str, Any]], *, more: bool) -> None:
        meta: dict[str, Any] = {"resourceVersion": "1"}
        if more:
            meta["continue"] = str(start + self.PAGE)
        page = {"kind": "List", "metadata": meta, "items": items}
        self.pages[(path, str(start) if start else "")] = json.dumps(page).encode()

    @property
    def url(self) -> str:
        host, port = self.http.server_address[:2]
        return f"http://{host!s}:{port}"

    def kubeconfig(self, path: Path) -> Path:
        path.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: bench\n"
            f"clusters: [{{name: bench, cluster: {{server: '{self.url}'}}}}]\n"
            "users: [{name: bench, user: {token: bench}}]\n"
            "contexts: [{name: bench, context: {cluster: bench, user: bench}}]\n"
        )
        return path

    def __enter__(self) -> PageServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.http.shutdown()
        self.http.server_close()


def quota(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": "quota", "namespace": namespace, "uid": f"q-{namespace}"},
        "spec": {"min": {"cpu": "40", "memory": "80Gi"}, "max": {"cpu": "60"}},
    }


def rss(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of ``pid`` in bytes."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) * 1024
    return fields["VmRSS"], fields["VmHWM"]


def start(
    kubeconfig: Path, templates: Path, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], str, float, float]:
    """The extender serving both rooms with elastic quotas; its URL, and seconds from process
    start to /healthz 200 and to /readyz 200."""
    port = free_port()
    started = time.monotonic()
    process = subprocess.Popen(
        [
            sys.executable,
            *(["-X", "tracemalloc=1"] if env else []),
            "-m",
            "extender",
            "--port",
            str(port),
            "--kubeconfig",
            str(kubeconfig),
            "--elastic-quota",
            "--no-requeue",
            "--job-templates",
            str(templates),
            "--dispatch-auth",
            "none",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )
    url = f"http://127.0.0.1:{port}"
    up = ready = 0.0
    deadline = started + 900
    while time.monotonic() < deadline and not ready:
        if process.poll() is not None:
            raise SystemExit(f"the extender exited with {process.returncode}")
        try:
            if not up and httpx.get(f"{url}/healthz", timeout=5).status_code == 200:
                up = time.monotonic() - started
            if up and httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                ready = time.monotonic() - started
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    if not ready:
        process.kill()
        raise SystemExit("the extender did not become ready")
    return process, url, up, ready


def metric(url: str, name: str) -> float:
    for line in httpx.get(f"{url}/metrics", timeout=30).text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise SystemExit(f"{name} not in /metrics")


def list_floor(api: PageServer) -> float:
    """Seconds for a bare client to fetch every page the server holds, one after the other,
    without decoding them: what serving and transferring the LISTs costs on its own."""
    started = time.monotonic()
    with httpx.Client(base_url=api.url, timeout=120) as client:
        for path, token in api.pages:
            client.get(path, params={"limit": str(api.PAGE), "continue": token}).read()
    return time.monotonic() - started


def settled_rss(pid: int) -> tuple[int, int]:
    """RSS once it stops moving (the caches built, the LIST buffers gone)."""
    last = -1
    current = rss(pid)
    for _ in range(20):
        time.sleep(0.5)
        current = rss(pid)
        if abs(current[0] - last) < 1 << 20:
            break
        last = current[0]
    return current


def mib(value: float) -> str:
    return f"{value / (1 << 20):7.1f} MiB"


def memory_and_startup(nodes_count: int, pods_count: int, trace: bool) -> tuple[bool, str]:
    rules = LoadRules.from_policy(default_policy())
    now = datetime.now(UTC)
    print(f"generating {nodes_count} nodes ...", flush=True)
    nodes = payloads.cluster(rules, nodes_count, now)
    names = [n["metadata"]["name"] for n in nodes]
    others: dict[str, Any] = {
        PODS.path(): (pod(i, names[i % len(names)]) for i in range(pods_count)),
        ELASTIC_QUOTAS.path(): [quota(f"team-{i:04d}") for i in range(NAMESPACES)],
        JOBS.path(): [],
        CRONJOBS.path(): [],
    }
    empty: dict[str, Any] = {NODES.path(): [], PODS.path(): [], ELASTIC_QUOTAS.path(): []}
    empty |= {JOBS.path(): [], CRONJOBS.path(): []}
    print(f"encoding {pods_count} pods ...", flush=True)
    sized = PageServer({NODES.path(): nodes, **others})
    del nodes, others
    rows: list[tuple[str, float, float, int, int, float, float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        templates = Path(tmp) / "templates.yaml"
        templates.write_text(TEMPLATES)
        for label, api in (
            ("empty caches", PageServer(empty)),
            (f"{nodes_count} nodes, {pods_count} pods", sized),
        ):
            with api:
                kubeconfig = api.kubeconfig(Path(tmp) / f"kubeconfig-{len(rows)}")
                process, url, up, ready = start(kubeconfig, templates)
                try:
                    cached_nodes = metric(url, "loadsched_extender_node_cache_nodes")
                    cached_pods = metric(url, "loadsched_extender_quota_cached_pods")
                    resident, peak = settled_rss(process.pid)
                finally:
                    process.terminate()
                    process.wait(30)
                floor = list_floor(api)
                rows.append((label, up, ready, resident, peak, cached_nodes, cached_pods, floor))
                if trace and api is sized:
                    print(top_allocations(kubeconfig, templates, Path(tmp) / "top.txt"))
    print(
        f"\n{'extender':<28} {'cached nodes':>12} {'cached pods':>11} {'/healthz':>9} "
        f"{'/readyz':>8} {'RSS':>12} {'peak RSS':>12}"
    )
    for label, up, ready, resident, peak, cached_nodes, cached_pods, _ in rows:
        print(
            f"{label:<28} {cached_nodes:12.0f} {cached_pods:11.0f} {up:8.2f}s {ready:7.2f}s "
            f"{mib(resident)} {mib(peak)}"
        )
    base, row = rows[0], rows[1]
    assert row[5] == nodes_count and row[6] == pods_count, "caches not filled"
    lists = row[2] - row[1]
    print(
        f"caches: {mib(row[3] - base[3]).strip()} over the empty process; "
        f"initial LISTs: {lists:.2f}s after /healthz, against {row[7]:.2f}s for a bare "
        f"client to fetch the same pages, undecoded (ratio {lists / row[7]:.2f})"
    )
    worst = max(row[3], row[4])
    record(
        "memory", [measured(RSS, worst, name=f"{RSS.what}: {nodes_count} nodes, {pods_count} pods")]
    )
    return not RSS.counts(worst), (
        f"target: RSS {RSS.sign} {mib(RSS.bound).strip()} with {nodes_count} nodes and "
        f"{pods_count} pods: {RSS.judge(worst)} "
        f"(RSS {mib(row[3]).strip()}, peak {mib(row[4]).strip()}; "
        f"ready {row[2]:.1f}s after start)"
    )


def top_allocations(kubeconfig: Path, templates: Path, report: Path) -> str:
    """The extender's 25 largest allocation sites once ready, under tracemalloc."""
    env = _trace_env({"LOADSCHED_TRACEMALLOC_TOP": str(report)})
    process, _, _, _ = start(kubeconfig, templates, env=env)
    process.send_signal(signal.SIGUSR1)
    for _ in range(600):
        if report.exists() and report.stat().st_size:
            break
        time.sleep(0.1)
    process.terminate()
    process.wait(30)
    return report.read_text() if report.exists() else "no tracemalloc report"


def _trace_env(env: dict[str, str]) -> dict[str, str]:
    """The child's environment for ``--tracemalloc``: a ``sitecustomize`` module first on its
    path installs a SIGUSR1 handler that writes the 25 largest allocation sites to the file
    ``LOADSCHED_TRACEMALLOC_TOP`` names."""
    hook = Path(tempfile.mkdtemp()) / "sitecustomize.py"
    hook.write_text(
        "import os, signal, tracemalloc\n"
        "def _dump(*_):\n"
        "    snap = tracemalloc.take_snapshot()\n"
        "    top = snap.statistics('lineno')[:25]\n"
        "    lines = [f'{s.size / 2**20:8.1f} MiB {s.count:9d} {s.traceback}' for s in top]\n"
        "    open(os.environ['LOADSCHED_TRACEMALLOC_TOP'], 'w').write('\\n'.join(lines))\n"
        "signal.signal(signal.SIGUSR1, _dump)\n"
    )
    return {**env, "PYTHONPATH": f"{hook.parent}:{ROOT}"}


def trickle(address: tuple[str, int], body: bytes, stop: threading.Event) -> None:
    """Sends a filter request's body one byte a second until stopped or cut off."""
    with socket.create_connection(address) as conn:
        conn.sendall(
            b"POST /filter HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\n\r\n" % len(body)
        )
        for byte in body:
            if stop.wait(1.0):
                return
            try:
                conn.sendall(bytes([byte]))
            except OSError:
                return


def idle_connections(address: tuple[str, int], count: int) -> list[socket.socket]:
    sockets = []
    for _ in range(count):
        conn = socket.create_connection(address)
        conn.sendall(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        answer = b""
        while not answer.endswith(b"\r\n\r\nok"):
            chunk = conn.recv(4096)
            if not chunk:
                raise SystemExit("an idle connection was closed before it was idle")
            answer += chunk
        sockets.append(conn)
    return sockets


def slow_clients(rounds: int) -> str:
    rules = LoadRules.from_policy(default_policy())
    nodes = payloads.cluster(rules, 1000, datetime.now(UTC))
    names = [n["metadata"]["name"] for n in nodes]
    body = payloads.encode(payloads.names_args(names))
    samples: dict[str, dict[str, list[float]]] = {
        "alone": {"filter": [], "prioritize": [], "round trip": []},
        "slow clients": {"filter": [], "prioritize": [], "round trip": []},
    }
    with tempfile.TemporaryDirectory() as tmp, FakeNodeAPI(nodes) as api:
        port = free_port()
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "extender",
                "--port",
                str(port),
                "--kubeconfig",
                str(api.kubeconfig(Path(tmp) / "kubeconfig")),
                "--no-requeue",
                "--http-keep-alive-seconds",
                "300",
                "--log-level",
                "error",
            ],
            cwd=ROOT,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            for _ in range(600):
                try:
                    if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.1)
            with httpx.Client(base_url=url, timeout=30) as client:
                for block in range(2 * 4):
                    mode = "alone" if block % 2 == 0 else "slow clients"
                    held: list[socket.socket] = []
                    stop = threading.Event()
                    if mode == "slow clients":
                        held = idle_connections(("127.0.0.1", port), IDLE)
                        for _ in range(TRICKLERS):
                            threading.Thread(
                                target=trickle, args=(("127.0.0.1", port), body, stop)
                            ).start()
                    for i in range(rounds // 4 + 5):
                        started = time.perf_counter()
                        filtered = client.post("/filter", content=body)
                        scored = client.post("/prioritize", content=body)
                        elapsed = (time.perf_counter() - started) * 1000
                        if i < 5:
                            continue
                        samples[mode]["filter"].append(server_ms(filtered))
                        samples[mode]["prioritize"].append(server_ms(scored))
                        samples[mode]["round trip"].append(elapsed)
                    stop.set()
                    for conn in held:
                        conn.close()
        finally:
            process.terminate()
            process.wait(30)
    print(
        f"\nslow clients: names-only, 1,000 nodes; {IDLE} idle keep-alive connections and "
        f"{TRICKLERS} bodies sent a byte a second, in alternating blocks; ms"
    )
    print(f"{'':<14} {'alone p50/p99':>16} {'slow clients p50/p99':>22} {'ratio p50/p99':>15}")
    for what in ("filter", "prioritize", "round trip"):
        a, b = samples["alone"][what], samples["slow clients"][what]
        a50, a99, b50, b99 = (percentile(a, 50), percentile(a, 99), percentile(b, 50),
                              percentile(b, 99))  # fmt: skip
        print(
            f"{what:<14} {a50:7.3f} / {a99:7.3f} {b50:10.3f} / {b99:8.3f} "
            f"{b50 / a50:7.2f}x / {b99 / a99:4.2f}x"
        )
    a99 = percentile(samples["alone"]["round trip"], 99)
    b99 = percentile(samples["slow clients"]["round trip"], 99)
    return f"slow clients: every call answered; round-trip p99 {b99 / a99:.2f}× the calm one"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="1,000 nodes and 10,000 pods")
    parser.add_argument("--tracemalloc", action="store_true", help="top allocation sites")
    parser.add_argument("--skip-slow-clients", action="store_true")
    args = parser.parse_args()
    nodes, pods = (1000, 10_000) if args.quick else (10_000, 100_000)
    print(f"extender resource limits; cpus={os.cpu_count()}", flush=True)
    met, memory_line = memory_and_startup(nodes, pods, args.tracemalloc)
    lines = [memory_line]
    if not args.skip_slow_clients:
        lines.append(slow_clients(100 if args.quick else 400))
    print("\n" + "\n".join(lines))
    print(json.dumps({"memory_target_met": met}))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
