"""``kubectl-loadsched`` (``kubectl loadsched ...``): ``explain POD``, ``nodes``, ``quotas``,
``rebalance``.

The extender is reached through the API server's service proxy (:mod:`.proxy`), so the
cluster's RBAC decides who may reach it (``get services/proxy`` on its Service) and the
extender's own check decides who may explain a pod (``get pods`` in its namespace) and who may
see the quotas (``list nodes``, as for the status page).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

import httpx
import yaml

from kubectl_loadsched.proxy import ExtenderClient, PluginError, Service
from kubectl_loadsched.tables import explain_table, nodes_table, quotas_table, rebalance_table
from shared.errors import LoadschedError
from shared.kube.config import load_endpoint
from shared.version import add_version_flag

ENVIRONMENT = {"kubeconfig": "KUBECONFIG", "token": "LOADSCHED_TOKEN"}
"""The flags whose default is an environment variable: destination → variable."""


def parser(environ: Mapping[str, str] | None = None) -> argparse.ArgumentParser:
    """The plugin's flags and subcommands; defaults of :data:`ENVIRONMENT` from ``environ``
    (the process's environment unless given)."""
    env = os.environ if environ is None else environ
    main = argparse.ArgumentParser(
        prog="kubectl loadsched",
        description="Why pods go where: loadsched's extender, through the API server.",
    )
    add_version_flag(main)
    main.add_argument(
        "--kubeconfig",
        default=env.get(ENVIRONMENT["kubeconfig"]),
        help="kubeconfig file (unset: the in-cluster service account)",
    )
    main.add_argument("--context", default=None, help="kubeconfig context (default: current)")
    main.add_argument(
        "--service-namespace", default="loadsched-system", help="the extender Service's namespace"
    )
    main.add_argument("--service", default="loadsched-extender", help="the extender Service")
    main.add_argument("--service-port", default="8888", help="its port (number or name)")
    main.add_argument(
        "--https", action="store_true", help="the extender serves HTTPS (extender.tls)"
    )
    main.add_argument(
        "--token",
        default=env.get(ENVIRONMENT["token"]),
        help="bearer token for the extender when the kubeconfig has none (client certificates)",
    )
    main.add_argument(
        "-o", "--output", choices=("table", "json", "yaml"), default="table", help="output format"
    )
    commands = main.add_subparsers(dest="command", required=True)
    explain = commands.add_parser("explain", help="every node's verdict for a pod")
    explain.add_argument("pod", nargs="?", help="a pod's name (or -f with a pod manifest)")
    explain.add_argument("-n", "--namespace", default="default", help="the pod's namespace")
    explain.add_argument("-f", "--filename", help="a pod manifest not created yet (- for stdin)")
    explain.add_argument("--nodes", help="comma-separated node names")
    nodes = commands.add_parser("nodes", help="each node's metrics and verdict for a small pod")
    nodes.add_argument("-n", "--namespace", default="default", help="the probe pod's namespace")
    nodes.add_argument("--cpu", default="100m", help="the probe pod's CPU request")
    nodes.add_argument("--memory", default="128Mi", help="the probe pod's memory request")
    quotas = commands.add_parser(
        "quotas", help="elastic quotas: used, min, max, borrowed and lent per resource"
    )
    quotas.add_argument("-n", "--namespace", default=None, help="default: all namespaces")
    commands.add_parser(
        "rebalance",
        help="the rebalancer's last round: nodes over threshold, its plan (what it would "
        "evict with dryRun), the last evictions",
    )
    return main


def probe_pod(namespace: str, cpu: str, memory: str) -> dict[str, Any]:
    """The pod ``nodes`` asks the verdicts for: one container requesting ``cpu`` and
    ``memory``."""
    requests = {"cpu": cpu, "memory": memory}
    return {
        "metadata": {"name": "kubectl-loadsched-probe", "namespace": namespace},
        "spec": {"containers": [{"name": "probe", "resources": {"requests": requests}}]},
    }


def run(args: argparse.Namespace, client: ExtenderClient, out: TextIO) -> None:
    render: Callable[[Any], str]
    nodes = args.nodes.split(",") if getattr(args, "nodes", None) else None
    if args.command == "explain":
        if args.filename:
            if args.filename == "-":
                text = sys.stdin.read()
            else:
                with open(args.filename) as f:
                    text = f.read()
            body = yaml.safe_load(text)
            if not isinstance(body, dict):
                raise PluginError(f"{args.filename}: not a pod manifest")
            result = client.explain_body(body, nodes)
        elif args.pod:
            result = client.explain_pod(args.namespace, args.pod, nodes)
        else:
            raise PluginError("explain needs a pod name or -f MANIFEST")
        render = explain_table
    elif args.command == "nodes":
        result = client.explain_body(probe_pod(args.namespace, args.cpu, args.memory), None)
        render = nodes_table
    elif args.command == "rebalance":
        result = client.rebalance()
        render = rebalance_table
    else:
        result = client.quotas(args.namespace)
        render = quotas_table
    if args.output == "json":
        out.write(json.dumps(result, indent=2) + "\n")
    elif args.output == "yaml":
        out.write(yaml.safe_dump(result, sort_keys=False))
    else:
        out.write(render(result))


def main(
    argv: Sequence[str] | None = None,
    out: TextIO = sys.stdout,
    transport: httpx.BaseTransport | None = None,
) -> int:
    """The plugin's exit code: 0, or 1 with ``error: ...`` on stderr. ``transport`` carries
    the requests to the API server (tests: a fake service proxy)."""
    args = parser().parse_args(argv)
    service = Service(
        namespace=args.service_namespace,
        name=args.service,
        port=args.service_port,
        scheme="https" if args.https else "http",
    )
    try:
        endpoint = load_endpoint(args.kubeconfig, context=args.context)
        client = ExtenderClient(endpoint, service, token=args.token, transport=transport)
        try:
            run(args, client, out)
        finally:
            client.close()
    except (LoadschedError, OSError) as e:
        sys.stderr.write(f"error: {e}\n")
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
