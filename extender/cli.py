"""``loadsched-extender`` / ``python -m extender``: its flags, then the extender served with
uvicorn (:mod:`extender.serving`)."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

import uvicorn

from extender.app import create_app, resolve_endpoint
from extender.serving import raise_open_files_limit, server_config
from extender.settings import load_settings
from shared.errors import ConfigError
from shared.kube.settings import add_flags as add_kube_flags
from shared.logs import configure_logging
from shared.settings import ENV_PREFIX
from shared.version import add_version_flag

logger = logging.getLogger("extender")


def build_parser() -> argparse.ArgumentParser:
    """The flags; each sets the setting of its name, also read from ``LOADSCHED_<NAME>``
    (docs/reference/cli.md is generated from them)."""
    parser = argparse.ArgumentParser(
        prog="loadsched-extender",
        description="Serve loadsched's scheduler extender (filter, prioritize, preempt) and/or "
        "its job-dispatch API (/v1/jobs, /v1/cronjobs). "
        f"Every flag has an environment equivalent: {ENV_PREFIX}<FLAG>, e.g. {ENV_PREFIX}PORT.",
    )
    add_version_flag(parser)
    parser.add_argument(
        "--serve",
        help="scheduling, dispatch or scheduling,dispatch (default: scheduling, and dispatch "
        "when --job-templates is set)",
    )
    parser.add_argument("--policy", help="DynamicSchedulerPolicy file (default: crane's defaults)")
    parser.add_argument("--host", help="listen address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="listen port (default 8888)")
    parser.add_argument("--kubeconfig", help="kubeconfig for the node cache (names-only mode)")
    parser.add_argument("--kube-context", help="kubeconfig context")
    add_kube_flags(parser.add_argument)
    parser.add_argument(
        "--elastic-quota",
        action="store_true",
        default=None,
        help="enforce ElasticQuotas at filter and preempt (needs a cluster and the CRD)",
    )
    parser.add_argument(
        "--quota-assume-seconds",
        type=float,
        help="how long a pod admitted at filter counts before it shows up bound (default 30)",
    )
    parser.add_argument(
        "--requeue",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="make kube-scheduler retry pods refused earlier once they would be admitted, "
        "by a Node annotation write (default on with a cluster; needs patch on nodes)",
    )
    parser.add_argument(
        "--requeue-period", type=float, help="seconds between requeue checks (default 0.5)"
    )
    parser.add_argument(
        "--requeue-min-interval",
        type=float,
        help="least seconds between two requeue writes (default 1)",
    )
    parser.add_argument(
        "--filter-messages",
        help="per-node (default: crane's message, naming the node and its value) or "
        "per-reason (one phrase per reason, which kube-scheduler counts across nodes)",
    )
    parser.add_argument(
        "--filter-rejections",
        help="when-none-pass (default: refused nodes listed only in an answer that passes "
        "none, the only one kube-scheduler reads them from) or always",
    )
    parser.add_argument("--job-templates", help="job templates file; enables /v1/jobs")
    parser.add_argument(
        "--dispatch-auth", help="tokenreview (default), static or none: who may use /v1/jobs"
    )
    parser.add_argument("--dispatch-tokens-file", help="tokens for --dispatch-auth static")
    parser.add_argument(
        "--dispatch-retry-after", type=int, help="Retry-After seconds of a 429 (default 10)"
    )
    parser.add_argument("--max-body-bytes", type=int, help="largest request body accepted")
    parser.add_argument("--tls-cert-file", help="serve HTTPS with this certificate (PEM)")
    parser.add_argument("--tls-key-file", help="the certificate's private key (PEM)")
    parser.add_argument(
        "--tls-client-ca-file",
        help="verify client certificates against this CA (PEM); the scheduler verbs then "
        "refuse clients without one",
    )
    parser.add_argument(
        "--http-keep-alive-seconds", type=int, help="idle connections closed after (default 5)"
    )
    parser.add_argument(
        "--http-request-seconds",
        type=float,
        help="a request must arrive whole within this many seconds (default 60)",
    )
    parser.add_argument(
        "--http-max-header-bytes", type=int, help="largest request headers (default 65536)"
    )
    parser.add_argument(
        "--http-max-connections",
        type=int,
        help="connections and requests in progress beyond which requests get 503 (default 4096)",
    )
    parser.add_argument("--log-level", help="debug, info, warning or error")
    parser.add_argument("--log-format", help="text or json")
    return parser


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        settings = load_settings(**vars(args))
        configure_logging(settings.log_level, settings.log_format)
        app = create_app(settings, endpoint=resolve_endpoint(settings))
    except ConfigError as e:
        sys.stderr.write(f"loadsched-extender: {e}\n")
        return 2
    raise_open_files_limit(settings.http_max_connections)
    scheme = "https" if settings.tls_cert_file else "http"
    logger.info("serving on %s://%s:%d", scheme, settings.host, settings.port)
    uvicorn.Server(server_config(app, settings)).run()
    return 0
