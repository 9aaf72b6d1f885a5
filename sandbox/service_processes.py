"""loadsched's services (extender, job dispatch, annotator) and the minimal Go extender as
processes beside the sandbox's control plane."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

from sandbox.build import ROOT, ensure_minimal_extender
from sandbox.kubeconfigs import Kubeconfigs
from sandbox.loopback import free_port, http_ok
from sandbox.processes import Supervisor, wait_for


class ServiceProcesses(Kubeconfigs):
    """Starts loadsched's services under ``supervisor``, each with its account's kubeconfig."""

    supervisor: Supervisor

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
