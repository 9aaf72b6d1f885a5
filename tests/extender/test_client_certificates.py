"""``--tls-client-ca-file`` on the real server: a certificate signed by that CA reaches the
scheduler verbs; a connection without one is refused there (403) but still gets the probes
and /metrics; a certificate from another CA fails the handshake. Without the flag, HTTPS
needs no client certificate (as before)."""

from __future__ import annotations

import ssl
from pathlib import Path

import httpx
import pytest

from extender.settings import load_settings
from sandbox.pki import MutualTLS, mutual_tls
from shared.errors import ConfigError
from tests.fakes.uvicorn_server import filter_body, real_server


def client(tls: MutualTLS, certificate: MutualTLS | None, port: int) -> httpx.Client:
    context = ssl.create_default_context(cafile=str(tls.ca))
    if certificate is not None:
        context.load_cert_chain(certificate.client.cert, certificate.client.key)
    return httpx.Client(base_url=f"https://127.0.0.1:{port}", verify=context)


def test_verbs_need_a_client_certificate_from_the_ca(tmp_path: Path) -> None:
    tls = mutual_tls(tmp_path / "ours")
    stranger = mutual_tls(tmp_path / "other")
    body, names = filter_body()
    served = real_server(
        tls_cert_file=tls.server.cert, tls_key_file=tls.server.key, tls_client_ca_file=tls.ca
    )
    with served as (_, port):
        with client(tls, tls, port) as scheduler:
            for verb in ("filter", "prioritize", "preempt"):
                payload = body if verb != "preempt" else b'{"Pod":{},"NodeNameToVictims":{}}'
                assert scheduler.post(f"/{verb}", content=payload).status_code == 200, verb
            passed = scheduler.post("/filter", content=body).json()["Nodes"]["items"]
            assert {n["metadata"]["name"] for n in passed} <= names and passed
        with client(tls, None, port) as anonymous:
            for verb in ("filter", "prioritize", "preempt"):
                response = anonymous.post(f"/{verb}", content=body)
                assert response.status_code == 403, verb
                assert "--tls-client-ca-file" in response.json()["detail"]
            for path in ("/healthz", "/readyz", "/readyz/scheduling", "/metrics"):
                assert anonymous.get(path).status_code == 200, path
        with client(tls, stranger, port) as impostor, pytest.raises(httpx.TransportError):
            impostor.post("/filter", content=body)
        with pytest.raises(httpx.TransportError):
            httpx.post(f"http://127.0.0.1:{port}/filter", content=body)


def test_without_the_flag_https_needs_no_client_certificate(tmp_path: Path) -> None:
    tls = mutual_tls(tmp_path / "ours")
    body, _ = filter_body()
    with real_server(tls_cert_file=tls.server.cert, tls_key_file=tls.server.key) as (_, port):
        with client(tls, None, port) as anonymous:
            assert anonymous.post("/filter", content=body).status_code == 200


@pytest.mark.parametrize(
    ("given", "mentions"),
    [
        ({"tls_client_ca_file": "ca.crt"}, "--tls-client-ca-file / LOADSCHED_TLS_CLIENT_CA_FILE"),
        ({"tls_cert_file": "tls.crt"}, "--tls-key-file / LOADSCHED_TLS_KEY_FILE"),
    ],
)
def test_tls_settings_that_do_not_go_together(given: dict[str, str], mentions: str) -> None:
    with pytest.raises(ConfigError, match=mentions):
        load_settings(**given)
