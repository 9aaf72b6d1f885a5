"""The sandbox's kubeconfig files: one per account with a client certificate from the
sandbox's certificate authority, one with a bearer token, and copies that reach the API
server through another port."""

from __future__ import annotations

from pathlib import Path

import yaml

from sandbox.pki import CertificateAuthority


class Kubeconfigs:
    """Writes kubeconfigs into ``workdir`` for the API server at ``api_port``."""

    workdir: Path
    ca: CertificateAuthority | None
    api_port: int
    service_kubeconfigs: dict[str, Path]

    @property
    def api_url(self) -> str:
        return f"https://127.0.0.1:{self.api_port}"

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "admin.kubeconfig"

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
