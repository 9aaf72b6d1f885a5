"""``loadsched-annotator`` / ``python -m annotator``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import uvloop

from annotator.main import serve
from annotator.settings import load_settings
from shared.errors import ConfigError
from shared.kube.settings import add_flags as add_kube_flags
from shared.logs import configure_logging
from shared.settings import ENV_PREFIX
from shared.version import add_version_flag


def build_parser() -> argparse.ArgumentParser:
    """The flags; each sets the setting of its name, also read from ``LOADSCHED_<NAME>``
    (docs/reference/cli.md is generated from them)."""
    parser = argparse.ArgumentParser(
        prog="loadsched-annotator",
        description="Sync real node usage from Prometheus onto Node annotations, and hot values. "
        f"Every flag has an environment equivalent: {ENV_PREFIX}<FLAG>, "
        f"e.g. {ENV_PREFIX}PROMETHEUS_URL.",
    )
    add_version_flag(parser)
    add = parser.add_argument
    add("--policy", help="DynamicSchedulerPolicy file (default: crane's defaults)")
    add("--prometheus-url", help="Prometheus base URL, e.g. http://prometheus:9090")
    add("--prometheus-bearer-token-file", help="file with a bearer token for Prometheus")
    add("--prometheus-username", help="basic-auth user for Prometheus")
    add("--prometheus-password-file", help="file with the basic-auth password")
    add("--prometheus-ca-file", help="CA bundle for Prometheus's certificate")
    add(
        "--prometheus-insecure-skip-verify",
        action="store_true",
        default=None,
        help="skip TLS verification",
    )
    add("--prometheus-timeout", type=float, help="seconds per query (default 10)")
    add("--kubeconfig", help="kubeconfig (default: in-cluster)")
    add("--kube-context", help="kubeconfig context")
    add_kube_flags(add)
    add(
        "--kube-direct",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="write node patches over connections of its own, not through httpx (default on)",
    )
    add("--once", action="store_true", default=None, help="sync every metric once, then exit")
    add(
        "--dry-run",
        action="store_true",
        default=None,
        help="log what would be written, write nothing",
    )
    add(
        "--no-leader-elect",
        dest="leader_elect",
        action="store_false",
        default=None,
        help="write without a lease",
    )
    add("--lease-name", help="Lease name (default loadsched-annotator)")
    add("--lease-namespace", help="Lease namespace (default: the pod's namespace)")
    add("--identity", help="this replica's holder identity")
    add("--write-concurrency", type=int, help="node patches in flight (default 8)")
    add(
        "--elastic-quota",
        action="store_true",
        default=None,
        help="run the elastic-quota controller (status.used, reclaim by eviction)",
    )
    add("--evictions-per-minute", type=float, help="reclaim eviction rate limit (default 30)")
    add("--eviction-grace-seconds", type=int, help="grace period of reclaim evictions")
    add("--quota-period", type=float, help="seconds between elastic-quota passes (default 5)")
    add("--host", help="address of /healthz, /readyz, /metrics (default 127.0.0.1)")
    add("--port", type=int, help="port of /healthz, /readyz, /metrics (default 8889; 0 = off)")
    add("--log-level", help="debug, info, warning or error")
    add("--log-format", help="text or json")
    return parser


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        settings = load_settings(**vars(parse_args(argv)))
        configure_logging(settings.log_level, settings.log_format)
        return uvloop.run(serve(settings))
    except ConfigError as e:
        sys.stderr.write(f"loadsched-annotator: {e}\n")
        return 2
    except KeyboardInterrupt:
        return 130
