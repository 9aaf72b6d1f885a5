"""loadsched's version: the installed distribution's, which pyproject.toml sets. The chart's
``appVersion`` and the image's ``org.opencontainers.image.version`` label carry the same
(tests/shared/test_version.py holds them to it)."""

from __future__ import annotations

import argparse
from importlib.metadata import PackageNotFoundError, version

try:
    VERSION = version("loadsched")
except PackageNotFoundError:  # run from a source tree that was never installed
    VERSION = "unknown"


def add_version_flag(parser: argparse.ArgumentParser) -> None:
    """``--version``: print ``<prog> <version>`` and exit."""
    parser.add_argument("--version", action="version", version=f"%(prog)s {VERSION}")
