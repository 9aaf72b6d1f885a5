"""Where the API server is and how to authenticate: from a kubeconfig file, or in-cluster.

The ``kubernetes`` package parses kubeconfig (contexts, inline certificates, exec plugins);
this module turns its result into an ``httpx.AsyncClient`` so every call is async, has a
timeout, and can be given a fake transport in tests.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Generator
from dataclasses import dataclass, field

import httpx
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.config.config_exception import ConfigException

from shared.errors import ConfigError
from shared.kube import direct as direct_module

DEFAULT_TIMEOUT = httpx.Timeout(10.0, connect=5.0)
"""Every request but watches: 10 s overall, 5 s to connect."""
WATCH_GRACE = 30.0
"""Seconds past its ``timeoutSeconds`` a watch may stay silent. kube-apiserver ends every watch
at that time, so one still open and silent later is on a connection that died without closing
(its peer gone, a NAT entry dropped): it is abandoned and resumed."""


def watch_timeout(timeout_seconds: float, grace: float = WATCH_GRACE) -> httpx.Timeout:
    """A watch asking for ``timeoutSeconds``: no limit on the whole answer (a long poll), 5 s to
    connect, and no read waiting longer than the server's limit plus ``grace``."""
    return httpx.Timeout(None, connect=5.0, read=timeout_seconds + grace)


KEEPALIVE_EXPIRY = 60.0
"""Seconds an idle connection to the API server is kept for the next request. kube-apiserver
closes one idle for 90 s (its serving's ``IdleTimeout``); closing ours first, we never send on
a connection it is closing. httpx's default, 5 s, closed them between a quiet spell's
requests: each request after a pause, and each of a burst's bindings at once, paid a TLS
handshake (the CPU of both sides)."""


def pool_limits(max_connections: int) -> httpx.Limits:
    """An API client's pool: up to ``max_connections``, all kept alive between requests for
    :data:`KEEPALIVE_EXPIRY`."""
    return httpx.Limits(
        max_connections=max_connections,
        max_keepalive_connections=max_connections,
        keepalive_expiry=KEEPALIVE_EXPIRY,
    )


class BearerAuth(httpx.Auth):
    """Ask the configuration for the token on every request, so rotated tokens are picked up."""

    def __init__(self, configuration: k8s_client.Configuration) -> None:
        self._configuration = configuration

    def authorization(self) -> str | None:
        """The ``Authorization`` header's value now (``Bearer …``), if there is a token."""
        # kubernetes>=2x stores the kubeconfig or service-account token as "BearerToken";
        # older releases used "authorization".
        configuration = self._configuration
        token: str | None = configuration.get_api_key_with_prefix(
            "BearerToken"
        ) or configuration.get_api_key_with_prefix("authorization")
        return token

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        token = self.authorization()
        if token:
            request.headers["Authorization"] = token
        yield request


@dataclass(frozen=True)
class KubeEndpoint:
    """An API server address with its TLS and authentication settings."""

    host: str
    verify: ssl.SSLContext | bool = True
    cert: tuple[str, str] | None = None
    auth: httpx.Auth | None = field(default=None, compare=False)

    def client(
        self,
        *,
        timeout: httpx.Timeout = DEFAULT_TIMEOUT,
        transport: httpx.AsyncBaseTransport | None = None,
        max_connections: int = 10,
        direct: bool = False,
    ) -> httpx.AsyncClient:
        """A new client for this endpoint. Close it when done.

        ``direct``: a :class:`~shared.kube.direct.DirectClient`, carrying the route its owner
        writes requests to the connection by (:mod:`shared.kube.direct`; the annotator's
        PatchTransport, given as ``transport``, shares its connections with those writes).

        Keep ``max_connections`` near the number of requests in flight: httpcore checks every
        pooled connection on every request, so idle connections cost CPU."""
        client = (direct_module.DirectClient if direct else httpx.AsyncClient)(
            limits=pool_limits(max_connections),
            base_url=self.host,
            verify=self.verify,
            cert=self.cert,
            auth=self.auth,
            timeout=timeout,
            transport=transport,
            headers={"Accept": "application/json", "User-Agent": "loadsched"},
        )
        if isinstance(client, direct_module.DirectClient):
            client.route = direct_module.route_for(client, self)
        return client


def _ssl_context(configuration: k8s_client.Configuration) -> ssl.SSLContext | bool:
    if not configuration.verify_ssl:
        return False
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert or None)
    if configuration.cert_file and configuration.key_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file)
    return context


def load_endpoint(kubeconfig: str | None, *, context: str | None = None) -> KubeEndpoint:
    """Read ``kubeconfig``, or the in-cluster service account when it is ``None``."""
    configuration = k8s_client.Configuration()
    source = kubeconfig or "in-cluster configuration"
    try:
        if kubeconfig:
            k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=kubeconfig,
                context=context,
                client_configuration=configuration,
                persist_config=False,
            )
        else:
            k8s_config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=configuration
            )
    except (ConfigException, OSError, ValueError, TypeError) as e:
        raise ConfigError(source, "", f"cannot load Kubernetes client configuration: {e}") from e
    try:
        verify = _ssl_context(configuration)
    except (OSError, ssl.SSLError) as e:
        raise ConfigError(source, "", f"cannot load TLS material: {e}") from e
    auth = (
        BearerAuth(configuration)
        if configuration.api_key or configuration.refresh_api_key_hook
        else None
    )
    return KubeEndpoint(host=configuration.host, verify=verify, auth=auth)


def in_cluster() -> bool:
    """True when running in a pod with a service account."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and os.path.exists(
        "/var/run/secrets/kubernetes.io/serviceaccount/token"
    )
