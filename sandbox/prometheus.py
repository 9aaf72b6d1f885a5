"""Prometheus (Debian's package) scraping the synthetic exporter every 5 s and evaluating the
recording rules shipped in ``charts/loadsched/files/recording-rules.yaml`` (and
``load-watcher-rules.yaml``, the series Trimaran reads).

The sandbox evaluates every rule group every 5 s instead of its shipped interval (30 s to
5 m), so values appear within seconds; the expressions are unchanged."""

from __future__ import annotations

import json
import os
import shutil
import signal
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from sandbox.processes import Supervisor, wait_for

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "charts" / "loadsched" / "files" / "recording-rules.yaml"
LOAD_WATCHER_RULES = ROOT / "charts" / "loadsched" / "files" / "load-watcher-rules.yaml"
SANDBOX_INTERVAL = "5s"


class Prometheus:
    def __init__(
        self, supervisor: Supervisor, workdir: Path, port: int, rules: Path = RULES
    ) -> None:
        self.supervisor = supervisor
        self.rules = rules
        """The recording rules file (the chart's by default)."""
        self.rule_interval: str | None = SANDBOX_INTERVAL
        """Every group of :attr:`rules` runs this often (5 s); ``None`` keeps the file's own."""
        self.extra_groups: list[dict[str, Any]] = yaml.safe_load(LOAD_WATCHER_RULES.read_text())[
            "groups"
        ]
        """Rule groups beside :attr:`rules`': the chart's for Trimaran's load-watcher, or a
        bench's own generated per node."""
        self.workdir = workdir
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.targets_file = workdir / "targets.json"
        self.process: Any = None

    def write_targets(self, targets: list[str]) -> None:
        staging = self.targets_file.with_suffix(".tmp")
        staging.write_text(json.dumps([{"targets": targets, "labels": {"job": "node-exporter"}}]))
        staging.replace(self.targets_file)

    def start(
        self, targets: list[str], *, honor_labels: bool = False, scrape_interval: str = "5s"
    ) -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            raise RuntimeError(
                "prometheus is not installed: run 'make setup' (Debian package prometheus)"
            )
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._write_rules()
        self.write_targets(targets)
        (self.workdir / "prometheus.yaml").write_text(
            yaml.safe_dump(
                {
                    "global": {
                        "scrape_interval": scrape_interval,
                        "evaluation_interval": SANDBOX_INTERVAL,
                    },
                    "rule_files": [str(self.workdir / "rules.yaml")],
                    "scrape_configs": [
                        {
                            "job_name": "node-exporter",
                            "honor_labels": honor_labels,
                            "file_sd_configs": [
                                {"files": [str(self.targets_file)], "refresh_interval": "5s"}
                            ],
                        }
                    ],
                }
            )
        )
        self.process = self.supervisor.start(
            "prometheus",
            [
                binary,
                f"--config.file={self.workdir / 'prometheus.yaml'}",
                f"--storage.tsdb.path={self.workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                # delete_series: a bench forgets a series' history between strategies
                "--web.enable-admin-api",
                "--log.level=warn",
            ],
        )
        wait_for(
            lambda: _ok(f"{self.url}/-/ready"),
            timeout=60,
            what="prometheus /-/ready",
            guard=self.supervisor,
        )

    def _write_rules(self) -> dict[str, float]:
        """``rules.yaml``: :attr:`rules` with every group at :attr:`rule_interval`; each group's
        name → its interval in seconds."""
        rules = yaml.safe_load(self.rules.read_text())
        rules["groups"] = rules["groups"] + [dict(g) for g in self.extra_groups]
        if self.rule_interval is not None:
            for group in rules["groups"]:
                group["interval"] = self.rule_interval
        (self.workdir / "rules.yaml").write_text(yaml.safe_dump(rules))
        return {
            group["name"]: _seconds(group.get("interval", SANDBOX_INTERVAL))
            for group in rules["groups"]
        }

    def evaluate_every(self, interval: str | None) -> None:
        """Evaluate every rule group every ``interval`` from now on (``None``: the file's own
        intervals): rules rewritten, Prometheus reloaded (SIGHUP), and waited for until its
        groups run at the new interval. The series recorded so far stay."""
        self.rule_interval = interval
        wanted = self._write_rules()
        os.kill(self.process.pid, signal.SIGHUP)
        wait_for(
            lambda: self.rule_intervals() == wanted,
            timeout=30,
            what=f"prometheus to reload its rules (every {interval or 'interval in the file'})",
            guard=self.supervisor,
        )

    def rule_intervals(self) -> dict[str, float]:
        """Each loaded rule group's name → its interval in seconds, as Prometheus reports it."""
        with urllib.request.urlopen(f"{self.url}/api/v1/rules", timeout=5) as response:
            groups = json.load(response)["data"]["groups"]
        return {group["name"]: float(group["interval"]) for group in groups}

    def stop(self) -> None:
        if self.process is not None:
            self.supervisor.stop(self.process)
            self.process = None

    def delete_series(self, name: str) -> None:
        """Forget every sample of the series named ``name`` (the admin API); rules record it
        again from their next evaluation."""
        query = urllib.parse.urlencode({"match[]": name})
        request = urllib.request.Request(
            f"{self.url}/api/v1/admin/tsdb/delete_series?{query}", method="POST"
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()

    def query(self, promql: str) -> dict[str, float]:
        """Instant query; instance label → value."""
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(url, timeout=5) as response:
            data = json.load(response)
        return {
            r["metric"].get("instance", ""): float(r["value"][1]) for r in data["data"]["result"]
        }


def _seconds(duration: str) -> float:
    """A rules file's ``30s``, ``5m`` or ``1h`` in seconds."""
    return float(duration[:-1]) * {"s": 1, "m": 60, "h": 3600}[duration[-1]]


def _ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False
