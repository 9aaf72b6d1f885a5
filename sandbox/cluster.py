"""A real Kubernetes control plane on 127.0.0.1: etcd, kube-apiserver,
kube-controller-manager (all its controllers) and kube-schedulers built from the Go module, and
kwok as the kubelet of every node (``sandbox/kwok.py``): nodes register, turn Ready and renew
their Leases; bound pods run, exit, and are deleted gracefully. Containers are simulated.

    with Sandbox() as sandbox:
        sandbox.create_nodes([NodeSpec("node-1", "127.0.0.2")])
        sandbox.start_scheduler("plain")
"""

from __future__ import annotations

import base64
import json
import logging
import os
import shutil
import signal
import socket
import ssl
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from sandbox import kwok
from sandbox.build import (
    apiserver_flags,
    ensure_etcd,
    ensure_kube_binaries,
    ensure_kwok,
    ensure_minimal_extender,
)
from sandbox.pki import CertFiles, CertificateAuthority, service_account_keys
from sandbox.processes import Supervisor, wait_for
from shared.quantity import parse_quantity

logger = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[1]
SERVICE_CIDR = "10.0.0.0/24"
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class NodeSpec:
    name: str
    ip: str
    cpu: str = "8"
    memory: str = "32Gi"
    pods: str = "110"
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        resources = {
            "cpu": self.cpu,
            "memory": self.memory,
            "pods": self.pods,
            "ephemeral-storage": "100Gi",
        }
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "labels": {
                    "kubernetes.io/hostname": self.name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    kwok.KUBELET_LABEL: "kwok",
                    **self.labels,
                },
                "annotations": dict(self.annotations),
            },
            "status": {
                "capacity": resources,
                "allocatable": resources,
                "addresses": [
                    {"type": "InternalIP", "address": self.ip},
                    {"type": "Hostname", "address": self.name},
                ],
            },
        }


@dataclass(frozen=True)
class ExtenderSpec:
    """How a kube-scheduler calls the extender (its KubeSchedulerConfiguration entry)."""

    url: str
    node_cache_capable: bool = True
    ignorable: bool = True
    weight: int = 5
    preempt: bool = True
    http_timeout: str = "5s"
    bind: bool = False
    """kube-scheduler delegates binding to the extender (``bindVerb``)."""

    def config(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "urlPrefix": self.url,
            "filterVerb": "filter",
            "prioritizeVerb": "prioritize",
            "weight": self.weight,
            "nodeCacheCapable": self.node_cache_capable,
            "ignorable": self.ignorable,
            "enableHTTPS": False,
            "httpTimeout": self.http_timeout,
        }
        if self.preempt:
            entry["preemptVerb"] = "preempt"
        if self.bind:
            entry["bindVerb"] = "bind"
        return entry


@dataclass
class SchedulerHandle:
    name: str
    scheduler_name: str
    config: Path
    port: int
    process: Any


def pod_body(
    name: str,
    *,
    scheduler_name: str,
    cpu: str = "100m",
    memory: str = "64Mi",
    labels: dict[str, str] | None = None,
    namespace: str = "default",
    priority_class: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": scheduler_name,
        "containers": [
            {
                "name": "main",
                "image": PAUSE_IMAGE,
                "resources": {"requests": {"cpu": cpu, "memory": memory}},
            }
        ],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": spec,
    }


