"""docker-compose.yml against the Compose specification's JSON schema (from compose-go, the
reference implementation, fetched through the Go module proxy at a pinned version), and its
Prometheus configuration and recording rules through promtool. No container engine runs here:
the file is validated, not run."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_GO = "github.com/compose-spec/compose-go/v2@v2.16.2"


def compose_schema() -> dict[str, Any]:
    result = subprocess.run(
        ["go", "mod", "download", "-json", COMPOSE_GO],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
        cwd=ROOT / "hack" / "helm",
    )
    folder = Path(json.loads(result.stdout)["Dir"])
    schema: dict[str, Any] = json.loads((folder / "schema" / "compose-spec.json").read_text())
    return schema


def test_compose_file_follows_the_specification() -> None:
    schema = compose_schema()
    document = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    validator_class = jsonschema.validators.validator_for(schema)
    errors = sorted(validator_class(schema).iter_errors(document), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)
    assert set(document["services"]) == {"prometheus", "node-exporter", "annotator", "extender"}
    # a typo is caught, so the check above can fail
    broken = {**document, "services": {**document["services"], "extender": {"imagee": "x"}}}
    assert list(validator_class(schema).iter_errors(broken))
    # every file the compose file mounts from the repository exists
    for service in document["services"].values():
        for volume in service.get("volumes", ()):
            source = volume.split(":", 1)[0]
            if source.startswith("./"):
                assert (ROOT / source).is_file(), source


def test_prometheus_configuration_and_rules() -> None:
    rules = ROOT / "charts" / "loadsched" / "files" / "recording-rules.yaml"
    checked = subprocess.run(
        ["promtool", "check", "rules", str(rules)], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    config = subprocess.run(
        [
            "promtool",
            "check",
            "config",
            "--syntax-only",
            str(ROOT / "examples" / "compose" / "prometheus.yml"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert config.returncode == 0, config.stdout + config.stderr
