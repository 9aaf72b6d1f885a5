"""loadsched's container image in the sandbox: built from the Dockerfile by
``scripts/build-image.sh`` (podman; a local Debian base when no image registry is reachable),
and run with podman the way a cluster would run it.

    image = build_image("localhost/loadsched:e2e")
    with Container.run(image, ["--network", "host"], name="extender") as extender:
        extender.wait_http("http://127.0.0.1:8888/healthz")
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sandbox.build import ROOT, cache_root
from sandbox.loopback import http_ok

BUILD_SCRIPT = ROOT / "scripts" / "build-image.sh"
BUILD_TIMEOUT = 1200.0
"""Seconds for a cold build: podman's packages, the base, the image (about 2 minutes here)."""
COMMAND_TIMEOUT = 120.0
"""Seconds for any other podman command."""


def podman_env() -> dict[str, str]:
    """The environment podman runs in: the configuration ``build-image.sh`` writes (runc, no
    default ulimits), unless ``CONTAINERS_CONF`` names another."""
    conf = os.environ.get("CONTAINERS_CONF") or str(cache_root() / "podman" / "containers.conf")
    return {**os.environ, "CONTAINERS_CONF": conf}


def podman(
    *args: str, check: bool = True, timeout: float = COMMAND_TIMEOUT
) -> subprocess.CompletedProcess[str]:
    """Run ``podman args``; with ``check``, a non-zero exit raises with its output."""
    result = subprocess.run(
        ["podman", *args],
        capture_output=True,
        text=True,
        env=podman_env(),
        timeout=timeout,
        check=False,
    )
    if check and result.returncode != 0:
        raise RuntimeError(
            f"podman {' '.join(args[:2])} exited with {result.returncode}:\n"
            f"{result.stdout}{result.stderr}"
        )
    return result


@dataclass(frozen=True)
class Image:
    id: str
    tag: str
    build_output: str
    """What the build script printed (the base's and the image's build times, the size)."""

    def inspect(self) -> dict[str, Any]:
        found: list[dict[str, Any]] = json.loads(podman("image", "inspect", self.id).stdout)
        return found[0]

    @property
    def size(self) -> int:
        """Bytes, as podman counts them (uncompressed, every layer)."""
        return int(self.inspect()["Size"])


def build_image(tag: str) -> Image:
    """Build (or find in podman's cache) the image of this checkout, tagged ``tag``."""
    with tempfile.TemporaryDirectory(prefix="loadsched-image-") as folder:
        iidfile = Path(folder) / "image-id"
        result = subprocess.run(
            [str(BUILD_SCRIPT), "--tag", tag, "--iidfile", str(iidfile)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=BUILD_TIMEOUT,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"{BUILD_SCRIPT.name} exited with {result.returncode}:\n"
                f"{result.stdout}{result.stderr}"
            )
        return Image(iidfile.read_text().strip(), tag, result.stdout.strip())


def container_kubeconfig(source: Path, target: Path) -> Path:
    """``source`` as one self-contained file at ``target`` (its CA inlined, no host paths), that
    the image's unprivileged user can read once mounted."""
    config = yaml.safe_load(source.read_text())
    for entry in config.get("clusters", ()):
        cluster = entry["cluster"]
        if "certificate-authority" in cluster:
            pem = Path(cluster.pop("certificate-authority")).read_bytes()
            cluster["certificate-authority-data"] = base64.b64encode(pem).decode()
    target.write_text(yaml.safe_dump(config))
    target.chmod(0o644)
    return target


class Container:
    """One detached container of an image; removed when it stops."""

    def __init__(self, name: str) -> None:
        self.name = name

    @classmethod
    @contextmanager
    def run(
        cls,
        image: Image,
        options: Sequence[str],
        command: Sequence[str] = (),
        *,
        name: str,
    ) -> Iterator[Container]:
        """``podman run --detach options image command``, removed on leaving the block."""
        container = cls(f"loadsched-{name}-{uuid.uuid4().hex[:8]}")
        podman("run", "--detach", "--name", container.name, *options, image.id, *command)
        try:
            yield container
        finally:
            container.remove()

    def inspect(self) -> dict[str, Any]:
        found: list[dict[str, Any]] = json.loads(podman("container", "inspect", self.name).stdout)
        return found[0]

    def running(self) -> bool:
        result = podman(
            "container", "inspect", "--format", "{{.State.Running}}", self.name, check=False
        )
        return result.stdout.strip() == "true"

    def exec(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` inside, as the container's own user."""
        return podman("exec", self.name, *argv, check=check)

    def logs(self) -> str:
        result = podman("logs", self.name, check=False)
        return result.stdout + result.stderr

    def wait_http(self, url: str, *, timeout: float = 60.0) -> None:
        """Wait for ``url`` to answer 200; a container that has exited ends the wait at once."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if http_ok(url):
                return
            if not self.running():
                raise RuntimeError(f"container {self.name} exited:\n{self.logs()}")
            time.sleep(0.2)
        raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {url}:\n{self.logs()}")

    def remove(self) -> None:
        podman("rm", "--force", "--time", "2", self.name, check=False)
