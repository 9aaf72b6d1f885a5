"""A real Kubernetes control plane on 127.0.0.1: etcd, kube-apiserver,
kube-controller-manager (all its controllers) and kube-schedulers built from the Go module, and
kwok as the kubelet of every node (``sandbox/kwok.py``): nodes register, turn Ready and renew
their Leases; bound pods run, exit, and are deleted gracefully. Containers are simulated.

    with Sandbox() as sandbox:  # NodeSpec: sandbox.specs
        sandbox.create_nodes([NodeSpec("node-1", "127.0.0.2")])
        sandbox.start_scheduler("plain")
"""

from __future__ import annotations

import logging
import os
import shutil
import ssl
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from sandbox import kwok
from sandbox.build import apiserver_flags, ensure_etcd, ensure_kube_binaries, ensure_kwok
from sandbox.cluster_objects import ClusterObjects
from sandbox.control_plane_faults import ControlPlaneFaults
from sandbox.loopback import free_port, http_ok
from sandbox.pki import CertFiles, CertificateAuthority, service_account_keys
from sandbox.processes import Supervisor, wait_for
from sandbox.service_processes import ServiceProcesses
from sandbox.specs import ExtenderSpec, SchedulerHandle

logger = logging.getLogger(__name__)

SERVICE_CIDR = "10.0.0.0/24"


class Sandbox(ClusterObjects, ServiceProcesses, ControlPlaneFaults):
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
        self._api = None
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

    def _default_service_account(self) -> bool:
        self.core.read_namespaced_service_account("default", "default")
        return True

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
