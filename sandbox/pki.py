"""The sandbox's certificates: a CA, the API server's serving certificate, client
certificates for the admin and each component, and the service-account key pair."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = timedelta(days=7)


@dataclass(frozen=True)
class CertFiles:
    cert: Path
    key: Path


def _write_key(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _name(common_name: str, organizations: tuple[str, ...] = ()) -> x509.Name:
    parts = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    return x509.Name([*parts, x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


class CertificateAuthority:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.now(UTC)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(_name("loadsched-sandbox-ca"))
            .issuer_name(_name("loadsched-sandbox-ca"))
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self._key, hashes.SHA256())
        )
        self.files = CertFiles(directory / "ca.crt", directory / "ca.key")
        self.files.cert.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))
        _write_key(self._key, self.files.key)

    def issue(
        self,
        name: str,
        common_name: str,
        *,
        organizations: tuple[str, ...] = (),
        ips: tuple[str, ...] = (),
        dns: tuple[str, ...] = (),
        server: bool = False,
    ) -> CertFiles:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.now(UTC)
        usage = [ExtendedKeyUsageOID.SERVER_AUTH] if server else [ExtendedKeyUsageOID.CLIENT_AUTH]
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name, organizations))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usage), critical=False)
        )
        sans: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
        sans += [x509.DNSName(d) for d in dns]
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        files = CertFiles(self.directory / f"{name}.crt", self.directory / f"{name}.key")
        files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(key, files.key)
        return files


def service_account_keys(directory: Path) -> CertFiles:
    """An RSA key pair for signing service-account tokens: (public ``.pub``, private ``.key``)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    files = CertFiles(directory / "sa.pub", directory / "sa.key")
    files.cert.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    _write_key(key, files.key)
    return files


@dataclass(frozen=True)
class MutualTLS:
    """A CA of its own, a serving certificate for 127.0.0.1 and a client certificate, both
    signed by it: what ``--tls-cert-file``, ``--tls-key-file`` and ``--tls-client-ca-file``
    and kube-scheduler's extender ``tlsConfig`` (caFile, certFile, keyFile) take."""

    ca: Path
    server: CertFiles
    client: CertFiles


def mutual_tls(directory: Path, *, client: str = "kube-scheduler") -> MutualTLS:
    """Certificates for an HTTPS endpoint on 127.0.0.1 that verifies its clients."""
    authority = CertificateAuthority(directory)
    server = authority.issue(
        "server", "loadsched-extender", server=True, ips=("127.0.0.1",), dns=("localhost",)
    )
    return MutualTLS(authority.files.cert, server, authority.issue("client", client))
