"""The real descheduler beside the sandbox, for bench/quality.py: kubernetes-sigs' own binary
(``sigs.k8s.io/descheduler``, built from ``hack/descheduler``), ``LowNodeUtilization`` on the
same Prometheus, the same recording rule and the same thresholds as loadsched's rebalancer.

What it needs out of a cluster, as its v0.36 code reads it:

- the Prometheus URL in the policy's ``metricsProviders``, with an ``authToken`` Secret (any
  token: the sandbox's Prometheus asks for none). Without one it builds its client only in a
  cluster, and every cycle fails with "prometheus client not initialized";
- the service-account CA at ``/var/run/secrets/kubernetes.io/serviceaccount/ca.crt``, a path no
  flag changes, even for an ``http://`` URL. The bench mounts the sandbox's CA there in a
  private mount namespace (``unshare``, root), seen by that process alone;
- one sample per node in [0, 1], labelled ``instance`` = the Node's name: the query renames
  each node's series of the rule (a missing node fails the whole cycle).

Its first cycle runs before its Secret reconciler has built the client, and fails; the next
ones work (``descheduling_interval`` later).
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from sandbox.build import ensure_descheduler
from sandbox.cluster import Sandbox
from sandbox.metrics_stack import MetricsStack
from sandbox.specs import NodeSpec

NAME = "descheduler"
SECRET = "descheduler-prometheus"
CA_FOLDER = "/run/secrets/kubernetes.io/serviceaccount"
"""Where it reads the CA (``/var/run`` is ``/run`` on Debian)."""


def node_query(stack: MetricsStack, nodes: Sequence[NodeSpec], rule: str) -> str:
    """Each node's value of ``rule`` (percent) as a fraction, labelled with the Node's name."""
    return " or ".join(
        f'label_replace({rule}{{instance="{stack.instance(node)}"}} / 100, '
        f'"instance", "{node.name}", "instance", ".*")'
        for node in nodes
    )


def policy(
    *, prometheus_url: str, query: str, low: float, high: float, per_node: int
) -> dict[str, Any]:
    """LowNodeUtilization: a node over ``high`` (a fraction) has up to ``per_node`` pods
    evicted per cycle while some node is under ``low``."""
    return {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "metricsProviders": [
            {
                "source": "Prometheus",
                "prometheus": {
                    "url": prometheus_url,
                    "authToken": {"secretReference": {"namespace": "default", "name": SECRET}},
                },
            }
        ],
        "profiles": [
            {
                "name": "load",
                "pluginConfig": [
                    {
                        "name": "LowNodeUtilization",
                        "args": {
                            "thresholds": {"MetricResource": round(100 * low)},
                            "targetThresholds": {"MetricResource": round(100 * high)},
                            "metricsUtilization": {
                                "source": "Prometheus",
                                "prometheus": {"query": query},
                            },
                            "evictionLimits": {"node": per_node},
                        },
                    }
                ],
                "plugins": {"balance": {"enabled": ["LowNodeUtilization"]}},
            }
        ],
    }


def argv(binary: Path, ca: Path, kubeconfig: Path, policy_file: Path, interval: str) -> list[str]:
    """The command: the CA mounted where the descheduler reads it, then the binary."""
    shim = (
        f"mount -t tmpfs tmpfs /run && mkdir -p {CA_FOLDER} && "
        f'cp "$1" {CA_FOLDER}/ca.crt && shift && exec "$@"'
    )
    return [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        shim,
        "sh",
        str(ca),
        str(binary),
        "--kubeconfig",
        str(kubeconfig),
        "--policy-config-file",
        str(policy_file),
        "--descheduling-interval",
        interval,
        "--secure-port",
        "0",
        "--v",
        "3",
    ]


def start(
    box: Sandbox,
    stack: MetricsStack,
    nodes: Sequence[NodeSpec],
    *,
    rule: str,
    low: float,
    high: float,
    per_node: int,
    interval: str,
    folder: Path,
) -> None:
    """Run the descheduler (built the first time, about 2.5 minutes) until :func:`stop`."""
    binary = ensure_descheduler(print)
    token = base64.b64encode(b"bench").decode()
    secret: Any = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": SECRET, "namespace": "default"},
        "data": {"prometheusAuthToken": token},
    }
    if not box.core.list_namespaced_secret(
        "default", field_selector=f"metadata.name={SECRET}"
    ).items:
        box.core.create_namespaced_secret("default", secret)
    folder.mkdir(parents=True, exist_ok=True)
    policy_file = folder / "descheduler.yaml"
    document = policy(
        prometheus_url=stack.prometheus.url,
        query=node_query(stack, nodes, rule),
        low=low,
        high=high,
        per_node=per_node,
    )
    policy_file.write_text(yaml.safe_dump(document, sort_keys=False))
    box.supervisor.start(
        NAME,
        argv(binary, box.pki_dir / "ca.crt", box.kubeconfig, policy_file, interval),
        cwd=folder,
    )


def stop(box: Sandbox) -> None:
    if box.supervisor.running(NAME):
        box.supervisor.stop_named(NAME)