class Sandbox:
    """Starts etcd, kube-apiserver, kube-controller-manager and kwok; schedulers on demand.
    ``lease_seconds``: the nodes' Lease duration (kwok renews every quarter of it; the node
    lifecycle controller waits a quarter more before it marks a silent node NotReady)."""

    def __init__(
        self,
        workdir: Path | None = None,
        *,
        say: Callable[[str], None] | None = None,
        lease_seconds: int = kwok.LEASE_SECONDS,
    ) -> None:
        self._own_workdir = workdir is None
        base = memory_backed_folder()
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="loadsched-sandbox-", dir=base))
        self.say = say or (lambda line: print(line, file=sys.stderr, flush=True))
        self.supervisor = Supervisor(self.workdir / "logs")
        self.pki_dir = self.workdir / "pki"
        self.bin: Path | None = None
        self.api_port = 0
        self.schedulers: dict[str, SchedulerHandle] = {}
        self.service_kubeconfigs: dict[str, Path] = {}
        """kubeconfig per account (``extender``, ``annotator``, ``dispatch``, ``scheduler``);
        admin's otherwise."""
        self._api: k8s.ApiClient | None = None
        self.ca: CertificateAuthority | None = None
        self.lease_seconds = lease_seconds

    # -- lifecycle -----------------------------------------------------------------------
    def __enter__(self) -> Sandbox:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        started = time.monotonic()
        self.bin = ensure_kube_binaries(self.say)
        kwok_binary = ensure_kwok(self.say)
        etcd = str(ensure_etcd(self.say))
        self.say(
            "starting etcd, kube-apiserver, kube-controller-manager, kwok on 127.0.0.1 (about 20s)"
        )
        self.ca = CertificateAuthority(self.pki_dir)
        sa = service_account_keys(self.pki_dir)
        serving = self.ca.issue(
            "apiserver",
            "kube-apiserver",
            server=True,
            ips=("127.0.0.1", "10.0.0.1"),
            dns=("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"),
        )
        self._start_etcd(etcd)
        self._start_apiserver(serving, sa)
        self._write_kubeconfig("admin", "kubernetes-admin", ("system:masters",))
        self._start_controller_manager(sa)
        self._start_kwok(kwok_binary)
        wait_for(
            self._default_service_account,
            timeout=60,
            what="the default service account",
            guard=self.supervisor,
        )
        self.say(f"control plane ready in {time.monotonic() - started:.0f}s at {self.api_url}")

    def stop(self) -> None:
        self.supervisor.stop_all()
        if self._api is not None:
            self._api.close()  # type: ignore[no-untyped-call]
            self._api = None
        if self._own_workdir and not os.environ.get("LOADSCHED_KEEP_SANDBOX"):
            shutil.rmtree(self.workdir, ignore_errors=True)

    # -- components ----------------------------------------------------------------------
    def _start_etcd(self, etcd: str) -> None:
        port, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{port}"
        peer_url = f"http://127.0.0.1:{peer}"
        self.supervisor.start(
            "etcd",
            [
                etcd,
                "--name",
                "sandbox",
                "--data-dir",
                str(self.workdir / "etcd"),
                "--listen-client-urls",
                self.etcd_url,
                "--advertise-client-urls",
                self.etcd_url,
                "--listen-peer-urls",
                peer_url,
                "--initial-advertise-peer-urls",
                peer_url,
                "--initial-cluster",
                f"sandbox={peer_url}",
                "--log-level",
                "warn",
            ],
        )
        wait_for(lambda: http_ok(f"{self.etcd_url}/health"), timeout=30, what="etcd /health")

    def _start_apiserver(self, serving: CertFiles, sa: CertFiles) -> None:
        assert self.bin is not None and self.ca is not None
        self.api_port = free_port()
        self.supervisor.start(
            "kube-apiserver",
            [
                str(self.bin / "kube-apiserver"),
                "--etcd-servers",
                self.etcd_url,
                "--bind-address",
                "127.0.0.1",
                "--advertise-address",
                "127.0.0.1",
                "--secure-port",
                str(self.api_port),
                "--tls-cert-file",
                str(serving.cert),
                "--tls-private-key-file",
                str(serving.key),
                "--client-ca-file",
                str(self.ca.files.cert),
                "--service-account-key-file",
                str(sa.cert),
                "--service-account-signing-key-file",
                str(sa.key),
                "--service-account-issuer",
                "https://kubernetes.default.svc.cluster.local",
                "--service-cluster-ip-range",
                SERVICE_CIDR,
                "--authorization-mode",
                "RBAC",
                "--profiling=false",
                *apiserver_flags(self.bin),
                "--v=1",
            ],
        )
        admin = self.ca.issue("admin", "kubernetes-admin", organizations=("system:masters",))
        context = ssl.create_default_context(cafile=str(self.ca.files.cert))
        context.load_cert_chain(str(admin.cert), str(admin.key))
        wait_for(
            lambda: http_ok(f"{self.api_url}/readyz", context),
            timeout=90,
            what="kube-apiserver /readyz",
            guard=self.supervisor,
        )

    def _start_controller_manager(self, sa: CertFiles) -> None:
        assert self.bin is not None and self.ca is not None
        kubeconfig = self._write_kubeconfig("controller-manager", "system:kube-controller-manager")
        self.supervisor.start(
            "kube-controller-manager",
            [
                str(self.bin / "kube-controller-manager"),
                "--kubeconfig",
                str(kubeconfig),
                *_serving_flags(kubeconfig, free_port()),
                "--leader-elect=false",
                "--use-service-account-credentials=true",
                "--service-account-private-key-file",
                str(sa.key),
                "--root-ca-file",
                str(self.ca.files.cert),
                "--cluster-signing-cert-file",
                str(self.ca.files.cert),
                "--cluster-signing-key-file",
                str(self.ca.files.key),
                # what scale tests give it: the node lifecycle controller lifts the not-ready
                # taint of thousands of new nodes within a minute, not ten
                "--kube-api-qps=100",
                "--kube-api-burst=200",
                "--node-monitor-grace-period",
                f"{self.lease_seconds * 5 // 4}s",
                "--v=1",
            ],
        )

    def _start_kwok(self, binary: Path) -> None:
        # One process stands for the kubelets of all nodes, so it cannot use a node identity.
        kubeconfig = self._write_kubeconfig("kwok", "kwok", ("system:masters",))
        config = self.workdir / "kwok.yaml"
        config.write_text(kwok.config_text(lease_seconds=self.lease_seconds))
        self.supervisor.start("kwok", kwok.argv(binary, kubeconfig, config))

    def start_scheduler(
        self,
        name: str,
        *,
        scheduler_name: str = "default-scheduler",
        extender: ExtenderSpec | None = None,
        percentage_of_nodes_to_score: int = 100,
        extra: dict[str, Any] | None = None,
        binary: Path | None = None,
    ) -> SchedulerHandle:
        """Start a kube-scheduler process with one profile; ``extender`` adds loadsched;
        ``binary`` is another build of it (scheduler-plugins')."""
        assert self.bin is not None
        kubeconfig = self._write_kubeconfig(f"scheduler-{name}", "system:kube-scheduler")
        config: dict[str, Any] = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": str(kubeconfig), "qps": 500, "burst": 1000},
            "leaderElection": {"leaderElect": False},
            "percentageOfNodesToScore": percentage_of_nodes_to_score,
            "profiles": [{"schedulerName": scheduler_name}],
            **(extra or {}),
        }
        if extender is not None:
            config["extenders"] = [extender.config()]
        path = self.workdir / f"scheduler-{name}.yaml"
        path.write_text(yaml.safe_dump(config))
        return self.start_scheduler_from(
            name, path, scheduler_name=scheduler_name, kubeconfig=kubeconfig, binary=binary
        )

    def start_scheduler_from(
        self,
        name: str,
        config: Path,
        *,
        scheduler_name: str,
        kubeconfig: Path | None = None,
        binary: Path | None = None,
    ) -> SchedulerHandle:
        """Start a kube-scheduler (the sandbox's, or ``binary``) with a
        KubeSchedulerConfiguration file as it is."""
        assert self.bin is not None
        kubeconfig = kubeconfig or self._write_kubeconfig(
            f"scheduler-{name}", "system:kube-scheduler"
        )
        port = free_port()
        process = self.supervisor.start(
            f"kube-scheduler-{name}",
            [
                str(binary or self.bin / "kube-scheduler"),
                "--config",
                str(config),
                *_serving_flags(kubeconfig, port),
                f"--v={os.environ.get('LOADSCHED_SCHEDULER_V', '1')}",
            ],
        )
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        wait_for(
            lambda: http_ok(f"https://127.0.0.1:{port}/healthz", context),
            timeout=60,
            what=f"kube-scheduler {name} /healthz",
            guard=self.supervisor,
        )
        handle = SchedulerHandle(name, scheduler_name, config, port, process)
        self.schedulers[name] = handle
        return handle

    def stop_scheduler(self, name: str) -> None:
        handle = self.schedulers.pop(name)
        self.supervisor.stop(handle.process)

    # -- faults (bench/faults.py, tests/e2e/test_faults_*.py) -----------------------------
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

    def _start_service(
        self,
        name: str,
        module: str,
        port: int | None,
        args: Iterable[str],
        kubeconfig: Path | None = None,
        account: str | None = None,
    ) -> str:
        """Run one of loadsched's services as a process with its account's kubeconfig (the
        module's unless ``account`` is given; the admin's when none was installed), or
        ``kubeconfig``; its URL once ``/readyz`` answers."""
        port = port or free_port()
        argv = [
            sys.executable,
            "-m",
            module,
            "--kubeconfig",
            str(kubeconfig or self.service_kubeconfigs.get(account or module, self.kubeconfig)),
            "--port",
            str(port),
            *args,
        ]
        self.supervisor.start(name, argv, cwd=ROOT)
        url = f"http://127.0.0.1:{port}"
        wait_for(
            lambda: http_ok(f"{url}/readyz"),
            timeout=60,
            what=f"{name} /readyz",
            guard=self.supervisor,
        )
        return url

    def start_extender(
        self,
        *,
        port: int | None = None,
        args: Iterable[str] = (),
        name: str = "extender",
        api_port: int | None = None,
    ) -> str:
        """loadsched's extender on 127.0.0.1; returns its URL. ``api_port``: reach the API
        server there instead (a relay in front of it)."""
        args = list(args)
        if "--job-templates" in args and "dispatch" in self.service_kubeconfigs:
            raise ValueError(
                "the chart's accounts run dispatch in its own process (dispatch.separate): "
                "start it with Sandbox.start_dispatch, which uses the dispatch account"
            )
        return self._start_service(
            name,
            "extender",
            port,
            ["--host", "127.0.0.1", *args],
            self._kubeconfig_via(name, "extender", api_port),
        )

    def start_minimal_extender(self) -> str:
        """The minimal Go extender (``hack/minimal-extender``: every node passes, score 0)
        on 127.0.0.1, as process ``minimal-extender``; returns its URL. What any HTTP
        extender costs kube-scheduler, apart from what it decides."""
        binary = ensure_minimal_extender()
        port = free_port()
        self.supervisor.start("minimal-extender", [str(binary), f"127.0.0.1:{port}"])
        url = f"http://127.0.0.1:{port}"
        wait_for(
            lambda: http_ok(f"{url}/readyz"),
            timeout=30,
            what="minimal extender /readyz",
            guard=self.supervisor,
        )
        return url

    def _kubeconfig_via(self, name: str, account: str, api_port: int | None) -> Path | None:
        """``account``'s kubeconfig with the API server at ``api_port`` (a relay in front of
        it); ``None`` when no port is given."""
        if api_port is None:
            return None
        source = self.service_kubeconfigs.get(account, self.kubeconfig)
        config = yaml.safe_load(source.read_text())
        for cluster in config["clusters"]:
            cluster["cluster"]["server"] = f"https://127.0.0.1:{api_port}"
        kubeconfig = self.workdir / f"{name}-via-{api_port}.kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(config))
        return kubeconfig

    def start_dispatch(
        self, *, port: int | None = None, args: Iterable[str] = (), name: str = "dispatch"
    ) -> str:
        """loadsched's job dispatch alone (``--serve dispatch``), as the chart runs it with
        ``dispatch.separate``: with the dispatch account when the chart's were installed.
        ``args`` must name ``--job-templates``."""
        return self._start_service(
            name,
            "extender",
            port,
            ["--host", "127.0.0.1", "--serve", "dispatch", *args],
            account="dispatch",
        )

    def start_annotator(
        self,
        *,
        prometheus_url: str,
        args: Iterable[str] = (),
        name: str = "annotator",
        port: int | None = None,
        api_port: int | None = None,
    ) -> str:
        """loadsched's annotator, named ``name`` in the lease; returns its health URL.
        ``api_port``: reach the API server there instead (a relay in front of it)."""
        return self._start_service(
            name,
            "annotator",
            port,
            ["--prometheus-url", prometheus_url, "--identity", name, *args],
            self._kubeconfig_via(name, "annotator", api_port),
        )

    # -- clients and objects -------------------------------------------------------------
    @property
    def api_url(self) -> str:
        return f"https://127.0.0.1:{self.api_port}"

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "admin.kubeconfig"

    @property
    def api(self) -> k8s.ApiClient:
        if self._api is None:
            self._api = k8s_config.new_client_from_config(config_file=str(self.kubeconfig))  # type: ignore[no-untyped-call]
        return self._api

    @property
    def core(self) -> k8s.CoreV1Api:
        return k8s.CoreV1Api(self.api)

    def _write_kubeconfig(self, name: str, user: str, groups: tuple[str, ...] = ()) -> Path:
        assert self.ca is not None
        files = self.ca.issue(name, user, organizations=groups)
        return self._kubeconfig_file(
            name, user, {"client-certificate": str(files.cert), "client-key": str(files.key)}
        )

    def write_token_kubeconfig(self, name: str, token: str) -> Path:
        """A kubeconfig that authenticates with a bearer token (a ServiceAccount's)."""
        return self._kubeconfig_file(name, name, {"token": token})

    def _kubeconfig_file(self, name: str, user: str, credentials: dict[str, str]) -> Path:
        assert self.ca is not None
        path = self.workdir / f"{name}.kubeconfig"
        path.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [
                        {
                            "name": "sandbox",
                            "cluster": {
                                "server": self.api_url,
                                "certificate-authority": str(self.ca.files.cert),
                            },
                        }
                    ],
                    "users": [{"name": user, "user": credentials}],
                    "contexts": [
                        {"name": "sandbox", "context": {"cluster": "sandbox", "user": user}}
                    ],
                    "current-context": "sandbox",
                }
            )
        )
        path.chmod(0o600)
        return path

    def _default_service_account(self) -> bool:
        self.core.read_namespaced_service_account("default", "default")
        return True

    def create_nodes(
        self, nodes: Iterable[NodeSpec], *, workers: int = 8, timeout: float | None = None
    ) -> None:
        """Register ``nodes`` and wait until they take pods (``wait_schedulable``)."""
        core = self.core
        specs = list(nodes)
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(lambda spec: core.create_node(spec.body()), specs))
        self.wait_schedulable({spec.name for spec in specs}, timeout=timeout)

    def wait_schedulable(self, names: set[str], *, timeout: float | None = None) -> None:
        """Wait until kwok reports the nodes ``names`` Ready and the node lifecycle controller
        has lifted their ``not-ready`` taint: by default up to 2 minutes, or a tenth of a
        second a node for thousands."""
        core = self.core

        def schedulable() -> bool:
            # the watch cache's view, read as plain JSON: thousands of nodes decode fast
            listed: Any = core.list_node(resource_version="0", _preload_content=False)
            items = json.loads(listed.data)["items"]
            ready = {n["metadata"]["name"] for n in items if node_schedulable(n)}
            return names <= ready

        wait_for(
            schedulable,
            timeout=timeout or max(120.0, len(names) / 10),
            what=f"{len(names)} nodes Ready and untainted",
            # a list of thousands of nodes is work for the API server: ask less often
            interval=max(0.5, len(names) / 1000),
            guard=self.supervisor,
        )

    def annotate_node(self, name: str, annotations: dict[str, str | None]) -> None:
        self.core.patch_node(name, {"metadata": {"annotations": annotations}})

    def install_crd(self, manifest: Path) -> None:
        """Create the CustomResourceDefinition in ``manifest`` (if absent); wait until served."""
        extensions = k8s.ApiextensionsV1Api(self.api)
        body = yaml.safe_load(manifest.read_text())
        try:
            extensions.create_custom_resource_definition(body)
        except k8s.ApiException as e:
            if e.status != 409:
                raise
        name = body["metadata"]["name"]

        def established() -> bool:
            crd = extensions.read_custom_resource_definition(name)
            conditions = crd.status.conditions if crd.status else None
            return any(c.type == "Established" and c.status == "True" for c in conditions or ())

        wait_for(established, timeout=30, what=f"CRD {name} to be established")

    def create_priority_class(
        self, name: str, value: int, *, preemption_policy: str | None = None, description: str = ""
    ) -> None:
        """Create the PriorityClass (if absent) and wait until pods may name it: the API
        server's Priority admission reads PriorityClasses from its own informer, so a pod
        created just after one can be refused ("no PriorityClass with name ... was found").
        The wait asks admission itself, with a dry-run pod."""
        body = k8s.V1PriorityClass(
            metadata=k8s.V1ObjectMeta(name=name),
            value=value,
            preemption_policy=preemption_policy,
            description=description or None,
        )
        try:
            k8s.SchedulingV1Api(self.api).create_priority_class(body)
        except k8s.ApiException as e:
            if e.status != 409:
                raise
        probe = k8s.V1Pod(
            metadata=k8s.V1ObjectMeta(generate_name="priority-probe-"),
            spec=k8s.V1PodSpec(
                containers=[k8s.V1Container(name="main", image=PAUSE_IMAGE)],
                priority_class_name=name,
            ),
        )

        def admitted() -> bool:
            self.core.create_namespaced_pod("default", probe, dry_run="All")
            return True

        wait_for(admitted, timeout=30, what=f"admission to know PriorityClass {name}")

    def create_pods(self, bodies: Iterable[dict[str, Any]], *, workers: int = 8) -> None:
        core = self.core
        with ThreadPoolExecutor(workers) as pool:
            list(
                pool.map(
                    lambda b: core.create_namespaced_pod(b["metadata"]["namespace"], b), bodies
                )
            )

    def placements(self, selector: str, namespace: str = "default") -> dict[str, str | None]:
        """Pod name → node name (``None`` while unbound) for pods matching ``selector``."""
        pods = self.core.list_namespaced_pod(namespace, label_selector=selector).items
        return {
            p.metadata.name: p.spec.node_name
            for p in pods
            if p.metadata and p.metadata.name and p.spec
        }

    def wait_bound(
        self, selector: str, count: int, *, timeout: float = 120, namespace: str = "default"
    ) -> dict[str, str]:
        """Wait until ``count`` pods matching ``selector`` are bound; their placements."""
        result: dict[str, str] = {}

        def bound() -> bool:
            nonlocal result
            placed = self.placements(selector, namespace)
            result = {pod: node for pod, node in placed.items() if node}
            return len(result) >= count

        try:
            wait_for(
                bound, timeout=timeout, what=f"{count} pods {selector!r} to be bound", interval=0.5
            )
        except TimeoutError as e:
            raise TimeoutError(f"{e}; {self.why_pending(selector, namespace)}") from None
        return result

    def why_pending(self, selector: str, namespace: str = "default") -> str:
        """For a failed wait: each unbound pod's last scheduling event, and what every node
        already runs (pods, CPU requested) and carries (loadsched annotations)."""
        unbound = [p for p, node in self.placements(selector, namespace).items() if not node]
        events = self.core.list_namespaced_event(namespace).items
        last: dict[str, str] = {}
        for ev in sorted(events, key=lambda e: str(e.last_timestamp or e.event_time or "")):
            if ev.involved_object and ev.involved_object.name in unbound:
                last[ev.involved_object.name] = f"{ev.reason}: {ev.message}"
        running: dict[str, list[str]] = {}
        for pod in self.core.list_pod_for_all_namespaces().items:
            if pod.spec and pod.spec.node_name and pod.metadata:
                cpu = sum(
                    float(parse_quantity((c.resources.requests or {}).get("cpu", "0")))
                    for c in pod.spec.containers
                    if c.resources
                )
                running.setdefault(pod.spec.node_name, []).append(
                    f"{pod.metadata.namespace}/{pod.metadata.name}({cpu:g})"
                )
        nodes = []
        for node in self.core.list_node().items:
            meta = node.metadata or k8s.V1ObjectMeta()
            notes = {
                k: v
                for k, v in (meta.annotations or {}).items()
                if "loadsched" in k or k.endswith("_5m") or "usage" in k
            }
            nodes.append(f"{meta.name}: pods {running.get(meta.name or '', [])}, {notes}")
        return f"unbound {len(unbound)}: {last or 'no events'}; nodes: " + " | ".join(nodes)

    def delete_pods(
        self, selector: str, namespace: str = "default", *, force: bool = False
    ) -> None:
        """Delete gracefully (kwok finishes each delete) and wait until they are gone: kwok
        writes twice per pod (terminal status, then the final delete), so thousands of pods on a
        busy machine take minutes. ``force``: gone at once (grace period 0, as ``kubectl delete
        --force``), for benches that only clear a batch before the next."""
        self.core.delete_collection_namespaced_pod(
            namespace, label_selector=selector, grace_period_seconds=0 if force else None
        )
        wait_for(
            lambda: not self.placements(selector, namespace),
            timeout=300,
            what=f"pods {selector!r} deleted",
        )


