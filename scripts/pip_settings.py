"""The pip settings of this machine that a build or a container must share to reach the
package index: index, extra index, trusted hosts, timeout and CA bundle, from pip's
configuration files and ``PIP_*`` variables alike (``pip config list``, pip's own precedence).

Run with the Python whose pip should be asked; writes ``NAME=value`` items, each ended by a NUL:
``PIP_INDEX_URL``, ``PIP_EXTRA_INDEX_URL``, ``PIP_TRUSTED_HOST``, ``PIP_DEFAULT_TIMEOUT`` (as the
variables pip reads) and ``cert`` (the bundle's path on this machine, for the caller to mount).
Used by scripts/build-image.sh and scripts/fresh-check.sh."""

from __future__ import annotations

import ast
import subprocess
import sys

NAMES = {
    "index-url": "PIP_INDEX_URL",
    "extra-index-url": "PIP_EXTRA_INDEX_URL",
    "trusted-host": "PIP_TRUSTED_HOST",
    "timeout": "PIP_DEFAULT_TIMEOUT",
    "default-timeout": "PIP_DEFAULT_TIMEOUT",
    "cert": "cert",
}
RANK = {"global": 0, "install": 1, ":env:": 2}
"""pip's precedence: a variable beats the [install] section, which beats [global]."""


def settings(listed: str) -> dict[str, str]:
    """The settings named in ``NAMES`` from ``pip config list`` output, the winning value each
    (lists joined by single spaces, as pip's variables take them)."""
    found: dict[str, tuple[int, str]] = {}
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        section, _, option = key.rpartition(".")
        if option in NAMES and section in RANK:
            name = NAMES[option]
            if RANK[section] >= found.get(name, (-1, ""))[0]:
                found[name] = (RANK[section], " ".join(str(ast.literal_eval(value)).split()))
    return {name: value for name, (_, value) in found.items()}


def main() -> int:
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=False
    ).stdout
    for name, value in settings(listed).items():
        sys.stdout.write(f"{name}={value}\0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
