"""A throwaway PostgreSQL server (Debian's package) on 127.0.0.1, for the dispatch poller's
end-to-end test: initdb into a temporary folder, run ``postgres`` under the harness's
Supervisor, trust authentication on loopback only. As root, it runs as the package's
``postgres`` user (PostgreSQL refuses to run as root)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from sandbox.loopback import free_port
from sandbox.processes import Supervisor, wait_for


def postgres_bin() -> Path:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if not found:
        raise RuntimeError("PostgreSQL is not installed: run scripts/setup-sandbox.sh")
    return found[-1].parent


def _as_postgres() -> list[str]:
    if os.geteuid() != 0:
        return []
    return ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--"]


class Postgres:
    def __init__(self, supervisor: Supervisor) -> None:
        self._supervisor = supervisor
        self._dir = Path(tempfile.mkdtemp(prefix="loadsched-pg-"))
        self.url = ""

    def start(self) -> str:
        """Start the server; its SQLAlchemy URL (database ``postgres``, user ``postgres``)."""
        binaries = postgres_bin()
        data = self._dir / "data"
        data.mkdir()
        self._dir.chmod(0o755)
        if os.geteuid() == 0:
            shutil.chown(data, "postgres", "postgres")
        subprocess.run(
            [
                *_as_postgres(),
                str(binaries / "initdb"),
                "-D",
                str(data),
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
        )
        port = free_port()
        self._supervisor.start(
            "postgres",
            [
                *_as_postgres(),
                str(binaries / "postgres"),
                "-D",
                str(data),
                "-p",
                str(port),
                "-k",
                str(data),
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "fsync=off",
            ],
        )
        ready = [str(binaries / "pg_isready"), "-h", "127.0.0.1", "-p", str(port), "-q"]
        wait_for(
            lambda: subprocess.run(ready, check=False).returncode == 0,
            timeout=30,
            what="PostgreSQL to accept connections",
            guard=self._supervisor,
        )
        self.url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        return self.url

    def stop(self) -> None:
        self._supervisor.stop_named("postgres")
        shutil.rmtree(self._dir, ignore_errors=True)