SHM_NEEDED = 1 << 30
"""What the sandbox wants free in /dev/shm: etcd preallocates 64 MiB WAL segments."""


def memory_backed_folder() -> Path | None:
    """/dev/shm when it has room for a sandbox, else ``None`` (the system's temp folder): a
    container's /dev/shm is often 64 MiB, too small for etcd's write-ahead log."""
    shm = Path("/dev/shm")
    try:
        return shm if shm.is_dir() and shutil.disk_usage(shm).free >= SHM_NEEDED else None
    except OSError:
        return None


NOT_READY_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def node_schedulable(node: dict[str, Any]) -> bool:
    """Ready, and free of the taints the control plane puts on a node that is not (a Node as
    the API server sends it)."""
    conditions = (node.get("status") or {}).get("conditions") or ()
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    taints = (node.get("spec") or {}).get("taints") or ()
    return ready and not any(t.get("key") in NOT_READY_TAINTS for t in taints)


def _serving_flags(kubeconfig: Path, port: int) -> list[str]:
    """A control-plane component's own HTTPS endpoint on loopback, delegating authn/authz."""
    return [
        "--authentication-kubeconfig",
        str(kubeconfig),
        "--authorization-kubeconfig",
        str(kubeconfig),
        "--bind-address",
        "127.0.0.1",
        "--secure-port",
        str(port),
    ]


def _post_json(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        answer: dict[str, Any] = json.loads(response.read())
    return answer


def http_ok(url: str, context: ssl.SSLContext | None = None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as response:
            return bool(response.status == 200)
    except (OSError, ValueError):
        return False
