"""One version: pyproject.toml's, printed by every entry point's ``--version`` and carried by the
chart's ``appVersion`` and the image's version label."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from shared.version import VERSION

ROOT = Path(__file__).resolve().parents[2]
DECLARED = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_the_installed_version_is_pyproject_s() -> None:
    assert VERSION == DECLARED


@pytest.mark.parametrize(
    ("module", "prog"),
    [
        ("extender", "loadsched-extender"),
        ("annotator", "loadsched-annotator"),
        ("poller", "loadsched-dispatch-poll"),
        ("kubectl_loadsched", "kubectl loadsched"),
    ],
)
def test_every_entry_point_prints_it(module: str, prog: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", module, "--version"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{prog} {DECLARED}"


def test_the_chart_and_the_image_carry_it() -> None:
    chart = yaml.safe_load((ROOT / "charts/loadsched/Chart.yaml").read_text())
    assert chart["appVersion"] == DECLARED
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.findall(r"^ARG VERSION=(\S+)$", dockerfile, re.M) == [DECLARED]
    assert 'org.opencontainers.image.version="${VERSION}"' in dockerfile
